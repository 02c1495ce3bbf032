import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'ucm-hooks',
    // Both tiers (README "Tests"): test/sanitize (the dispatch stress under TSan) and the rest
    // of test/ (integration). One tier: npm run test:sanitize | test:integration in this folder.
    include: ['test/**/*.test.ts'],
    // Native tests run whole programs (dlopen storms, threads): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
