import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'ucm-hooks',
    include: ['test/**/*.test.ts'],
    // Native tests run whole programs (dlopen storms, threads): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
