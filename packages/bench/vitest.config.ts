import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'bench',
    include: ['test/**/*.test.ts'],
    // One integration test runs the real driver on a --quick subset (a few seconds).
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
