#!/usr/bin/env node
// The `heaphook` executable. It is plain JavaScript, committed as is, so that npm links it at
// install time, before the TypeScript in src/ has been compiled to dist/.
import { existsSync } from 'node:fs';

const cli = new URL('../dist/cli.js', import.meta.url);
if (!existsSync(cli)) {
  process.stderr.write(
    'heaphook: @heaphook/core is not built yet; run "npx nx build core" first\n',
  );
  process.exit(2);
}
// A reader that stops early (`heaphook dump log | head`) closes the pipe: end quietly, as Unix
// tools do, rather than with an unhandled EPIPE and a stack trace.
process.stdout.on('error', (error) => {
  if (error.code === 'EPIPE') process.exit(0);
  throw error;
});
const { main } = await import(cli.href);
process.exitCode = await main(process.argv);
