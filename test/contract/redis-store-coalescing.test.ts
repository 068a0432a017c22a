/**
 * The Redis store coalesces the requests of one event-loop turn into one script call per client
 * and slot (redis-store.ts, apply-script.ts), so the script's fixed cost and the client's cost per
 * command are shared. What must hold, on a real `redis-server`:
 *
 * - every request is still decided all or nothing, in arrival order, exactly as the memory store
 *   decides the same requests one after the other (every algorithm, shadow and quota counters,
 *   keys shared within and across requests);
 * - a turn costs one script call (INFO commandstats), never more than one per request;
 * - a call is bounded in size, never splits a request, and a failed call fails each of its
 *   requests with STORE_UNAVAILABLE.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { ALGORITHM_DESCRIPTORS } from '../../src/algorithms/index.js';
import { createManualClock } from '../../src/clock.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createMemoryStore } from '../../src/stores/memory/memory-store.js';
import type { ScriptClient } from '../../src/stores/redis/client-state.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { scriptCalls, useSharedRedis } from '../helpers/redis.js';
import { decisionOf, randomSpec, specBuilder, xorshift32 } from '../helpers/specs.js';

/** A minute boundary, so fixed windows start at T0. */
const T0 = 1_699_999_980_000;
const MINUTE = 60_000;

const redis = useSharedRedis('redis store coalescing');

const spec = specBuilder({ windowMs: MINUTE });

/** A Redis store on a fresh prefix, its decisions on `clock`'s time, and its client. */
async function make(clock: () => number): Promise<{ store: CounterStore; client: Redis }> {
  const { store, client } = await redis.openStore('co', { clock, scriptClock: clock });
  return { store, client };
}

describe.skipIf(redis.requirement.skip)(
  'redis store: the requests of one turn share a call',
  () => {
    it('decides concurrent requests in order exactly as the memory store decides them one by one', async () => {
      const clock = createManualClock(T0);
      const { store } = await make(clock.now);
      const memory = createMemoryStore({ clock: clock.now });
      redis.track(memory);
      const next = xorshift32(20_261_127);
      // 40 turns of 1 to 12 concurrent requests of 1 to 4 specs on 3 keys per algorithm, with
      // limits of 4, so keys fill up, reject and free again as time moves 0 to 12 s per turn.
      let requests = 0;
      const sizes: number[] = [];
      const before = await scriptCalls(redis.admin);
      for (let turn = 0; turn < 40; turn++) {
        const batches: CounterSpec[][] = [];
        for (let r = 0, count = 1 + next(12); r < count; r++) {
          const specs: CounterSpec[] = [];
          for (let k = 0, size = 1 + next(4); k < size; k++) specs.push(randomSpec(next, spec));
          batches.push(specs);
          sizes.push(specs.length);
        }
        requests += batches.length;
        const got = await Promise.all(batches.map((specs) => store.apply(specs)));
        for (let r = 0; r < batches.length; r++) {
          const expected = decisionOf(await memory.apply(batches[r]!));
          expect(decisionOf(got[r]!), `turn ${turn}, request ${r}`).toEqual(expected);
        }
        clock.advance(next(12_001));
      }
      // One script call per turn, however many requests it carried.
      expect(await scriptCalls(redis.admin)).toBe(before + 40);
      expect(requests).toBeGreaterThan(150);
      expect(new Set(sizes)).toEqual(new Set([1, 2, 3, 4]));
    });

    it('admits exactly the limit of many concurrent requests on one key, in one call', async () => {
      const clock = createManualClock(T0);
      const { store } = await make(clock.now);
      for (const algorithm of ALGORITHM_DESCRIPTORS) {
        const before = await scriptCalls(redis.admin);
        const answers = await Promise.all(
          Array.from({ length: 50 }, () =>
            store.apply([spec(`${algorithm.tag}|60000|one`, 1, 20, { algorithm: algorithm.name })]),
          ),
        );
        expect(await scriptCalls(redis.admin), algorithm.name).toBe(before + 1);
        const admitted = answers.map((answer) => answer.admitted);
        // The first 20 in arrival order, then none: rejected requests charge nothing.
        expect(admitted, algorithm.name).toEqual(Array.from({ length: 50 }, (_, i) => i < 20));
        expect(answers[19]!.results[0]!.remaining, algorithm.name).toBe(0);
        expect(answers[20]!.results[0]!.overLimit, algorithm.name).toBe(true);
      }
    });

    it('splits a turn into calls of at most 512 specs, never splitting a request', async () => {
      const clock = createManualClock(T0);
      const { store } = await make(clock.now);
      const before = await scriptCalls(redis.admin);
      // 100 requests of 8 specs (800 specs): two calls of 64 requests and 36; then one request of
      // 600 specs alone, with one of 1 spec after it in the same turn.
      const eight = Array.from({ length: 100 }, (_, r) =>
        Array.from({ length: 8 }, (_, k) => spec(`fw|60000|r=${r % 10}|k=${k}`, 1, 10)),
      );
      const answers = await Promise.all(eight.map((specs) => store.apply(specs)));
      expect(await scriptCalls(redis.admin)).toBe(before + 2);
      // Each key saw 10 requests: all admitted, the last with nothing left.
      expect(answers.every((answer) => answer.admitted)).toBe(true);
      expect(answers[99]!.results.map((result) => result.remaining)).toEqual(Array(8).fill(0));
      const large = Array.from({ length: 600 }, (_, k) => spec(`sw|60000|large=${k}`, 1, 1));
      const [big, small] = await Promise.all([
        store.apply(large),
        store.apply([spec('sw|60000|large=0', 1, 1)]),
      ]);
      expect(await scriptCalls(redis.admin)).toBe(before + 4);
      expect(big.admitted).toBe(true);
      expect(big.results).toHaveLength(600);
      // The small request came after the large one, which took the only hit of its key.
      expect(small.admitted).toBe(false);
    });

    it('with a per-second client, each client gets one call per turn', async () => {
      const clock = createManualClock(T0);
      const client = new Redis({ port: redis.server.port, host: '127.0.0.1' });
      const perSecondClient = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
      const store = createRedisStore({
        client,
        perSecondClient,
        keyPrefix: `co-${randomUUID()}:`,
        timeoutMs: 5_000,
        clock: clock.now,
        scriptClock: clock.now,
        ttlGraceMs: 3_600_000,
      });
      redis.track(store);
      await Promise.all([client.ping(), perSecondClient.ping()]);
      const before = await scriptCalls(redis.admin);
      // 6 requests, each a one-second limit of 4 (per-second client) and a minute limit of 10.
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          store.apply([spec('sw|1000|s', 1, 4, { windowMs: 1_000 }), spec('sw|60000|m', 1, 10)]),
        ),
      );
      expect(await scriptCalls(redis.admin)).toBe(before + 2);
      // Across clients a request is not all or nothing (README): the minute counter charges all 6.
      expect(answers.map((answer) => answer.admitted)).toEqual([
        true,
        true,
        true,
        true,
        false,
        false,
      ]);
      expect(answers.map((answer) => answer.results[1]!.remaining)).toEqual([9, 8, 7, 6, 5, 4]);
    });

    it('a call that fails fails each of its requests with STORE_UNAVAILABLE', async () => {
      const clock = createManualClock(T0);
      const { store, client } = await make(clock.now);
      // A reply one integer short for two requests of one spec (2 + 6 expected).
      client.defineCommand('sluiceApply', { lua: 'return {1, 0, 4, 0, 1, 0, 4}' });
      const two = await Promise.allSettled([
        store.apply([spec('a', 1, 5)]),
        store.apply([spec('b', 1, 5)]),
      ]);
      for (const outcome of two) {
        expect(outcome).toMatchObject({
          status: 'rejected',
          reason: {
            code: 'STORE_UNAVAILABLE',
            message: 'redis: unexpected reply from the apply script',
          },
        });
      }
      client.defineCommand('sluiceApply', { lua: "return redis.error_reply('ERR boom')" });
      const failed = await Promise.allSettled([
        store.apply([spec('a', 1, 5)]),
        store.apply([spec('b', 1, 5)]),
      ]);
      for (const outcome of failed) {
        expect(outcome).toMatchObject({
          status: 'rejected',
          reason: { code: 'STORE_UNAVAILABLE', message: 'redis: ERR boom' },
        });
      }
    });
  },
);

// The arguments of the script calls (redis-store.ts `PendingCall`, `call`, `send`; the layout in
// apply-script.ts), recorded by a wrapper around each client's registered command that still
// calls the real `redis-server`: each key sent once per call while its values agree, a counter
// of its own when any value differs, the 512-spec bound of one call, one flush per event-loop
// turn, the per-second client taking only windows under a minute, and the local cache's calls.

/** One script call's arguments, split as apply-script.ts lays them out. */
interface ScriptArgs {
  readonly all: readonly (string | number)[];
  readonly keys: readonly (string | number)[];
  /** {@link ARGS_PER_COUNTER} values per key. */
  readonly counters: readonly (string | number)[];
  /** The number of requests, then per request its size and a (counter, hits) pair per spec. */
  readonly requests: readonly (string | number)[];
}

/** Record every script call `client` makes (after the store registered the script on it). */
function recordCalls(client: Redis): ScriptArgs[] {
  const scripted = client as unknown as ScriptClient;
  const real = scripted.sluiceApply.bind(client);
  const calls: ScriptArgs[] = [];
  scripted.sluiceApply = (...args) => {
    const n = Number(args[0]);
    const counters = args.slice(1 + n + 3, 1 + n + 3 + 5 * n);
    calls.push({
      all: args,
      keys: args.slice(1, 1 + n),
      counters,
      requests: args.slice(1 + n + 3 + 5 * n),
    });
    return real(...args);
  };
  return calls;
}

async function makeRecorded(
  options: Parameters<typeof redis.openStore>[1] = {},
): Promise<{ store: CounterStore; calls: ScriptArgs[] }> {
  const { store, client } = await redis.openStore('argv', options);
  return { store, calls: recordCalls(client) };
}

describe.skipIf(redis.requirement.skip)('redis store: the arguments of a script call', () => {
  it('sends each key once when the requests of a turn share it', async () => {
    const { store, calls } = await makeRecorded();
    const request = [spec('a'), spec('b', 2)];
    await Promise.all([store.apply(request), store.apply(request)]);
    expect(calls).toHaveLength(1);
    const [call] = calls;
    expect(call!.keys).toHaveLength(2);
    expect(call!.counters).toHaveLength(10);
    // Two requests of two specs: (size, counter 1 with 1 hit, counter 2 with 2 hits) each.
    expect(call!.requests).toEqual([2, 2, 1, 1, 2, 2, 2, 1, 1, 2, 2]);
    expect(call!.all).toHaveLength(1 + 2 + 3 + 10 + 11);
  });

  const variants: [string, Partial<CounterSpec>][] = [
    ['algorithm', { algorithm: 'fixed_window' }],
    ['limit', { limit: 11 }],
    ['window', { windowMs: 120_000 }],
    ['burst', { burst: 20 }],
    ['mode', { mode: 'shadow' }],
  ];
  it.each(variants)('gives a key a counter of its own when its %s differs', async (_, more) => {
    const { store, calls } = await makeRecorded();
    await Promise.allSettled([
      store.apply([spec('x'), spec('k')]),
      store.apply([spec('x'), { ...spec('k'), ...more }]),
    ]);
    expect(calls).toHaveLength(1);
    // x once; k twice, the second time with the values that differ.
    expect(calls[0]!.keys).toHaveLength(3);
    expect(calls[0]!.keys[2]).toBe(calls[0]!.keys[1]);
    expect(calls[0]!.requests).toEqual([2, 2, 1, 1, 2, 1, 2, 1, 1, 3, 1]);
  });

  /** `count` specs on distinct keys. */
  const wide = (tag: string, count: number): CounterSpec[] =>
    Array.from({ length: count }, (_, i) => spec(`${tag}${i}`));

  it('fills a call up to exactly 512 specs, then starts the next', async () => {
    const { store, calls } = await makeRecorded();
    await Promise.all([store.apply(wide('p', 256)), store.apply(wide('q', 256))]);
    expect(calls.map((call) => call.keys.length)).toEqual([512]);
    calls.length = 0;
    await Promise.all([store.apply(wide('r', 257)), store.apply(wide('s', 256))]);
    expect(calls.map((call) => call.keys.length)).toEqual([257, 256]);
  });

  it('schedules one flush per event-loop turn, whatever the number of requests', async () => {
    const { store, calls } = await makeRecorded();
    const schedule = vi.spyOn(globalThis, 'setImmediate');
    let replies: Promise<unknown>[];
    try {
      replies = [store.apply([spec('a')]), store.apply([spec('b')]), store.apply([spec('c')])];
      expect(schedule).toHaveBeenCalledTimes(1);
    } finally {
      schedule.mockRestore();
    }
    await Promise.all(replies);
    expect(calls).toHaveLength(1);
  });

  it('sends windows under a minute to the per-second client, in one call per client', async () => {
    const perSecondClient = new Redis({ port: redis.server.port, host: '127.0.0.1', db: 1 });
    await perSecondClient.ping();
    const { store, calls } = await makeRecorded({ perSecondClient });
    const perSecond = recordCalls(perSecondClient);
    const second = specBuilder({ windowMs: 1_000 });
    await store.apply([second('s1'), spec('m1'), second('s2'), second('s3'), spec('m2')]);
    expect(calls.map((call) => call.keys.length)).toEqual([2]);
    expect(perSecond.map((call) => call.keys.length)).toEqual([3]);
    // One request on each client, holding all of that client's specs.
    expect(calls[0]!.requests).toEqual([1, 2, 1, 1, 2, 1]);
    expect(perSecond[0]!.requests).toEqual([1, 3, 1, 1, 2, 1, 3, 1]);
  });

  it('answers STORE_UNAVAILABLE when the client throws instead of rejecting', async () => {
    const { store } = await makeRecorded();
    const client = (store as unknown as { main: { client: ScriptClient } }).main.client;
    client.sluiceApply = () => {
      throw new Error('thrown by the client');
    };
    await expect(store.apply([spec('a')])).rejects.toMatchObject({
      code: 'STORE_UNAVAILABLE',
      message: expect.stringContaining('thrown by the client') as unknown,
    });
  });
});

describe.skipIf(redis.requirement.skip)('redis store: the local cache and the script calls', () => {
  const one = specBuilder({ windowMs: 60_000, limit: 1 });

  it('never answers a spec of 0 hits from the cache: it goes to Redis', async () => {
    const { store, calls } = await makeRecorded({ localCacheBytes: 4_096 });
    expect((await store.apply([one('k', 2)])).admitted).toBe(false);
    calls.length = 0;
    const batch = await store.apply([one('k', 2), one('k', 0)]);
    expect(batch.results[0]).toMatchObject({ overLimit: true, fromLocalCache: true });
    expect(batch.results[1]!.fromLocalCache).toBeUndefined();
    expect(calls).toHaveLength(1);
  });

  it('sends a dry run larger than one call as one call', async () => {
    const { store, calls } = await makeRecorded({ localCacheBytes: 4_096 });
    expect((await store.apply([one('k', 2)])).admitted).toBe(false);
    calls.length = 0;
    const others = Array.from({ length: 512 }, (_, i) => one(`o${i}`));
    const batch = await store.apply([one('k', 2), ...others]);
    expect(batch.admitted).toBe(false);
    expect(calls.map((call) => call.keys.length)).toEqual([513]);
  });
});
