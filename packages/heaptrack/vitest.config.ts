import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'heaptrack',
    // Every tier (CONTRIBUTING.md "Test"): test/unit, test/integration, test/stress and
    // test/sanitize, where the package has them. One tier: npm run test:unit (test:integration,
    // test:stress, test:sanitize) in this folder.
    include: ['test/**/*.test.ts'],
    // Tests trace whole programs (python3, node, shell pipelines, forks): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
