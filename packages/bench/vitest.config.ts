import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'bench',
    // Every tier (CONTRIBUTING.md "Test"): test/unit, test/integration, test/stress and
    // test/sanitize, where the package has them. One tier: npm run test:unit (test:integration,
    // test:stress, test:sanitize) in this folder.
    include: ['test/**/*.test.ts'],
    // One integration test runs the real driver on a --quick subset (a few seconds).
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
