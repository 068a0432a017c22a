/**
 * The Redis store on a real 3-master Redis Cluster and on a master + replica watched by a
 * sentinel, built from the reference's settings (`REDIS_TYPE=cluster|sentinel`, `REDIS_URL` lists).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import type { CounterStore } from '../../src/stores/counter-store.js';
import { createStore } from '../../src/stores/index.js';
import { hashTagOf, redisKeyOf, slotOfTag } from '../../src/stores/redis/keys.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import {
  adminClient,
  commandCalls,
  requireRedis,
  startRedisCluster,
  startRedisSentinel,
  type RedisCluster,
  type RedisSentinelSetup,
} from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const spec = specBuilder({ windowMs: 3_600_000 });

/** Counter keys of `count` descriptors whose hash tags fall in pairwise different slots. */
function keysInDistinctSlots(count: number, domain: string): string[] {
  const keys: string[] = [];
  const slots = new Set<number>();
  for (let i = 0; keys.length < count; i++) {
    const key = `sw|3600000|${domain}|user=u${i}`;
    const slot = slotOfTag(hashTagOf(key));
    if (slots.has(slot)) continue;
    slots.add(slot);
    keys.push(key);
  }
  return keys;
}

const clusterRequirement = requireRedis('redis store on a 3-master cluster');

describe.skipIf(clusterRequirement.skip)('redis store on a 3-master cluster', () => {
  const group = useProcessGroup();
  let cluster: RedisCluster;
  let store: CounterStore;
  const prefix = `c-${randomUUID()}:`;

  beforeAll(async () => {
    cluster = await startRedisCluster(group);
    const settings = loadSettings({
      BACKEND_TYPE: 'redis',
      REDIS_TYPE: 'cluster',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: cluster.url,
      REDIS_TIMEOUT: '5s',
      CACHE_KEY_PREFIX: prefix,
      REDIS_WAIT_AT_START: 'true',
    });
    store = await createStore(settings, { clock: Date.now, logger: silentLogger() });
    expect(store.healthy()).toBe(true);
  }, 60_000);
  afterAll(async () => {
    await store?.close();
  });

  it('computes the slot Redis computes for every key', async () => {
    const admin = adminClient(cluster.nodes[0]!.port);
    try {
      for (const key of keysInDistinctSlots(20, 'slots')) {
        const redisKey = redisKeyOf(prefix, key);
        expect(await admin.cluster('KEYSLOT', redisKey)).toBe(slotOfTag(hashTagOf(key)));
      }
    } finally {
      admin.disconnect();
    }
  });

  it('limits descriptors in different slots correctly, each on its own counter', async () => {
    const keys = keysInDistinctSlots(6, 'multi');
    // Each request: all six descriptors, one hit each; limit 3 each.
    for (let round = 0; round < 3; round++) {
      const batch = await store.apply(keys.map((key) => spec(key, 1, 3)));
      expect(batch.admitted).toBe(true);
      expect(batch.results.map((r) => r.remaining)).toEqual(keys.map(() => 2 - round));
    }
    const over = await store.apply(keys.map((key) => spec(key, 1, 3)));
    expect(over.admitted).toBe(false);
    expect(over.results.every((r) => r.overLimit && r.remaining === 0)).toBe(true);
    // The keys landed on more than one master.
    const masters = new Set<number>();
    for (const node of cluster.nodes) {
      const admin = adminClient(node.port);
      try {
        const held = await admin.keys(`${prefix}*multi*`);
        if (held.length > 0) masters.add(node.port);
      } finally {
        admin.disconnect();
      }
    }
    expect(masters.size).toBeGreaterThan(1);
  });

  it('answers all-or-nothing within a slot group: the limits of one descriptor share a slot', async () => {
    // One descriptor with two limits (two counters, one slot) and a second descriptor elsewhere.
    const [a, b] = keysInDistinctSlots(2, 'group');
    const minute = a!.replace('sw|3600000|', 'fw|60000|');
    expect(slotOfTag(hashTagOf(minute))).toBe(slotOfTag(hashTagOf(a!)));
    expect(
      (await store.apply([spec(minute, 2, 2, { algorithm: 'fixed_window', windowMs: 60_000 })]))
        .admitted,
    ).toBe(true);
    // The hour limit has room, the minute limit does not: neither is charged.
    const rejected = await store.apply([
      spec(a!, 1, 10),
      spec(minute, 1, 2, { algorithm: 'fixed_window', windowMs: 60_000 }),
    ]);
    expect(rejected.admitted).toBe(false);
    const peek = await store.apply([spec(a!, 0, 10), spec(b!, 0, 10)]);
    expect(peek.results[0]!.remaining).toBe(10);
    expect(peek.results[1]!.remaining).toBe(10);
  });

  it('applies the quota rule across slot groups: rejected only when every quota group is over', async () => {
    const [a, b] = keysInDistinctSlots(2, 'quota');
    const quota = (key: string, group: number) =>
      spec(key, 1, 1, { mode: 'quota', quotaGroup: group });
    expect((await store.apply([quota(a!, 0), quota(b!, 1)])).admitted).toBe(true);
    // Both full: each script sees one group only; the merged answer rejects.
    const all = await store.apply([quota(a!, 0), quota(b!, 1)]);
    expect(all.admitted).toBe(false);
    expect(all.results.map((r) => r.overLimit)).toEqual([true, true]);
    // With a third group that has room in its own slot, the request passes.
    const [c] = keysInDistinctSlots(1, 'quota-room');
    expect((await store.apply([quota(a!, 0), quota(b!, 1), quota(c!, 2)])).admitted).toBe(true);
  });

  it('sends one script call per slot group', async () => {
    const keys = keysInDistinctSlots(4, 'calls');
    await store.apply(keys.map((key) => spec(key, 1, 5)));
    const admins = cluster.nodes.map((node) => adminClient(node.port));
    try {
      await Promise.all(admins.map((admin) => admin.config('RESETSTAT')));
      await store.apply(keys.map((key) => spec(key, 1, 5)));
      let scripts = 0;
      for (const admin of admins) {
        const calls = await commandCalls(admin);
        scripts += (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
      }
      expect(scripts).toBe(4);
    } finally {
      for (const admin of admins) admin.disconnect();
    }
  });
});

const sentinelRequirement = requireRedis('redis store through a sentinel', true);

describe.skipIf(sentinelRequirement.skip)('redis store through a sentinel', () => {
  const group = useProcessGroup();
  let setup: RedisSentinelSetup;
  let store: CounterStore;

  beforeAll(async () => {
    setup = await startRedisSentinel(group);
    const settings = loadSettings({
      BACKEND_TYPE: 'redis',
      REDIS_TYPE: 'sentinel',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: setup.url,
      REDIS_TIMEOUT: '1s',
      CACHE_KEY_PREFIX: `s-${randomUUID()}:`,
      REDIS_WAIT_AT_START: 'true',
    });
    store = await createStore(settings, { clock: Date.now, logger: silentLogger() });
    expect(store.healthy()).toBe(true);
  }, 60_000);
  afterAll(async () => {
    await store?.close();
  });

  it('limits, and keeps limiting after the master is killed and the replica promoted', async () => {
    const key = 'sw|3600000|sentinel|user=a';
    for (let k = 0; k < 3; k++) expect((await store.apply([spec(key, 1, 5)])).admitted).toBe(true);
    // Make sure the replica has the counts before the master dies.
    const master = adminClient(setup.master.port);
    try {
      await waitFor(
        'the replica to acknowledge every write',
        async () => {
          const info = String(await master.info('replication'));
          const offset = /master_repl_offset:(\d+)/.exec(info)?.[1];
          const replicaOffset = /slave0:.*state=online,offset=(\d+)/.exec(info)?.[1];
          return offset !== undefined && offset === replicaOffset;
        },
        { timeoutMs: 10_000, intervalMs: 50 },
      );
    } finally {
      master.disconnect();
    }
    await setup.master.stop(true);

    // Calls fail (STORE_UNAVAILABLE, never hang) until the sentinel promotes the replica.
    await waitFor(
      'the store to answer through the promoted replica',
      async () => {
        try {
          await store.apply([spec('sw|3600000|sentinel|user=probe', 0, 5)]);
          return true;
        } catch {
          return false;
        }
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
    const replica = adminClient(setup.replica.port);
    try {
      expect(String(await replica.info('replication'))).toMatch(/role:master/);
    } finally {
      replica.disconnect();
    }
    // The 3 hits counted before the failover are still there: 2 more fit, the third does not.
    expect((await store.apply([spec(key, 1, 5)])).results[0]!.remaining).toBe(1);
    expect((await store.apply([spec(key, 1, 5)])).admitted).toBe(true);
    expect((await store.apply([spec(key, 1, 5)])).admitted).toBe(false);
    expect(store.healthy()).toBe(true);
  }, 60_000);
});
