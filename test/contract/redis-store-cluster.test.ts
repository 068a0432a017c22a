/**
 * The Redis store on a Redis Cluster (src/stores/redis/redis-store.ts): a request's specs are
 * split by hash slot, one script call per slot, because a cluster refuses a script whose keys sit
 * in different slots (CROSSSLOT). On a real one-node cluster that holds every slot: the same
 * multi-key rules as a bigger cluster, ready in about two seconds, so `npm run test:mutation`
 * runs it (the three-master cluster is in redis-client-topologies.test.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import type { CounterStore } from '../../src/stores/counter-store.js';
import { createRedisClient, waitUntilReady } from '../../src/stores/redis/connect.js';
import { hashTagOf, slotOfTag } from '../../src/stores/redis/keys.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import {
  adminClient,
  redisConnectionOptions,
  requireRedis,
  scriptCalls,
  startRedis,
} from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const T0 = 1_699_999_980_000;
const requirement = requireRedis('redis store on a cluster');
const group = useProcessGroup();
const open: CounterStore[] = [];
const admins: Redis[] = [];

afterAll(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
  for (const admin of admins.splice(0)) admin.disconnect();
  await group.stopAll();
});

/** A cluster-enabled server that takes every slot itself; started once, on first use. */
let started: Promise<{ url: string; admin: Redis }> | undefined;
function oneNodeCluster(): Promise<{ url: string; admin: Redis }> {
  return (started ??= (async () => {
    const server = await startRedis(group, {
      args: [
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        // A node that never met another does not know its own address; CLUSTER SLOTS needs it.
        '--cluster-announce-ip',
        '127.0.0.1',
      ],
    });
    const admin = adminClient(server.port);
    admins.push(admin);
    await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    await waitFor(
      'the one-node cluster to be ok',
      async () => String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    return { url: server.address, admin };
  })());
}

const spec = specBuilder({ algorithm: 'fixed_window', windowMs: 60_000 });

/** A store over a cluster client made by connect.ts, with the script already loaded. */
async function clusterStore(keyPrefix: string): Promise<{ store: CounterStore; admin: Redis }> {
  const { url, admin } = await oneNodeCluster();
  const client = createRedisClient(
    redisConnectionOptions({ url, type: 'cluster', timeoutMs: 5_000 }),
  );
  client.on('error', () => undefined);
  const clock = createManualClock(T0);
  const store = createRedisStore({
    client,
    keyPrefix,
    timeoutMs: 5_000,
    scriptClock: clock.now,
    ttlGraceMs: 3_600_000,
  });
  open.push(store);
  expect(await waitUntilReady(client, 10_000)).toBe(true);
  // The first call loads the script (EVALSHA, then EVAL): keep it out of the counts.
  await store.apply([spec(`warm-up-${randomUUID()}`, 0, 1)]);
  return { store, admin };
}

/** Counter keys of two descriptors whose hash tags differ but fall in the same slot. */
function sameSlotPair(): [string, string] {
  const bySlot = new Map<number, string>();
  for (let i = 0; ; i++) {
    const key = `fw|60000|d|pair=${i}`;
    const slot = slotOfTag(hashTagOf(key));
    const other = bySlot.get(slot);
    if (other !== undefined) return [other, key];
    bySlot.set(slot, key);
  }
}

describe.skipIf(requirement.skip)('redis store on a cluster', () => {
  it('one script call per hash slot: the limits of one descriptor share it, each descriptor has its own', async () => {
    const { store, admin } = await clusterStore(`cl-${randomUUID()}:`);
    const a = 'fw|60000|d|user=a';
    const b = 'fw|60000|d|user=b';
    const c = 'fw|60000|d|user=c';
    const slots = new Set([a, b, c].map((key) => slotOfTag(hashTagOf(key))));
    expect(slots.size).toBe(3);
    const before = await scriptCalls(admin);
    // Two limits of descriptor a (same tag), then b and c.
    const batch = await store.apply([
      spec(a, 1, 2),
      spec(b, 1, 5),
      spec('fw|3600000|d|user=a', 1, 9, { windowMs: 3_600_000 }),
      spec(c, 3, 3),
    ]);
    expect(await scriptCalls(admin)).toBe(before + 3);
    expect(batch.admitted).toBe(true);
    expect(batch.results.map((r) => r.remaining)).toEqual([1, 4, 8, 0]);
    // Each group decides its own counters; the batch is refused when one is over.
    const again = await store.apply([spec(a, 1, 2), spec(c, 1, 3), spec(b, 1, 5)]);
    expect(again.admitted).toBe(false);
    expect(again.results.map((r) => [r.overLimit, r.remaining])).toEqual([
      [false, 0],
      [true, 0],
      [false, 3],
    ]);
  });

  it('a window under a minute stays on the cluster when there is no per-second client', async () => {
    const { store } = await clusterStore(`cl-${randomUUID()}:`);
    const batch = await store.apply([spec('fw|1000|d|user=s', 1, 5, { windowMs: 1_000 })]);
    expect(batch).toMatchObject({ admitted: true, results: [{ overLimit: false, remaining: 4 }] });
  });

  it('descriptors whose tags fall in one slot share a script call', async () => {
    const { store, admin } = await clusterStore(`cl-${randomUUID()}:`);
    const [first, second] = sameSlotPair();
    const before = await scriptCalls(admin);
    const batch = await store.apply([spec(first, 1, 5), spec(second, 2, 5)]);
    expect(await scriptCalls(admin)).toBe(before + 1);
    expect(batch.results.map((r) => r.remaining)).toEqual([4, 3]);
  });

  it('a CACHE_KEY_PREFIX with braces: one call per hash tag, as the prefix may hold the tag', async () => {
    const { store, admin } = await clusterStore(`cl{${randomUUID()}}:`);
    const [first, second] = sameSlotPair();
    const before = await scriptCalls(admin);
    const batch = await store.apply([spec(first, 1, 5), spec(second, 2, 5)]);
    expect(await scriptCalls(admin)).toBe(before + 2);
    expect(batch.results.map((r) => r.remaining)).toEqual([4, 3]);
  });

  it('the requests of one turn share a call per hash slot, never one across slots', async () => {
    const { store, admin } = await clusterStore(`cl-${randomUUID()}:`);
    const a = 'fw|60000|d|turn=a';
    const b = 'fw|60000|d|turn=b';
    expect(slotOfTag(hashTagOf(a))).not.toBe(slotOfTag(hashTagOf(b)));
    const before = await scriptCalls(admin);
    // 12 concurrent requests: 6 on a alone, 3 on b alone, 3 on both (one group per slot each).
    const answers = await Promise.all([
      ...Array.from({ length: 6 }, () => store.apply([spec(a, 1, 7)])),
      ...Array.from({ length: 3 }, () => store.apply([spec(b, 1, 5)])),
      ...Array.from({ length: 3 }, () => store.apply([spec(a, 1, 7), spec(b, 1, 5)])),
    ]);
    // One call for slot a (9 requests), one for slot b (6): the cluster refuses CROSSSLOT.
    expect(await scriptCalls(admin)).toBe(before + 2);
    // In arrival order per slot: a takes 7, so the last two requests on both are refused there;
    // b takes 5: the last of them is refused there too.
    expect(answers.map((answer) => answer.admitted)).toEqual([
      ...Array(6).fill(true),
      ...Array(3).fill(true),
      true,
      false,
      false,
    ]);
    expect(answers.slice(9).map((answer) => answer.results.map((r) => r.remaining))).toEqual([
      [0, 1],
      [0, 0],
      [0, 0],
    ]);
  });
});
