/**
 * Starting with Redis unreachable: sluice listens at once (nothing waits for REDIS_TIMEOUT) with
 * its health failing, and turns healthy when Redis answers. REDIS_WAIT_AT_START=true restores the
 * wait: the store is connected when the app is built. Real redis-server processes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, capturingLogger, ruleDir } from '../helpers/app.js';
import { freePort, grpcHealthStatus, useProcessGroup, waitFor } from '../helpers/processes.js';
import { redisBackendEnv, requireRedis, startRedis } from '../helpers/redis.js';

const redis = requireRedis('starting with Redis unreachable');

const RULES = {
  'edge.yaml':
    'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
};

describe.skipIf(redis.skip)('starting with Redis unreachable', () => {
  const group = useProcessGroup();
  let app: App | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  async function build(redisPort: number, env: Record<string, string>, logger = silentLogger()) {
    const settings = loadSettings(
      {
        ...LOOPBACK_LISTENERS,
        ...redisBackendEnv(`127.0.0.1:${redisPort}`),
        ...env,
      },
      { config: [await ruleDir(RULES)] },
    );
    return createApp({ settings, logger, watch: false });
  }

  it('listens before Redis answers, health 500 until it does, then 200', async () => {
    const redisPort = await freePort();
    const { logger, lines } = capturingLogger();
    // A REDIS_TIMEOUT far beyond the hook and test timeouts: had the start waited for it, the
    // app would never be built in time. Nothing below waits on a clock.
    app = await build(redisPort, { REDIS_TIMEOUT: '10m', STORE_FAILURE_MODE: 'error' }, logger);
    const { httpPort, grpcPort } = await app.start();
    const base = `http://127.0.0.1:${httpPort}`;
    const health = async (): Promise<number> => (await fetch(`${base}/healthcheck`)).status;
    const json = async (): Promise<number> =>
      (
        await fetch(`${base}/json`, {
          method: 'POST',
          body: '{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}',
        })
      ).status;

    // Listening, and saying it is not ready: no Redis has been started on that port yet.
    expect(await health()).toBe(500);
    expect(await grpcHealthStatus(`127.0.0.1:${grpcPort}`)).toBe('NOT_SERVING');
    expect(await json()).toBe(500);
    expect(lines.find((line) => line['msg'] === 'redis store created')).toMatchObject({
      level: 30,
      waitAtStart: false,
    });

    await startRedis(group, { port: redisPort });
    await waitFor('/healthcheck 200 once Redis answers', async () => (await health()) === 200, {
      timeoutMs: 20_000,
      intervalMs: 50,
    });
    await waitFor(
      'gRPC health SERVING once Redis answers',
      async () => (await grpcHealthStatus(`127.0.0.1:${grpcPort}`)) === 'SERVING',
      { timeoutMs: 5_000, intervalMs: 50 },
    );
    expect(await json()).toBe(200);
  });

  it('REDIS_WAIT_AT_START=true: the store is connected before the app listens', async () => {
    const server = await startRedis(group);
    app = await build(server.port, { REDIS_WAIT_AT_START: 'true' });
    // No wait here: createApp waited (up to REDIS_TIMEOUT) for Redis to answer.
    expect(app.health.serving()).toBe(true);
    expect(app.store.healthy()).toBe(true);
  });
});
