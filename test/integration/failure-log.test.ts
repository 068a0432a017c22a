/**
 * Issue 22, item 8: while the Redis store is unavailable, failed calls are logged once per cause
 * and state change plus a periodic count, never one line (with a stack trace) per call. A real
 * redis-server is stopped, then 1,000 calls fail over gRPC (both gRPC servers) and /json; the log
 * must hold at most a few lines about them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { ServiceError } from '@grpc/grpc-js';
import { createApp, type App } from '../../src/app.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, capturingLogger, ruleDir } from '../helpers/app.js';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { redisBackendEnv, requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';

const requirement = requireRedis('store failure logging');

/** Calls sent while Redis is down, per server. */
const CALLS = 1_000;
/** Lines about failed gRPC calls allowed (the first failure, maybe a summary). */
const MAX_LINES = 3;

describe.skipIf(requirement.skip)('store failures are logged per cause, not per call', () => {
  const group = useProcessGroup();
  const apps: App[] = [];

  afterAll(async () => {
    for (const app of apps) await app.close();
  });

  for (const server of ['lean', 'grpc-js'] as const) {
    it(`${server}: ${CALLS} gRPC calls and 50 /json calls during an outage log at most ${MAX_LINES} lines (and /json at most 5)`, async () => {
      const redis: RedisServer = await startRedis(group);
      const dir = await ruleDir({
        'f.yaml':
          'domain: faults\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
      });
      const settings = loadSettings(
        {
          ...LOOPBACK_LISTENERS,
          GRPC_SERVER: server,
          ...redisBackendEnv(redis.address),
          REDIS_TIMEOUT: '200ms',
          STORE_FAILURE_MODE: 'error',
          CACHE_KEY_PREFIX: `${server}:`,
        },
        { config: [dir] },
      );
      const { logger, lines } = capturingLogger();
      const app = await createApp({ settings, logger, watch: false });
      apps.push(app);
      const addresses = await app.start();
      const client = createEnvoyRlsClient(`127.0.0.1:${addresses.grpcPort}`);
      try {
        // sluice listens before Redis has answered: wait (bounded) until calls are decided.
        await waitFor(
          'Redis connected',
          async () =>
            (await client
              .shouldRateLimit(rlsRequest('faults', [{ user: 'a' }]), 5_000)
              .then((r) => r.overall_code)
              .catch(() => 'error')) === 'OK',
          { timeoutMs: 10_000, intervalMs: 50 },
        );
        // Calls failed while Redis was connecting count too: they are the same cause.
        await redis.stop(true);

        const codes = new Map<number, number>();
        for (let start = 0; start < CALLS; start += 50) {
          await Promise.all(
            Array.from({ length: 50 }, async (_, k) => {
              try {
                await client.shouldRateLimit(
                  rlsRequest('faults', [{ user: `u${start + k}` }]),
                  5_000,
                );
                codes.set(0, (codes.get(0) ?? 0) + 1);
              } catch (error) {
                const code = (error as ServiceError).code;
                codes.set(code, (codes.get(code) ?? 0) + 1);
              }
            }),
          );
        }
        for (let k = 0; k < 50; k++) {
          const response = await fetch(`http://127.0.0.1:${addresses.httpPort}/json`, {
            method: 'POST',
            body: JSON.stringify({
              domain: 'faults',
              descriptors: [{ entries: [{ key: 'user', value: `j${k}` }] }],
            }),
          });
          expect(response.status).toBe(500);
        }
        // Every call failed with UNAVAILABLE (14).
        expect([...codes.entries()]).toEqual([[14, CALLS]]);
        const failures = lines.filter((line) => /ShouldRateLimit failed/.test(String(line.msg)));
        const grpc = failures.filter((line) => !String(line.msg).startsWith('/json'));
        // One line for the gRPC server's first failure (a summary only after a minute).
        expect(grpc.length).toBeGreaterThan(0);
        expect(grpc.length).toBeLessThanOrEqual(MAX_LINES);
        // /json samples its failures: at most 5 lines per cause per minute.
        expect(failures.length - grpc.length).toBeLessThanOrEqual(5);
        // Bounded in bytes too: no line per call, whatever its size.
        const bytes = lines.reduce((sum, line) => sum + JSON.stringify(line).length, 0);
        expect(bytes).toBeLessThan(50_000);
      } finally {
        client.close();
      }
    }, 60_000);
  }
});
