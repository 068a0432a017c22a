/**
 * Cached mode (`REDIS_MODE=cached`, docs/cached-mode.md) with real processes on a real
 * redis-server:
 *
 * - three sluice processes on one Redis driven past a limit admit at most the documented bound
 *   `L + (R - 1) x min(L, A)`, A the most hits one replica admits between the send of one of its
 *   syncs and the delivery of the next; the test makes A at most `k` by sending each replica
 *   `k` calls per round and waiting, between rounds, until every replica has finished two more
 *   syncs (read from its /metrics: no timing is assumed or asserted);
 * - Redis stopped (SIGSTOP): a replica with STORE_FAILURE_MODE=memory keeps deciding, its metrics
 *   count failed syncs and the hits waiting; one with `error` fails calls and its health check;
 *   after SIGCONT the waiting hits reach Redis, whose count then includes them.
 */
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ruleDir } from '../helpers/app.js';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { ensureBuilt, useProcessGroup, waitFor } from '../helpers/processes.js';
import {
  adminClient,
  requireRedis,
  scriptCalls,
  startRedis,
  type RedisServer,
} from '../helpers/redis.js';
import { startRedisSluice, type RedisSluice } from '../helpers/redis-sluice.js';

const requirement = requireRedis('cached mode integration');

/** The value of the Prometheus sample `series` (name with labels, exactly as rendered). */
async function metric(replica: RedisSluice, series: string): Promise<number> {
  const text = await replica.metricsText();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

async function health(replica: RedisSluice): Promise<number> {
  return (await fetch(`http://127.0.0.1:${replica.httpPort}/healthcheck`)).status;
}

/** Hits Redis counts on the sliding window counters under `prefix` (field `t` of each hash). */
async function redisCount(admin: Redis, prefix: string): Promise<number> {
  let total = 0;
  for (const key of await admin.keys(`${prefix}*`)) total += Number(await admin.hget(key, 't'));
  return total;
}

describe.skipIf(requirement.skip)('cached mode on one redis-server', () => {
  const group = useProcessGroup();
  let redis: RedisServer;
  let admin: Redis;

  function startReplica(dir: string, env: Record<string, string>): Promise<RedisSluice> {
    return startRedisSluice(group, {
      configDir: dir,
      redisUrl: redis.address,
      env: { REDIS_MODE: 'cached', ...env },
    });
  }

  beforeAll(async () => {
    ensureBuilt();
    redis = await startRedis(group);
    admin = adminClient(redis.port);
  }, 30_000);
  afterAll(() => {
    admin.disconnect();
  });

  it('three processes driven past a limit admit within L + (R - 1) x min(L, k)', async () => {
    const limit = 100;
    const perRound = 10;
    const prefix = `bound-${randomUUID()}:`;
    const dir = await ruleDir({
      'r.yaml': `domain: shared\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: ${limit}}\n`,
    });
    const env = { CACHE_KEY_PREFIX: prefix, REDIS_SYNC_INTERVAL: '20ms' };
    const three = [
      await startReplica(dir, env),
      await startReplica(dir, env),
      await startReplica(dir, env),
    ];
    const okSyncs = (replica: RedisSluice): Promise<number> =>
      metric(replica, 'sluice_cached_syncs_total{result="ok"}');
    await admin.config('RESETSTAT');
    const syncsBefore = (await Promise.all(three.map(okSyncs))).reduce((a, b) => a + b, 0);
    let admitted = 0;
    let rejected = 0;
    // 20 rounds offer 600 calls: far past the limit whatever the interleaving.
    for (let round = 0; round < 20; round++) {
      const responses = await Promise.all(
        three.flatMap((replica) =>
          Array.from({ length: perRound }, () =>
            replica.client.shouldRateLimit(rlsRequest('shared', [{ user: 'same' }]), 15_000),
          ),
        ),
      );
      admitted += responses.filter((r) => r.overall_code === 'OK').length;
      rejected += responses.filter((r) => r.overall_code === 'OVER_LIMIT').length;
      const before = await Promise.all(three.map(okSyncs));
      await waitFor(
        'two more syncs on every replica',
        async () => (await Promise.all(three.map(okSyncs))).every((n, i) => n >= before[i]! + 2),
        { timeoutMs: 10_000, intervalMs: 5 },
      );
    }
    const bound = limit + (three.length - 1) * Math.min(limit, perRound);
    expect(admitted).toBeGreaterThanOrEqual(limit);
    expect(admitted).toBeLessThanOrEqual(bound);
    expect(admitted + rejected).toBe(3 * perRound * 20);
    // Rejected calls charged nothing: Redis holds exactly the admitted hits.
    expect(await redisCount(admin, prefix)).toBe(admitted);
    // One script call per sync at most (one counter), not one per call; each replica may have
    // had one sync in flight across the counts' edges.
    const syncs = (await Promise.all(three.map(okSyncs))).reduce((a, b) => a + b, 0) - syncsBefore;
    expect(await scriptCalls(admin)).toBeLessThanOrEqual(syncs + 3);
    for (const replica of three) expect(replica.sluice.proc.output()).not.toMatch(/unhandled/i);
  }, 120_000);

  it('Redis stopped: decisions go on by the failure policy, health and metrics say so, hits catch up', async () => {
    const dir = await ruleDir({
      'o.yaml':
        'domain: outage\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n',
    });
    const local = await startReplica(dir, {
      CACHE_KEY_PREFIX: 'local:',
      STORE_FAILURE_MODE: 'memory',
      REDIS_TIMEOUT: '300ms',
      REDIS_SYNC_INTERVAL: '50ms',
    });
    const strict = await startReplica(dir, {
      CACHE_KEY_PREFIX: 'strict:',
      STORE_FAILURE_MODE: 'error',
      REDIS_TIMEOUT: '300ms',
      REDIS_SYNC_INTERVAL: '50ms',
    });
    const call = (replica: RedisSluice): Promise<string> =>
      replica.client
        .shouldRateLimit(rlsRequest('outage', [{ user: 'u' }]), 5_000)
        .then((r) => r.overall_code)
        .catch((error: unknown) =>
          (error as { code?: number }).code === 14 ? 'UNAVAILABLE' : String(error),
        );
    for (let i = 0; i < 10; i++) {
      expect(await call(local)).toBe('OK');
      expect(await call(strict)).toBe('OK');
    }
    await waitFor(
      'the first hits in Redis',
      async () => (await redisCount(admin, 'local:')) === 10,
      {
        timeoutMs: 10_000,
        intervalMs: 20,
      },
    );
    await waitFor(
      "the strict replica's hits in Redis",
      async () => (await redisCount(admin, 'strict:')) === 10,
      {
        timeoutMs: 10_000,
        intervalMs: 20,
      },
    );

    redis.proc.child.kill('SIGSTOP');
    try {
      const errorsBefore = await metric(local, 'sluice_cached_syncs_total{result="error"}');
      // The memory-policy replica decides locally whatever Redis does; the hits wait for it.
      for (let i = 0; i < 20; i++) expect(await call(local)).toBe('OK');
      // The strict one learns that Redis is gone from its next sync (a call until then is
      // decided locally, as it would have been a moment before).
      expect(['OK', 'UNAVAILABLE']).toContain(await call(strict));
      await waitFor(
        'a failed sync counted, and the strict replica unhealthy',
        async () =>
          (await metric(local, 'sluice_cached_syncs_total{result="error"}')) > errorsBefore &&
          (await health(strict)) === 500,
        { timeoutMs: 15_000, intervalMs: 20 },
      );
      expect(await health(local)).toBe(200);
      expect(await call(local)).toBe('OK');
      expect(await call(strict)).toBe('UNAVAILABLE');
      await waitFor(
        'the waiting hits in the metrics',
        async () => (await metric(local, 'sluice_cached_pending_hits')) === 21,
        { timeoutMs: 15_000, intervalMs: 20 },
      );
      expect(await metric(local, 'sluice_cached_last_sync_age_seconds')).toBeGreaterThan(0);
    } finally {
      redis.proc.child.kill('SIGCONT');
    }
    // Redis back: the kept hits arrive. The sync that timed out when Redis stopped was still in
    // its socket and Redis ran it on resuming; cached mode cannot tell, so it sent those hits
    // again (docs/cached-mode.md, "Redis down"): Redis counts every kept hit, and at most the
    // hits of that one sync twice, an over-count that only makes replicas admit less.
    await waitFor(
      'every kept hit in Redis, nothing waiting',
      async () =>
        (await redisCount(admin, 'local:')) >= 31 &&
        (await metric(local, 'sluice_cached_pending_hits')) === 0,
      { timeoutMs: 20_000, intervalMs: 20 },
    );
    expect(await redisCount(admin, 'local:')).toBeLessThanOrEqual(31 + 21);
    await waitFor('the strict replica healthy again', async () => (await health(strict)) === 200, {
      timeoutMs: 20_000,
      intervalMs: 20,
    });
    expect(await call(strict)).toBe('OK');
  }, 120_000);
});
