import { defineConfig } from 'vitest/config';

/**
 * Test tiers: unit (pure, fake clocks); contract (proto/ and envoy.yaml against Envoy's published
 * protos, docker-compose.yml and the Dockerfile with the real compose CLI and their health checks
 * run); integration (real gRPC server on port 0); e2e (a real Envoy binary).
 */
export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      {
        test: {
          name: 'contract',
          include: ['test/contract/**/*.test.ts'],
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
