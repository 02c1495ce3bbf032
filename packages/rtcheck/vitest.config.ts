import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'rtcheck',
    include: ['test/**/*.test.ts'],
    // The tests run whole programs (python3, a C++ program) under the CLI.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
