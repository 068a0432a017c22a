/**
 * With the Redis store, /healthcheck and gRPC health fail while redis-server is down and recover
 * when it is back; meanwhile /json answers 500 (STORE_FAILURE_MODE=error) and the failure is
 * counted in /metrics.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, ruleDir } from '../helpers/app.js';
import { grpcHealthStatus, useProcessGroup, waitFor } from '../helpers/processes.js';
import { redisBackendEnv, requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';

const redis = requireRedis('/healthcheck with the Redis store');

describe.skipIf(redis.skip)('/healthcheck follows a real Redis store', () => {
  const group = useProcessGroup();
  let server: RedisServer;
  let app: App;
  let base: string;
  let grpcAddress: string;

  beforeAll(async () => {
    server = await startRedis(group);
    const dir = await ruleDir({
      'edge.yaml':
        'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
    });
    const settings = loadSettings(
      {
        ...LOOPBACK_LISTENERS,
        ...redisBackendEnv(server.address),
        REDIS_TIMEOUT: '500ms',
        STORE_FAILURE_MODE: 'error',
      },
      { config: [dir] },
    );
    app = await createApp({ settings, logger: silentLogger(), watch: false });
    const addresses = await app.start();
    base = `http://127.0.0.1:${addresses.httpPort}`;
    grpcAddress = `127.0.0.1:${addresses.grpcPort}`;
  });
  afterAll(async () => {
    await app?.close();
  });

  const health = async (): Promise<number> => (await fetch(`${base}/healthcheck`)).status;
  const json = async (): Promise<number> =>
    (
      await fetch(`${base}/json`, {
        method: 'POST',
        body: '{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}',
      })
    ).status;

  it('200 while Redis answers, 500 while it is down, 200 again once it is back', async () => {
    await waitFor('healthy with Redis up', async () => (await health()) === 200, {
      timeoutMs: 10_000,
      intervalMs: 100,
    });
    expect(await json()).toBe(200);
    expect(await grpcHealthStatus(grpcAddress)).toBe('SERVING');

    await server.stop(true);
    await waitFor('/healthcheck 500 with Redis down', async () => (await health()) === 500, {
      timeoutMs: 15_000,
      intervalMs: 100,
    });
    await waitFor(
      'gRPC health NOT_SERVING with Redis down',
      async () => (await grpcHealthStatus(grpcAddress)) === 'NOT_SERVING',
      { timeoutMs: 5_000, intervalMs: 100 },
    );
    expect(await json()).toBe(500);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(/^sluice_should_rate_limit_calls_total\{result="store_error"\} [1-9]/m);
    expect(metrics).toMatch(
      /^ratelimit_service_should_rate_limit_error\{err_type="redis_error"\} [1-9]/m,
    );

    server = await startRedis(group, { port: server.port });
    await waitFor('/healthcheck 200 with Redis back', async () => (await health()) === 200, {
      timeoutMs: 20_000,
      intervalMs: 100,
    });
    await waitFor(
      'gRPC health SERVING with Redis back',
      async () => (await grpcHealthStatus(grpcAddress)) === 'SERVING',
      { timeoutMs: 5_000, intervalMs: 100 },
    );
    expect(await json()).toBe(200);
  });
});
