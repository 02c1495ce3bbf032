import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'agent',
    // Every tier (README "Tests"): test/unit (native modules on their own), test/sanitize (the
    // same and stress programs under ASan+UBSan or TSan) and the rest of test/ (integration:
    // whole programs under the preload libraries). One tier: npm run test:unit | test:sanitize
    // | test:integration in this folder.
    include: ['test/**/*.test.ts'],
    // Native tests run whole programs (python3, node, a compiler): give them room.
    testTimeout: 120_000,
    hookTimeout: 300_000,
  },
});
