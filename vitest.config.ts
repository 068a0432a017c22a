import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * Test tiers: unit (pure, fake clocks); contract (proto/ and envoy.yaml against Envoy's published
 * protos, docker-compose.yml and the Dockerfile with the real compose CLI and their health checks
 * run); integration (real gRPC server on port 0); e2e (a real Envoy binary); container (the image
 * and the compose demo, built and run with podman).
 *
 * Integration and e2e run with the default gRPC server (`GRPC_SERVER=lean`); the suites that
 * exercise the gRPC port run a second time as `integration-grpc-js` / `e2e-grpc-js` with
 * `GRPC_SERVER=grpc-js` (test helpers pass the variable to every app and process they start).
 */

/**
 * Lets a worker thread that the code under test starts (a large rule set's build,
 * src/config/offthread.ts) run the TypeScript sources: test/helpers/ts-worker-hooks.mjs.
 */
/** The container tier's time scale (test/container/podman.ts, TIME_SCALE, checks the value). */
const containerTimeScale = Math.max(
  1,
  Number(process.env['SLUICE_CONTAINER_TIME_SCALE'] ?? 1) || 1,
);

const TS_WORKERS = [
  '--import',
  fileURLToPath(new URL('./test/helpers/ts-worker-register.mjs', import.meta.url)),
];

/** Integration suites that go through the gRPC port, run against both servers. */
const GRPC_INTEGRATION = [
  'grpc-service',
  'bad-input',
  'settings-wiring',
  'cli',
  'concurrency',
  'http-health',
  'algorithms-grpc',
  'tls',
  'grpc-connections',
  'telemetry-metrics',
  'telemetry-tracing',
  'hostile-clients',
  'node-client',
  'rlqs',
].map((name) => `test/integration/${name}.test.ts`);

export default defineConfig({
  test: {
    projects: [
      { test: { name: 'unit', include: ['test/unit/**/*.test.ts'], execArgv: TS_WORKERS } },
      {
        test: {
          name: 'contract',
          include: ['test/contract/**/*.test.ts'],
          testTimeout: 30_000,
        },
      },
      // Fuzzing (test/fuzz/): fast-check with a fixed seed and a bounded number of runs;
      // `npm run test:fuzz:long` scales the runs (docs/testing.md, "Fuzzing").
      {
        test: {
          name: 'fuzz',
          include: ['test/fuzz/**/*.test.ts'],
          env: { GRPC_SERVER: 'lean' },
          testTimeout: 60_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          exclude: ['test/integration/key-flood*.test.ts'],
          env: { GRPC_SERVER: 'lean' },
          execArgv: TS_WORKERS,
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      // Key floods measure the heap after a full GC, so their worker runs with --expose-gc.
      {
        test: {
          name: 'integration-key-flood',
          include: ['test/integration/key-flood*.test.ts'],
          execArgv: ['--expose-gc'],
          testTimeout: 600_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'integration-grpc-js',
          include: GRPC_INTEGRATION,
          env: { GRPC_SERVER: 'grpc-js' },
          execArgv: TS_WORKERS,
          testTimeout: 30_000,
          hookTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          env: { GRPC_SERVER: 'lean' },
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      {
        test: {
          name: 'e2e-grpc-js',
          include: [
            'test/e2e/envoy.test.ts',
            'test/e2e/envoy-tls.test.ts',
            'test/e2e/envoy-tracing.test.ts',
            'test/e2e/rlqs.test.ts',
          ],
          env: { GRPC_SERVER: 'grpc-js' },
          testTimeout: 60_000,
          hookTimeout: 60_000,
          fileParallelism: false,
        },
      },
      // The image and the compose demo, built and run with root podman (test/container/,
      // `npm run test:container`, which .ci/run runs after `npm test`): minutes long, so never part
      // of plain `vitest run`.
      ...(process.env['SLUICE_CONTAINER'] === '1'
        ? [
            {
              test: {
                name: 'container',
                include: ['test/container/**/*.test.ts'],
                // SLUICE_CONTAINER_TIME_SCALE stretches the tier's bounds on a slow host
                // (test/container/podman.ts, TIME_SCALE).
                testTimeout: 300_000 * containerTimeScale,
                hookTimeout: 1_800_000 * containerTimeScale,
                fileParallelism: false,
              },
            },
          ]
        : []),
      // Sluice against the pinned reference (`npm run test:differential`); never part of plain
      // `vitest run`, which it would slow down by minutes.
      ...(process.env['SLUICE_DIFFERENTIAL'] === '1'
        ? [
            {
              test: {
                name: 'differential',
                include: ['test/differential/**/*.test.ts'],
                hookTimeout: 60_000,
              },
            },
          ]
        : []),
    ],
  },
});
