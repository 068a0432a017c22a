/**
 * Key floods: a client sending a new identifier on every request must not grow sluice (or Redis)
 * without bound.
 *
 * Memory store: 1,000,000 distinct keys with MEMORY_MAX_KEYS=100000, through the app's service
 * in-process (validation, rule matching, counter keys, the store), on a frozen manual clock so no
 * counter expires: every key beyond the cap evicts the least recently used one, so the store
 * holds exactly the cap, `sluice_store_evictions_total{reason="lru"}` (read from the Prometheus
 * text) is exactly keys x counters per key - cap, the heap after a full GC stays near what it
 * was once the cap was first reached, and the eviction warning is logged once a minute, not once
 * per request.
 *
 * Redis store: 50,000 distinct keys spread over the four algorithms on a real redis-server; every
 * key sluice wrote has a TTL (SCAN + PTTL: none is -1) no longer than its window, and there are
 * exactly as many keys as counters, so Redis memory is bounded too.
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { createManualClock } from '../../src/clock.js';
import { silentLogger, type Logger } from '../../src/logging/logger.js';
import type { RateLimitRequest } from '../../src/model.js';
import { loadSettings } from '../../src/settings.js';
import { capturingLogger, ruleDir } from '../helpers/app.js';
import { useProcessGroup } from '../helpers/processes.js';
import { adminClient, requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';

/** A full garbage collection: `--expose-gc` (vitest.config.ts), else enabled at run time. */
const gc: () => void = (() => {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed !== undefined) return exposed;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
})();

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/** The value of one sample in Prometheus text, e.g. `sluice_store_evictions_total{reason="lru"}`. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no sample ${series} in:\n${text}`);
  return Number(line.slice(series.length + 1));
}

/** A request for key `i` of domain `flood` (one descriptor, one entry) taking `hits` hits. */
function request(key: string, i: number, hits?: number): RateLimitRequest {
  return {
    domain: 'flood',
    descriptors: [{ entries: [{ key, value: `c${i}` }], limit: undefined, hitsAddend: hits }],
    hitsAddend: 0,
  };
}

const RULES = [
  'domain: flood',
  'descriptors:',
  '  - key: ip',
  '    rate_limit: {unit: hour, requests_per_unit: 1000}',
  '  - key: fixed',
  '    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: fixed_window}',
  '  - key: sliding',
  '    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window}',
  '  - key: bucket',
  '    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket}',
  '  - key: log',
  '    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_log}',
  '',
].join('\n');

async function buildApp(
  env: Record<string, string>,
  clock?: () => number,
  logger: Logger = silentLogger(),
): Promise<App> {
  const dir = await ruleDir({ 'flood.yaml': RULES });
  const settings = loadSettings(env, { config: [path.join(dir, 'flood.yaml')] });
  return createApp({ settings, logger, clock, watch: false });
}

describe('key flood on the memory store (MEMORY_MAX_KEYS=100000)', () => {
  const KEYS = 1_000_000;
  const CAP = 100_000;
  const clock = createManualClock();
  const log = capturingLogger();
  let app: App;

  beforeAll(async () => {
    app = await buildApp({ MEMORY_MAX_KEYS: String(CAP) }, clock.now, log.logger);
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`${KEYS.toLocaleString('en')} distinct keys: the store holds the cap, evictions are counted exactly, the heap stays bounded`, async () => {
    const service = app.service;
    const store = app.store;
    const before = heapAfterGc();

    const first = await service.shouldRateLimit(request('ip', 0));
    expect(first.overallCode).toBe('OK');
    // How many counters one request creates (one per descriptor for these rules).
    const perKey = store.size();
    expect(perKey).toBeGreaterThanOrEqual(1);

    let maxSize = store.size();
    let atCap = 0;
    for (let i = 1; i < KEYS; i++) {
      const response = await service.shouldRateLimit(request('ip', i));
      if (response.overallCode !== 'OK') throw new Error(`key ${i}: ${response.overallCode}`);
      if ((i & 1023) === 0) maxSize = Math.max(maxSize, store.size());
      // The heap once the store first holds the cap and a little more (the steady state).
      if (i === 2 * Math.ceil(CAP / perKey)) atCap = heapAfterGc();
    }
    maxSize = Math.max(maxSize, store.size());
    const after = heapAfterGc();

    // 800,000 more keys after the cap was reached may not grow the heap by more than half of
    // what the first 200,000 took (an unbounded store would grow it about 5 times as much).
    const steady = atCap - before;
    console.info(
      `heap: ${mb(before)} before, ${mb(atCap)} at the cap, ${mb(after)} after ${KEYS} keys`,
    );
    expect(steady).toBeGreaterThan(0);
    expect(after - atCap).toBeLessThan(steady / 2 + 8 * 1_048_576);

    expect(maxSize).toBeLessThanOrEqual(CAP);
    expect(store.size()).toBe(CAP);
    const text = await app.metrics.render();
    expect(sample(text, 'sluice_store_keys')).toBe(CAP);
    // Nothing expired (the clock never moved): every counter beyond the cap evicted one.
    expect(sample(text, 'sluice_store_evictions_total{reason="expired"}')).toBe(0);
    expect(sample(text, 'sluice_store_evictions_total{reason="lru"}')).toBe(KEYS * perKey - CAP);

    // The first keys were evicted (least recently used): they start again from a full limit.
    const again = await service.shouldRateLimit(request('ip', 0));
    expect(again.statuses[0]!.limitRemaining).toBe(999);

    // The log does not grow with the flood: one warning at the first eviction, the next one a
    // minute later (store clock) with the evictions since, so the counts add up to the metric.
    const warnings = () =>
      log.lines.filter((line) => String(line['msg']).includes('MEMORY_MAX_KEYS reached'));
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ count: perKey, maxKeys: CAP });
    clock.advance(60_000);
    await service.shouldRateLimit(request('ip', KEYS));
    expect(warnings()).toHaveLength(2);
    const logged = warnings().reduce((sum, line) => sum + Number(line['count']), 0);
    const total = sample(await app.metrics.render(), 'sluice_store_evictions_total{reason="lru"}');
    expect(logged).toBe(total);
    expect(total).toBe((KEYS + 2) * perKey - CAP);
  }, 600_000);
});

function mb(bytes: number): string {
  return `${(bytes / 1_048_576).toFixed(1)} MB`;
}

const redisRequirement = requireRedis('key flood on the redis store');

describe.skipIf(redisRequirement.skip)('key flood on the redis store', () => {
  const KEYS = 50_000;
  const ALGORITHM_KEYS = ['fixed', 'sliding', 'bucket', 'log'] as const;
  // Each call takes the whole hour's limit, so no counter empties (and its key expires) before
  // the count at the end: a token bucket charged one hit of 1000 per hour refills in 3.6 s.
  const FULL = 1000;
  const group = useProcessGroup();
  let server: RedisServer;
  let admin: Redis;
  let app: App;
  const prefix = `flood-${randomUUID()}:`;

  beforeAll(async () => {
    server = await startRedis(group);
    admin = adminClient(server.port);
    app = await buildApp({
      BACKEND_TYPE: 'redis',
      REDIS_URL: server.address,
      REDIS_SOCKET_TYPE: 'tcp',
      CACHE_KEY_PREFIX: prefix,
      REDIS_WAIT_AT_START: 'true',
    });
  });
  afterAll(async () => {
    await app?.close();
    admin?.disconnect();
  });

  it(`${KEYS.toLocaleString('en')} distinct keys over the four algorithms: every Redis key has a TTL within its window`, async () => {
    const service = app.service;
    // How many Redis keys one counter of each algorithm writes.
    const perCounter: number[] = [];
    for (const key of ALGORITHM_KEYS) {
      const before = await admin.dbsize();
      await service.shouldRateLimit(request(key, -1, FULL));
      perCounter.push((await admin.dbsize()) - before);
    }
    expect(perCounter.every((n) => n >= 1)).toBe(true);

    // Concurrent callers, each with its own share of the keys.
    const CALLERS = 32;
    let next = 0;
    await Promise.all(
      Array.from({ length: CALLERS }, async () => {
        for (let i = next++; i < KEYS; i = next++) {
          const key = ALGORITHM_KEYS[i % ALGORITHM_KEYS.length]!;
          const response = await service.shouldRateLimit(request(key, i, FULL));
          if (response.overallCode !== 'OK') throw new Error(`key ${i}: ${response.overallCode}`);
        }
      }),
    );

    const expected =
      ALGORITHM_KEYS.reduce(
        (sum, _, a) => sum + perCounter[a]! * (KEYS / ALGORITHM_KEYS.length),
        0,
      ) + perCounter.reduce((a, b) => a + b, 0);
    // Every key, with its TTL, read in pipelined batches.
    let cursor = '0';
    let count = 0;
    let maxTtlMs = 0;
    const noTtl: string[] = [];
    do {
      const [nextCursor, keys] = await admin.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 2000);
      cursor = nextCursor;
      if (keys.length === 0) continue;
      const pipeline = admin.pipeline();
      for (const key of keys) pipeline.pttl(key);
      const ttls = (await pipeline.exec())!.map(([error, ttl]) => {
        if (error) throw error;
        return ttl as number;
      });
      ttls.forEach((ttl, k) => {
        if (ttl < 0) noTtl.push(`${keys[k]} (PTTL ${ttl})`);
        maxTtlMs = Math.max(maxTtlMs, ttl);
      });
      count += keys.length;
    } while (cursor !== '0');

    expect(noTtl.slice(0, 5)).toEqual([]);
    expect(count).toBe(expected);
    expect(await admin.dbsize()).toBe(expected);
    // Hour windows: no key outlives its window (a sliding window's by one sub-bucket, W / 20).
    expect(maxTtlMs).toBeGreaterThan(0);
    expect(maxTtlMs).toBeLessThanOrEqual(3_600_000 * 1.05 + 1_000);
  }, 300_000);
});
