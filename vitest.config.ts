import { defineConfig } from 'vitest/config';

// Running `npx vitest` at the root runs every package's suite; `npm test` runs them through nx.
export default defineConfig({
  test: {
    projects: ['packages/*', 'tools'],
  },
});
