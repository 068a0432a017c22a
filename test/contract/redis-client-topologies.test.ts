/**
 * Redis Cluster and Sentinel clients from the `REDIS_*` settings (src/stores/redis/connect.ts),
 * and the Redis store over a cluster (one script call per hash slot), against real servers
 * started by test/helpers/redis.ts. Kept apart from redis-connect.test.ts because starting a
 * cluster takes seconds: `npm run test:mutation` leaves this file out (docs/testing.md).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { waitUntilReady } from '../../src/stores/redis/connect.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { useProcessGroup } from '../helpers/processes.js';
import {
  adminClient,
  useRedisClients,
  requireRedis,
  startRedisCluster,
  startRedisSentinel,
} from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const requirement = requireRedis('redis cluster and sentinel clients', true);
const group = useProcessGroup();

afterAll(async () => {
  await group.stopAll();
});
// Registered after the group's hook, so the clients are disconnected before the servers stop.
const client = useRedisClients();

const spec = specBuilder({ algorithm: 'fixed_window' });

describe.skipIf(requirement.skip)('cluster and sentinel clients', () => {
  it('a cluster from a node list: one store call per slot, every counter counted', async () => {
    const { url, nodes } = await startRedisCluster(group);
    const made = client({ url: ` ${url.replaceAll(',', ' , ')} ,`, type: 'cluster' });
    expect(await waitUntilReady(made, 10_000)).toBe(true);
    const clock = createManualClock(1_699_999_980_000);
    for (const prefix of ['c:', 'c{x}:']) {
      const store = createRedisStore({
        client: made,
        keyPrefix: prefix,
        timeoutMs: 5_000,
        scriptClock: clock.now,
        ttlGraceMs: 3_600_000,
      });
      // Keys of many descriptors land on all three masters.
      const specs = Array.from({ length: 30 }, (_, i) => spec(`fw|60000|d|k=${i}`, 1, 2));
      expect((await store.apply(specs)).results.map((r) => r.remaining)).toEqual(
        specs.map(() => 1),
      );
      const again = await store.apply([...specs, spec('fw|60000|d|k=0', 1, 2)]);
      expect(again.admitted).toBe(false);
      expect(again.results.map((r) => r.overLimit)).toEqual([...specs.map(() => false), true]);
      expect(again.results.at(-1)!.remaining).toBe(0);
    }
    let held = 0;
    for (const node of nodes) {
      const admin = adminClient(node.port);
      try {
        held += (await admin.keys('c*')).length;
      } finally {
        admin.disconnect();
      }
    }
    expect(held).toBe(60);
  });

  it('Sentinel: finds the master by name', async () => {
    const setup = await startRedisSentinel(group);
    const made = client({ url: setup.url, type: 'sentinel' });
    expect(await waitUntilReady(made, 10_000)).toBe(true);
    await made.set('sluice-sentinel-test', 'y');
    const admin = adminClient(setup.master.port);
    try {
      expect(await admin.get('sluice-sentinel-test')).toBe('y');
    } finally {
      admin.disconnect();
    }
  });
});
