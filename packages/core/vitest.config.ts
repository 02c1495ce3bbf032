import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'core',
    include: ['test/**/*.test.ts'],
    // Native tests run whole programs (compilers, python3, 200 forks): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
