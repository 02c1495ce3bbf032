import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'aix-plugin',
    include: ['test/**/*.test.ts'],
    // Native tests run whole programs (python3, node, a compiler): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
