/**
 * What the Redis store does beyond the counter store contract (store-contract.test.ts), on a real
 * `redis-server`: the local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`), the per-second client
 * (`REDIS_PERSECOND`), key names and TTLs (docs/semantics.md §6), and failures (not connected,
 * a server that stops answering, the PING probe that trusts it again). Decisions use a manual
 * clock passed to the script, as in the contract; the failure cases use real time, bounded.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createManualClock, type ManualClock } from '../../src/clock.js';
import { ALGORITHM_DESCRIPTORS } from '../../src/algorithms/index.js';
import { SluiceError } from '../../src/errors.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createMemoryStore } from '../../src/stores/memory/memory-store.js';
import { assembleApplyScript } from '../../src/stores/redis/apply-script.js';
import { hashTagOf } from '../../src/stores/redis/keys.js';
import { createRedisStore, type RedisClient } from '../../src/stores/redis/redis-store.js';
import { freePort, waitFor } from '../helpers/processes.js';
import {
  adminClient,
  recordingStoreMetrics,
  scriptCalls,
  startRedis,
  useSharedRedis,
} from '../helpers/redis.js';
import { decisionOf, randomSpec, specBuilder, xorshift32 } from '../helpers/specs.js';

/** A minute boundary, so fixed windows start at T0. */
const T0 = 1_699_999_980_000;
const MINUTE = 60_000;

const redis = useSharedRedis('redis store behaviour');

const spec = specBuilder({ algorithm: 'fixed_window', windowMs: MINUTE });

interface Harness {
  readonly client: Redis;
  readonly clock: ManualClock;
  readonly store: CounterStore;
  readonly prefix: string;
  readonly metrics: ReturnType<typeof recordingStoreMetrics>;
}

async function make(
  options: { localCacheBytes?: number; perSecondClient?: RedisClient } = {},
): Promise<Harness> {
  const clock = createManualClock(T0);
  const metrics = recordingStoreMetrics();
  const { client, store, prefix } = await redis.openStore('rs', {
    perSecondClient: options.perSecondClient,
    localCacheBytes: options.localCacheBytes,
    clock: clock.now,
    scriptClock: clock.now,
    metrics,
  });
  return { client, clock, store, prefix, metrics };
}

describe.skipIf(redis.requirement.skip)('redis store: local over-limit cache', () => {
  it('answers a known over-limit counter from memory, with the exact wait, until its reset', async () => {
    const { clock, store, metrics } = await make({ localCacheBytes: 10_000 });
    expect((await store.apply([spec('a', 2, 2)])).admitted).toBe(true);
    clock.advance(10_000);
    const refused = await store.apply([spec('a', 1, 2)]);
    expect(refused).toEqual({
      admitted: false,
      results: [{ overLimit: true, remaining: 0, resetMs: 50_000 }],
    });
    expect(metrics.events).toEqual([]);

    clock.advance(5_000);
    const before = await scriptCalls(redis.admin);
    const cached = await store.apply([spec('a', 1, 2)]);
    expect(cached).toEqual({
      admitted: false,
      results: [{ overLimit: true, remaining: 0, resetMs: 45_000, fromLocalCache: true }],
    });
    expect(await scriptCalls(redis.admin)).toBe(before);
    expect(metrics.events).toEqual(['cache:1']);

    // One millisecond before the reset it is still cached; at the reset Redis decides again.
    clock.advance(44_999);
    expect((await store.apply([spec('a', 1, 2)])).results[0]).toEqual({
      overLimit: true,
      remaining: 0,
      resetMs: 1,
      fromLocalCache: true,
    });
    clock.advance(1);
    const after = await store.apply([spec('a', 1, 2)]);
    expect(after).toEqual({
      admitted: true,
      results: [{ overLimit: false, remaining: 1, resetMs: MINUTE }],
    });
    expect(await scriptCalls(redis.admin)).toBe(before + 1);
  });

  it('asks Redis for a check-only call, another limit, or a shadow or quota counter', async () => {
    const { clock, store, metrics } = await make({ localCacheBytes: 10_000 });
    await store.apply([spec('a', 2, 2)]);
    await store.apply([spec('a', 1, 2)]); // refused and remembered
    clock.advance(1_000);
    const before = await scriptCalls(redis.admin);
    expect((await store.apply([spec('a', 0, 2)])).results[0]).toEqual({
      overLimit: false,
      remaining: 0,
      resetMs: 59_000,
    });
    // Under another limit (a reload) the cached entry says nothing.
    expect((await store.apply([spec('a', 1, 3)])).results[0]).toEqual({
      overLimit: false,
      remaining: 0,
      resetMs: 59_000,
    });
    expect(
      (await store.apply([spec('a', 1, 2, { mode: 'shadow' })])).results[0]!.fromLocalCache,
    ).toBeUndefined();
    expect(
      (await store.apply([spec('a', 1, 2, { mode: 'quota' })])).results[0]!.fromLocalCache,
    ).toBeUndefined();
    expect(await scriptCalls(redis.admin)).toBe(before + 4);
    expect(metrics.events).toEqual([]);
  });

  it('remembers only enforced counters a rejection found over limit, not the others', async () => {
    const { clock, store } = await make({ localCacheBytes: 10_000 });
    await store.apply([spec('full', 1, 1)]);
    // `full` rejects the batch; `room` had room and `shadow` never rejects: neither is cached.
    const refused = await store.apply([
      spec('full', 1, 1),
      spec('room', 1, 5),
      spec('shadow', 9, 1, { mode: 'shadow' }),
    ]);
    expect(refused.admitted).toBe(false);
    expect(refused.results.map((r) => r.overLimit)).toEqual([true, false, true]);
    clock.advance(1);
    const before = await scriptCalls(redis.admin);
    const again = await store.apply([spec('room', 1, 5)]);
    expect(again).toEqual({
      admitted: true,
      results: [{ overLimit: false, remaining: 4, resetMs: MINUTE - 1 }],
    });
    const shadow = await store.apply([spec('shadow', 9, 1, { mode: 'shadow' })]);
    expect(shadow.results[0]!.fromLocalCache).toBeUndefined();
    expect(await scriptCalls(redis.admin)).toBe(before + 2);
  });

  it('a batch with one cached counter charges nothing and still reports the others exactly', async () => {
    const { clock, store, metrics, prefix } = await make({ localCacheBytes: 10_000 });
    await store.apply([spec('a', 1, 1)]);
    await store.apply([spec('a', 1, 1)]); // remembered
    clock.advance(2_000);
    const before = await scriptCalls(redis.admin);
    const batch = await store.apply([spec('b', 1, 5), spec('a', 1, 1), spec('c', 2, 3)]);
    // A refused batch reports the room the others have now (nothing was charged).
    expect(batch).toEqual({
      admitted: false,
      results: [
        { overLimit: false, remaining: 5, resetMs: 58_000 },
        { overLimit: true, remaining: 0, resetMs: 58_000, fromLocalCache: true },
        { overLimit: false, remaining: 3, resetMs: 58_000 },
      ],
    });
    // One dry script call; `b` and `c` were not charged.
    expect(await scriptCalls(redis.admin)).toBe(before + 1);
    expect(metrics.events).toEqual(['cache:1']);
    const peek = await store.apply([spec('b', 1, 5), spec('c', 2, 3)]);
    expect(peek.results.map((r) => r.remaining)).toEqual([4, 1]);

    // Even when Redis no longer holds the cached counter (a restart, a flush), a batch the cache
    // refuses charges nothing: the others are only checked.
    await redis.admin.del(await redis.admin.keys(`${prefix}*a`));
    await store.apply([spec('b', 1, 5), spec('a', 1, 1), spec('c', 0, 3)]);
    const unchanged = await store.apply([spec('b', 0, 5), spec('c', 0, 3)]);
    expect(unchanged.results.map((r) => r.remaining)).toEqual([4, 1]);

    // The same batch without a cache gets the same answer from Redis.
    const plain = await make();
    await plain.store.apply([spec('a', 1, 1)]);
    plain.clock.advance(2_000);
    const uncached = await plain.store.apply([spec('b', 1, 5), spec('a', 1, 1), spec('c', 2, 3)]);
    expect(uncached.results).toEqual(batch.results.map(({ fromLocalCache: _, ...rest }) => rest));
  });

  it('spends its budget on enforced counters only: a shadow counter over limit evicts nothing', async () => {
    // Room for one entry (a one-character key costs 98 bytes).
    const { store } = await make({ localCacheBytes: 98 });
    await store.apply([spec('e', 1, 1)]);
    const refused = await store.apply([spec('e', 1, 1), spec('s', 9, 1, { mode: 'shadow' })]);
    expect(refused.results.map((r) => r.overLimit)).toEqual([true, true]);
    expect((await store.apply([spec('e', 1, 1)])).results[0]!.fromLocalCache).toBe(true);
  });

  it('checks the cumulative hits of a key that appears twice in one batch', async () => {
    const { store } = await make({ localCacheBytes: 10_000 });
    await store.apply([spec('a', 2, 3)]);
    // 2 + 1 + 1 > 3: the second spec is refused for cumulative hits 2 and is cached as such.
    const refused = await store.apply([spec('a', 1, 3), spec('a', 1, 3)]);
    expect(refused.admitted).toBe(false);
    expect(refused.results.map((r) => r.overLimit)).toEqual([false, true]);
    // One hit alone still fits: the cache must not answer for it.
    const one = await store.apply([spec('a', 1, 3)]);
    expect(one).toEqual({
      admitted: true,
      results: [{ overLimit: false, remaining: 0, resetMs: MINUTE }],
    });
    // Now two more never fit, and the second of them is answered from the cache.
    const cachedPair = await store.apply([spec('a', 1, 3), spec('a', 1, 3)]);
    expect(cachedPair.results.map((r) => r.overLimit)).toEqual([true, true]);
  });

  it('without a budget there is no cache: every call asks Redis', async () => {
    const { store, metrics } = await make({ localCacheBytes: 0 });
    await store.apply([spec('a', 1, 1)]);
    await store.apply([spec('a', 1, 1)]);
    const before = await scriptCalls(redis.admin);
    const third = await store.apply([spec('a', 1, 1)]);
    expect(third.results[0]!.fromLocalCache).toBeUndefined();
    expect(await scriptCalls(redis.admin)).toBe(before + 1);
    expect(metrics.events).toEqual([]);
  });
});

describe.skipIf(redis.requirement.skip)(
  'redis store: keys, the per-second client and requests',
  () => {
    it('names keys prefix{tag}v2|counterKey with a TTL, and answers an empty batch without Redis', async () => {
      const { store, prefix } = await make();
      const before = await scriptCalls(redis.admin);
      await expect(store.apply([])).resolves.toEqual({ admitted: true, results: [] });
      expect(await scriptCalls(redis.admin)).toBe(before);
      await store.apply([spec('fw|60000|edge|user=a', 1, 5)]);
      const keys = await redis.admin.keys(`${prefix}*`);
      expect(keys).toEqual([
        `${prefix}{${hashTagOf('fw|60000|edge|user=a')}}v2|fw|60000|edge|user=a`,
      ]);
      const ttl = await redis.admin.pttl(keys[0]!);
      expect(ttl).toBeGreaterThan(3_600_000);
      expect(ttl).toBeLessThanOrEqual(3_600_000 + MINUTE);
      // Counters live in Redis: the store holds none itself.
      expect(store.size()).toBe(0);
      expect(store.healthy()).toBe(true);
    });

    it('sends windows shorter than a minute to the per-second client, the rest to the main one', async () => {
      const perSecond = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
      const { store, prefix } = await make({ perSecondClient: perSecond });
      await perSecond.ping();
      const batch = await store.apply([
        spec('second', 1, 5, { windowMs: 1_000 }),
        spec('almost', 1, 5, { windowMs: MINUTE - 1 }),
        spec('minute', 1, 5, { windowMs: MINUTE }),
        spec('hour', 2, 5, { windowMs: 60 * MINUTE }),
      ]);
      expect(batch.admitted).toBe(true);
      expect(batch.results.map((r) => r.remaining)).toEqual([4, 4, 4, 3]);
      const db1 = adminClient(redis.server.port);
      try {
        await db1.select(1);
        const names = (keys: string[]) => keys.map((k) => k.slice(k.indexOf('}') + 4)).sort();
        expect(names(await db1.keys(`${prefix}*`))).toEqual(['almost', 'second']);
        expect(names(await redis.admin.keys(`${prefix}*`))).toEqual(['hour', 'minute']);
      } finally {
        db1.disconnect();
      }
    });

    it('a rejection on one client charges its group only; the batch is refused', async () => {
      const perSecond = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
      const { store } = await make({ perSecondClient: perSecond });
      await perSecond.ping();
      await store.apply([spec('s', 1, 1, { windowMs: 1_000 })]);
      const batch = await store.apply([
        spec('s', 1, 1, { windowMs: 1_000 }),
        spec('m', 1, 5, { windowMs: MINUTE }),
      ]);
      expect(batch.admitted).toBe(false);
      expect(batch.results.map((r) => r.overLimit)).toEqual([true, false]);
      expect(batch.results[1]!.remaining).toBe(4);
    });
    it('across clients the quota rule is decided on the whole batch, not per client', async () => {
      const perSecond = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
      const { store } = await make({ perSecondClient: perSecond });
      await perSecond.ping();
      await store.apply([spec('q1', 1, 1, { windowMs: 1_000 })]);
      // Quota group 0 (per-second client) has no room, group 1 (main client) has: admitted, and
      // the per-second client's enforced counter is charged although its own quota group is full.
      const batch = await store.apply([
        spec('q1', 1, 1, { windowMs: 1_000, mode: 'quota', quotaGroup: 0 }),
        spec('e1', 1, 5, { windowMs: 1_000 }),
        spec('q2', 1, 5, { mode: 'quota', quotaGroup: 1 }),
      ]);
      expect(batch.admitted).toBe(true);
      expect(batch.results.map((r) => [r.overLimit, r.remaining])).toEqual([
        [true, 0],
        [false, 4],
        [false, 4],
      ]);
      const peek = await store.apply([spec('e1', 0, 5, { windowMs: 1_000 })]);
      expect(peek.results[0]!.remaining).toBe(4);
    });
  },
);

describe.skipIf(redis.requirement.skip)('redis store: failures', () => {
  it('a script reply of the wrong shape fails the call with STORE_UNAVAILABLE, never a made-up answer', async () => {
    const { client, store } = await make();
    // The real script replaced on this connection by ones that answer something else.
    for (const lua of ['return 1', 'return {1, 0, 4}', 'return {1, 0, 4, 0, 1}']) {
      client.defineCommand('sluiceApply', { lua });
      await expect(store.apply([spec('a', 1, 5)]), lua).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: unexpected reply from the apply script',
      });
    }
    // Two groups (the per-second client): each group's reply is checked for its own size.
    const perSecond = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
    const split = await make({ perSecondClient: perSecond });
    await perSecond.ping();
    perSecond.defineCommand('sluiceApply', { lua: 'return {1, 0, 4}' });
    await expect(
      split.store.apply([spec('m', 1, 5), spec('s', 1, 5, { windowMs: 1_000 })]),
    ).rejects.toMatchObject({ message: 'redis: unexpected reply from the apply script' });
  });

  it('fails at once with STORE_UNAVAILABLE while not connected, and is unhealthy', async () => {
    const port = await freePort();
    const client = new Redis({
      port,
      host: '127.0.0.1',
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 1_000,
    });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 'x:', timeoutMs: 500, metrics });
    try {
      expect(store.healthy()).toBe(false);
      const error = await store.apply([spec('a', 1, 5)]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceError);
      expect(error).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis is not connected',
      });
      // At once: refused before any command was sent, so no timeout was counted.
      expect(metrics.events).toEqual(['error:unavailable']);
    } finally {
      await store.close();
    }
  });

  it('a server that stops answering: the call times out, later calls fail fast, a probe brings it back', async () => {
    const paused = await startRedis(redis.group);
    const client = new Redis({ port: paused.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 'p:', timeoutMs: 300, metrics });
    try {
      await client.ping();
      await waitFor('store healthy', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 20 });
      expect((await store.apply([spec('a', 1, 5)])).admitted).toBe(true);

      paused.proc.child.kill('SIGSTOP');
      const timedOut = await store.apply([spec('a', 1, 5)]).catch((e: unknown) => e);
      expect(timedOut).toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect((timedOut as Error).message).toMatch(/^redis: .*(within 300ms|timed out)/i);
      expect(metrics.events).toEqual(['error:timeout', 'error:stalled']);
      expect(store.healthy()).toBe(false);

      const failedFast = await store.apply([spec('a', 1, 5)]).catch((e: unknown) => e);
      expect(failedFast).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis is not answering (waiting for a probe)',
      });
      // Fast: refused without waiting for the server, so no second timeout was counted.
      expect(metrics.events).toEqual(['error:timeout', 'error:stalled', 'error:unavailable']);

      paused.proc.child.kill('SIGCONT');
      await waitFor('probe answered', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 20 });
      const back = await store.apply([spec('b', 1, 5)]);
      expect(back.admitted).toBe(true);
      expect(back.results[0]!.remaining).toBe(4);
    } finally {
      paused.proc.child.kill('SIGCONT');
      await store.close();
      await paused.stop();
    }
  });

  it('close() quits the clients: the store is unhealthy afterwards', async () => {
    const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    const perSecond = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    const store = createRedisStore({
      client,
      perSecondClient: perSecond,
      keyPrefix: 'c:',
      timeoutMs: 1_000,
    });
    await Promise.all([client.ping(), perSecond.ping()]);
    expect(store.healthy()).toBe(true);
    await store.close();
    await waitFor('clients ended', () => client.status === 'end' && perSecond.status === 'end', {
      timeoutMs: 5_000,
      intervalMs: 10,
    });
    expect(store.healthy()).toBe(false);
  });

  it('is unhealthy while the per-second client is down, even with the main one up', async () => {
    const port = await freePort();
    const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
    const perSecond = new Redis({
      port,
      host: '127.0.0.1',
      enableOfflineQueue: false,
      retryStrategy: () => 1_000,
    });
    perSecond.on('error', () => undefined);
    const store = createRedisStore({
      client,
      perSecondClient: perSecond,
      keyPrefix: 'd:',
      timeoutMs: 500,
    });
    try {
      await client.ping();
      expect(store.healthy()).toBe(false);
      // A minute window goes to the main client and is answered.
      expect((await store.apply([spec('m', 1, 5)])).admitted).toBe(true);
      await expect(store.apply([spec('s', 1, 5, { windowMs: 1_000 })])).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
      });
    } finally {
      await store.close();
    }
  });
});

describe.skipIf(redis.requirement.skip)(
  'redis store: the script assembled from the algorithm registry',
  () => {
    it('decides every algorithm, mode and batch shape exactly as the memory store', async () => {
      const { client, clock, store } = await make();
      // This connection runs the script assembleApplyScript builds now from the registry.
      client.defineCommand('sluiceApply', { lua: assembleApplyScript(ALGORITHM_DESCRIPTORS) });
      const memory = createMemoryStore({ clock: clock.now });
      redis.track(memory);
      // A seeded sequence of batches: every algorithm, several keys, windows of 10 s and a
      // minute, hits 0 to 3, shadow and quota counters, time moving 0 to 12 s between batches.
      const next = xorshift32(20_261_125);
      const sizes = new Set<number>();
      for (let step = 0; step < 60; step++) {
        const specs: CounterSpec[] = [];
        for (let k = 0, count = 1 + next(4); k < count; k++) specs.push(randomSpec(next, spec));
        sizes.add(specs.length);
        const expected = decisionOf(await memory.apply(specs));
        expect(
          decisionOf(await store.apply(specs)),
          `step ${step}: ${JSON.stringify(specs)}`,
        ).toEqual(expected);
        clock.advance(next(13) * 1_000);
      }
      expect(sizes).toEqual(new Set([1, 2, 3, 4]));
    });
  },
);
