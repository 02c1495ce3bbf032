import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'tools',
    include: ['test/**/*.test.ts'],
    // The tests build a generated backend and install packed tarballs: give them room.
    testTimeout: 300_000,
    hookTimeout: 300_000,
  },
});
