/**
 * The Redis store on a real `redis-server`: two sluice processes sharing one limit, one script call
 * per ShouldRateLimit whatever the number of descriptors, a TTL on every key, time from Redis
 * `TIME`, recovery from `SCRIPT FLUSH`, and the local over-limit cache.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createStore } from '../../src/stores/index.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
import {
  ensureBuilt,
  freePort,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import {
  adminClient,
  commandCalls,
  requireRedis,
  startRedis,
  type RedisServer,
} from '../helpers/redis.js';

const requirement = requireRedis('redis store integration');

/** Script calls (EVALSHA + EVAL) counted by Redis since the last CONFIG RESETSTAT. */
async function scriptCalls(admin: Redis): Promise<number> {
  const calls = await commandCalls(admin);
  return (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
}

/** Every command Redis has counted since the last CONFIG RESETSTAT, but INFO and RESETSTAT. */
async function otherCalls(admin: Redis): Promise<number> {
  let total = 0;
  for (const [name, calls] of await commandCalls(admin)) {
    if (name !== 'info' && name !== 'config|resetstat' && name !== 'config') total += calls;
  }
  return total;
}

describe.skipIf(requirement.skip)('redis store on one redis-server', () => {
  const group = useProcessGroup();
  let server: RedisServer;
  let admin: Redis;
  const stores: CounterStore[] = [];

  beforeAll(async () => {
    server = await startRedis(group);
    admin = adminClient(server.port);
  });
  afterAll(async () => {
    await Promise.all(stores.map((s) => s.close()));
    admin.disconnect();
  });

  /** A Redis store built from settings, as the app builds it. */
  async function store(env: Record<string, string> = {}): Promise<CounterStore> {
    const settings = loadSettings({
      REDIS_URL: `127.0.0.1:${server.port}`,
      REDIS_SOCKET_TYPE: 'tcp',
      CACHE_KEY_PREFIX: `t-${randomUUID()}:`,
      // Redis is up: connected before the first call, as these tests assume.
      REDIS_WAIT_AT_START: 'true',
      ...env,
    });
    const created = await createStore(settings, { clock: Date.now, logger: silentLogger() });
    stores.push(created);
    return created;
  }

  it('two sluice processes on one Redis admit exactly 100 of 400 concurrent calls', async () => {
    ensureBuilt();
    const dir = await ruleDir({
      'r.yaml':
        'domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 100}\n',
    });
    const env = {
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: `127.0.0.1:${server.port}`,
      CACHE_KEY_PREFIX: `two-${randomUUID()}:`,
    };
    const a = await startSluice(group, { configDir: dir, grpcPort: await freePort(), env });
    const b = await startSluice(group, { configDir: dir, grpcPort: await freePort(), env });
    const clients = [a, b, a, b].map((p) => createEnvoyRlsClient(`127.0.0.1:${p.grpcPort}`));
    try {
      const responses = await Promise.all(
        Array.from({ length: 400 }, (_, i) =>
          clients[i % clients.length]!.shouldRateLimit(
            rlsRequest('shared', [{ user: 'same' }]),
            15_000,
          ),
        ),
      );
      const admitted = responses.filter((r) => r.overall_code === 'OK');
      expect(admitted).toHaveLength(100);
      expect(responses.filter((r) => r.overall_code === 'OVER_LIMIT')).toHaveLength(300);
      // Each admitted call saw a distinct remaining value: 99 down to 0.
      const remaining = admitted.map((r) => r.statuses[0]!.limit_remaining).sort((x, y) => x - y);
      expect(remaining).toEqual(Array.from({ length: 100 }, (_, i) => i));
    } finally {
      for (const c of clients) c.close();
    }
    expect(a.proc.output()).not.toMatch(/unhandled/i);
    expect(b.proc.output()).not.toMatch(/unhandled/i);
  });

  describe('through the service', () => {
    let running: RunningApp;
    const prefix = `cs-${randomUUID()}:`;

    beforeAll(async () => {
      const descriptors = Array.from(
        { length: 8 },
        (_, i) =>
          `  - key: k${i}\n    rate_limits:\n      - {unit: minute, requests_per_unit: 50}\n      - {unit: hour, requests_per_unit: 500, algorithm: ${['sliding_window', 'fixed_window', 'token_bucket', 'sliding_log'][i % 4]}}\n`,
      ).join('');
      const dir = await ruleDir({ 'c.yaml': `domain: cs\ndescriptors:\n${descriptors}` });
      running = await startApp([dir], {
        BACKEND_TYPE: 'redis',
        REDIS_SOCKET_TYPE: 'tcp',
        REDIS_URL: `127.0.0.1:${server.port}`,
        CACHE_KEY_PREFIX: prefix,
        REDIS_WAIT_AT_START: 'true',
      });
    });
    afterAll(async () => {
      await running.stop();
    });

    it('one script call per ShouldRateLimit with 1, 3 and 8 descriptors; every key has a TTL', async () => {
      for (const count of [1, 3, 8]) {
        const descriptors = Array.from({ length: count }, (_, i) => ({ [`k${i}`]: `v${count}` }));
        // The first call may load the script (EVALSHA answered NOSCRIPT, then EVAL).
        await running.client.shouldRateLimit(rlsRequest('cs', descriptors));
        await admin.config('RESETSTAT');
        const response = await running.client.shouldRateLimit(rlsRequest('cs', descriptors));
        expect(response.overall_code).toBe('OK');
        expect(response.statuses).toHaveLength(count);
        const calls = await commandCalls(admin);
        expect(calls.get('evalsha'), `${count} descriptors`).toBe(1);
        expect(calls.get('eval') ?? 0).toBe(0);
      }
      const keys = await admin.keys(`${prefix}*`);
      // 1 + 3 + 8 descriptors, two limits (two counters) each.
      expect(keys).toHaveLength(24);
      for (const key of keys) {
        const ttl = await admin.pttl(key);
        expect(ttl, key).toBeGreaterThan(0);
        // Just past the window: at most the hour window plus one sub-bucket.
        expect(ttl, key).toBeLessThanOrEqual(3_600_000 + 180_000);
      }
    });
  });

  it('decides with Redis TIME: a local clock years off changes nothing', async () => {
    const settings = loadSettings({
      REDIS_URL: `127.0.0.1:${server.port}`,
      CACHE_KEY_PREFIX: `time-${randomUUID()}:`,
      REDIS_WAIT_AT_START: 'true',
    });
    // The store's clock only feeds the local cache; decisions read TIME inside the script.
    const skewed = createManualClock(Date.UTC(2001, 0, 1));
    const s = await createStore(settings, { clock: skewed.now, logger: silentLogger() });
    stores.push(s);
    const spec: CounterSpec = {
      key: 'fw|60000|time|k=v',
      algorithm: 'fixed_window',
      limit: 5,
      windowMs: 60_000,
      burst: 5,
      hits: 1,
      mode: 'enforced',
    };
    const before = Date.now();
    const { results } = await s.apply([spec]);
    const after = Date.now();
    // A fixed window ends on the minute of the Redis server's (here: this machine's) clock.
    const latest = 60_000 - (before % 60_000);
    const earliest = 60_000 - (after % 60_000);
    if (earliest <= latest) {
      expect(results[0]!.resetMs).toBeGreaterThanOrEqual(earliest - 5);
      expect(results[0]!.resetMs).toBeLessThanOrEqual(latest + 5);
    }
    expect(results[0]!.resetMs).toBeGreaterThan(0);
    expect(results[0]!.resetMs).toBeLessThanOrEqual(60_000);
  });

  it('SCRIPT FLUSH: the next call reloads the script and does not fail', async () => {
    const s = await store();
    const spec: CounterSpec = {
      key: 'sw|60000|flush|k=v',
      algorithm: 'sliding_window',
      limit: 30,
      windowMs: 60_000,
      burst: 30,
      hits: 1,
      mode: 'enforced',
    };
    expect((await s.apply([spec])).results[0]!.remaining).toBe(29);
    await admin.script('FLUSH');
    await admin.config('RESETSTAT');
    const batch = await s.apply([spec]);
    expect(batch.admitted).toBe(true);
    expect(batch.results[0]!.remaining).toBe(28);
    const calls = await commandCalls(admin);
    // EVALSHA answered NOSCRIPT, then EVAL ran the script once.
    expect(calls.get('evalsha')).toBe(1);
    expect(calls.get('eval')).toBe(1);
    await admin.script('FLUSH');
    const many = await Promise.all(Array.from({ length: 20 }, () => s.apply([spec])));
    expect(many.every((b) => b.admitted)).toBe(true);
    expect(await s.apply([{ ...spec, hits: 0 }])).toMatchObject({
      results: [{ remaining: 8 }],
    });
  });

  it('REDIS_PERSECOND: limits under a minute count on the second Redis, the others on the first', async () => {
    const second = await startRedis(group);
    const secondAdmin = adminClient(second.port);
    try {
      const prefix = `ps-${randomUUID()}:`;
      const s = await store({
        CACHE_KEY_PREFIX: prefix,
        REDIS_PERSECOND: 'true',
        REDIS_PERSECOND_URL: `127.0.0.1:${second.port}`,
        REDIS_PERSECOND_SOCKET_TYPE: 'tcp',
      });
      const perSecond: CounterSpec = {
        key: 'sw|1000|ps|k=v',
        algorithm: 'sliding_window',
        limit: 1,
        windowMs: 1_000,
        burst: 1,
        hits: 1,
        mode: 'enforced',
      };
      const perMinute: CounterSpec = {
        ...perSecond,
        key: 'sw|60000|ps|k=v',
        windowMs: 60_000,
        limit: 5,
      };
      expect((await s.apply([perSecond, perMinute])).admitted).toBe(true);
      expect(await secondAdmin.keys(`${prefix}*`)).toEqual([expect.stringContaining('sw|1000|')]);
      expect(await admin.keys(`${prefix}*`)).toEqual([expect.stringContaining('sw|60000|')]);
      // The per-second limit rejects; the minute counter (in the other Redis) keeps its count.
      const rejected = await s.apply([perSecond, perMinute]);
      expect(rejected.admitted).toBe(false);
      expect(rejected.results[0]!.overLimit).toBe(true);
    } finally {
      secondAdmin.disconnect();
    }
  });

  it('local cache: repeated calls for an over-limit key send no Redis command, and it admits again after the reset', async () => {
    const s = await store({ LOCAL_CACHE_SIZE_IN_BYTES: '1048576' });
    const spec: CounterSpec = {
      key: 'sw|1000|cache|k=v',
      algorithm: 'sliding_window',
      limit: 2,
      windowMs: 1_000,
      burst: 2,
      hits: 1,
      mode: 'enforced',
    };
    expect((await s.apply([spec])).admitted).toBe(true);
    expect((await s.apply([spec])).admitted).toBe(true);
    const first = await s.apply([spec]);
    expect(first.admitted).toBe(false);
    // Redis itself answered this one; the cache answers the next ones and says so.
    expect(first.results[0]!.fromLocalCache).toBeUndefined();
    const waitMs = first.results[0]!.resetMs;
    expect(waitMs).toBeGreaterThan(0);
    await admin.config('RESETSTAT');
    for (let k = 0; k < 20; k++) {
      const batch = await s.apply([spec]);
      expect(batch.admitted).toBe(false);
      expect(batch.results[0]!.overLimit).toBe(true);
      expect(batch.results[0]!.fromLocalCache).toBe(true);
      expect(batch.results[0]!.resetMs).toBeLessThanOrEqual(waitMs);
    }
    // Only the RESETSTAT itself and this INFO reached Redis.
    expect(await scriptCalls(admin)).toBe(0);
    expect(await otherCalls(admin)).toBe(0);
    // After the reset the key is asked again, and admitted: until then the cache keeps answering
    // (no script call), then exactly one call reaches Redis.
    await waitFor('admitted after the reset', async () => (await s.apply([spec])).admitted, {
      timeoutMs: waitMs + 5_000,
      intervalMs: 20,
    });
    expect(await scriptCalls(admin)).toBe(1);
  });
});
