import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'heaptrack',
    include: ['test/**/*.test.ts'],
    // Tests trace whole programs (python3, node, shell pipelines, forks): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
