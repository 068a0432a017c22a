/**
 * The arguments of the Redis store's script calls (redis-store.ts `PendingCall`, `call`, `send`;
 * the layout in apply-script.ts), recorded by a wrapper around each client's registered command
 * that still calls the real `redis-server`: each key sent once per call while its values agree,
 * a counter of its own when any value differs, the 512-spec bound of one call, one flush per
 * event-loop turn, and the per-second client taking only windows under a minute, in one call.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import type { ScriptClient } from '../../src/stores/redis/client-state.js';
import { useProcessGroup } from '../helpers/processes.js';
import { openTestStore, requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const requirement = requireRedis('redis store script arguments');
const group = useProcessGroup();
let server: RedisServer | undefined;
const open: CounterStore[] = [];

beforeAll(async () => {
  if (requirement.skip) return;
  server = await startRedis(group);
});

afterAll(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
  await group.stopAll();
});

const spec = specBuilder({ windowMs: 60_000 });

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

async function make(
  options: Parameters<typeof openTestStore>[2] = {},
): Promise<{ store: CounterStore; calls: ScriptArgs[] }> {
  const { store, client } = await openTestStore(server!.port, 'argv', options);
  open.push(store);
  return { store, calls: recordCalls(client) };
}

describe.skipIf(requirement.skip)('redis store: the arguments of a script call', () => {
  it('sends each key once when the requests of a turn share it', async () => {
    const { store, calls } = await make();
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
    const { store, calls } = await make();
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
    const { store, calls } = await make();
    await Promise.all([store.apply(wide('p', 256)), store.apply(wide('q', 256))]);
    expect(calls.map((call) => call.keys.length)).toEqual([512]);
    calls.length = 0;
    await Promise.all([store.apply(wide('r', 257)), store.apply(wide('s', 256))]);
    expect(calls.map((call) => call.keys.length)).toEqual([257, 256]);
  });

  it('schedules one flush per event-loop turn, whatever the number of requests', async () => {
    const { store, calls } = await make();
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
    const perSecondClient = new Redis({ port: server!.port, host: '127.0.0.1', db: 1 });
    await perSecondClient.ping();
    const { store, calls } = await make({ perSecondClient });
    const perSecond = recordCalls(perSecondClient);
    const second = specBuilder({ windowMs: 1_000 });
    await store.apply([second('s1'), spec('m1'), second('s2'), second('s3'), spec('m2')]);
    expect(calls.map((call) => call.keys.length)).toEqual([2]);
    expect(perSecond.map((call) => call.keys.length)).toEqual([3]);
  });

  it('answers STORE_UNAVAILABLE when the client throws instead of rejecting', async () => {
    const { store } = await make();
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

describe.skipIf(requirement.skip)('redis store: the local cache and the script calls', () => {
  const one = specBuilder({ windowMs: 60_000, limit: 1 });

  it('never answers a spec of 0 hits from the cache: it goes to Redis', async () => {
    const { store, calls } = await make({ localCacheBytes: 4_096 });
    expect((await store.apply([one('k', 2)])).admitted).toBe(false);
    calls.length = 0;
    const batch = await store.apply([one('k', 2), one('k', 0)]);
    expect(batch.results[0]).toMatchObject({ overLimit: true, fromLocalCache: true });
    expect(batch.results[1]!.fromLocalCache).toBeUndefined();
    expect(calls).toHaveLength(1);
  });

  it('sends a dry run larger than one call as one call', async () => {
    const { store, calls } = await make({ localCacheBytes: 4_096 });
    expect((await store.apply([one('k', 2)])).admitted).toBe(false);
    calls.length = 0;
    const others = Array.from({ length: 512 }, (_, i) => one(`o${i}`));
    const batch = await store.apply([one('k', 2), ...others]);
    expect(batch.admitted).toBe(false);
    expect(calls.map((call) => call.keys.length)).toEqual([513]);
  });
});
