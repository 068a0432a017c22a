import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The tests `npm run test:mutation` (StrykerJS, stryker.config.json) runs against each mutant: the
 * unit tier, the counter store contract, the apply script's assembly, and the Redis store and
 * client cases (on real `redis-server`s when installed). Only fast tiers: the integration and e2e
 * tiers run dist/, not the mutated sources. See docs/testing.md, "Mutation testing".
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
    include: [
      'test/unit/**/*.test.ts',
      'test/contract/store-contract.test.ts',
      'test/contract/apply-script-assembly.test.ts',
      'test/contract/redis-store.test.ts',
      'test/contract/redis-connect.test.ts',
      'test/contract/redis-store-states.test.ts',
      'test/contract/redis-store-cluster.test.ts',
      'test/contract/redis-timeout.test.ts',
      'test/contract/redis-store-coalescing.test.ts',
      'test/contract/cached-store-contract.test.ts',
    ],
    // A tenth of the seeded property runs: each mutant they cover costs ~1 s instead of ~15 s.
    env: { SLUICE_PROPERTY_SCALE: '0.1' },
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
