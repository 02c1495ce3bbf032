import { defineConfig } from 'vitest/config';

import LongestFirstSequencer from './tools/test-support/sequencer.ts';

// `npm test` (tools/scripts/run-tests.mjs) builds through nx, then runs every package's suite
// here in one pool of workers, longest files first: most tests wait on the programs they run,
// so a shared pool of a few workers keeps both cores busy where one vitest per package (one
// worker each on 2 cores) left them idle half the time. `npx vitest run` here does the same
// without the build; `cd packages/<name> && npx vitest run` runs one package.
export default defineConfig({
  test: {
    projects: ['packages/*', 'tools'],
    sequence: { sequencer: LongestFirstSequencer },
  },
});
