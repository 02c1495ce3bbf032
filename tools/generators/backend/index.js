// The entry point nx loads for `nx g @heaphook/tools:backend`. It is plain JavaScript,
// committed as is, so that a missing build gives a clear message instead of nx's "Could not
// resolve"; the generator itself is TypeScript (src/backend-generator.ts -> dist/).
import { existsSync } from 'node:fs';

const implementation = new URL('../../dist/backend-generator.js', import.meta.url);

export default async function backend(tree, schema) {
  if (!existsSync(implementation)) {
    throw new Error(
      '@heaphook/tools is not built yet: run "npx nx build tools" (or "npm run build") first',
    );
  }
  const { backendGenerator } = await import(implementation.href);
  return backendGenerator(tree, schema);
}
