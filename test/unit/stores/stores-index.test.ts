/**
 * The store factory (src/stores/index.ts): which store the settings give, what it logs about it,
 * and the memory store's MEMORY_MAX_KEYS warnings (at once, then at most once a minute, with the
 * count since the last one). The Redis cases run against a real `redis-server` (skipped with a
 * reason when it is missing, failing under CI); test/contract/redis-connect.test.ts covers the
 * Redis store's own behaviour behind the factory.
 */
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import type { StoreMetricsSink } from '../../../src/metrics/metrics.js';
import { loadSettings } from '../../../src/settings.js';
import {
  createStore,
  LRU_WARNING_INTERVAL_MS,
  type StoreOptions,
} from '../../../src/stores/index.js';
import { processOldSpaceLimit } from '../../../src/stores/memory/old-space.js';
import { capturingLogger } from '../../helpers/app.js';
import { freePort, useProcessGroup } from '../../helpers/processes.js';
import { requireRedis, startRedis, type RedisServer } from '../../helpers/redis.js';
import { specBuilder } from '../../helpers/specs.js';

// Hour windows: nothing expires while a test moves the clock by a minute.
const spec = specBuilder({ algorithm: 'fixed_window', windowMs: 3_600_000 });
const T0 = 1_699_999_980_000;
/** MEMORY_MAX_KEYS of these tests (the least the setting accepts). */
const CAP = 64;

const requirement = requireRedis('store factory');
const group = useProcessGroup();
afterAll(() => group.stopAll());

let server: Promise<RedisServer> | undefined;
/** One real Redis for the suite, started on first use. */
function redis(): Promise<RedisServer> {
  return (server ??= startRedis(group));
}

/** A memory store capped at CAP counters, its log lines and its clock. */
async function smallMemoryStore(metrics?: StoreMetricsSink) {
  const clock = createManualClock(T0);
  const { logger, lines } = capturingLogger();
  const store = await createStore(loadSettings({ MEMORY_MAX_KEYS: String(CAP) }), {
    clock: clock.now,
    logger,
    ...(metrics === undefined ? {} : { metrics }),
  });
  const warned = (prefix: string) => lines.filter((line) => String(line['msg']).startsWith(prefix));
  return { clock, store, lines, warned };
}

describe('createStore: the memory store', () => {
  it('warns about evicted live counters at once, then once a minute with the count since', async () => {
    const evicted: string[] = [];
    const { clock, store, warned } = await smallMemoryStore({
      evicted: (reason, count) => void evicted.push(`${reason}:${count}`),
      storeError: () => undefined,
      localCacheOverLimit: () => undefined,
      fallback: () => undefined,
    });
    const lru = () => warned('evicted live counters');
    try {
      // Counters with room left fill the store; each new key evicts the least recent.
      for (let i = 0; i < CAP; i++) await store.apply([spec(`k${i}`, 1, 100)]);
      for (let i = 0; i < 3; i++) await store.apply([spec(`more${i}`, 1, 100)]);
      expect(evicted).toEqual(['lru:1', 'lru:1', 'lru:1']);
      expect(lru()).toEqual([expect.objectContaining({ count: 1, maxKeys: CAP, level: 40 })]);
      clock.advance(LRU_WARNING_INTERVAL_MS - 1);
      await store.apply([spec('more3', 1, 100)]);
      expect(lru()).toHaveLength(1);
      // A minute after the first warning, the next eviction warns with every one since: 2 + 1 + 1.
      clock.advance(1);
      await store.apply([spec('more4', 1, 100)]);
      expect(lru()).toHaveLength(2);
      expect(lru()[1]).toMatchObject({ count: 4 });
    } finally {
      await store.close();
    }
  });

  it('names the cap reached in its warning: the key cap, or the byte cap with long keys', async () => {
    const { store, warned, lines } = await smallMemoryStore();
    try {
      for (let i = 0; i <= CAP; i++) await store.apply([spec(`k${i}`, 1, 100)]);
      expect(warned('evicted live counters').map((line) => line['msg'])).toEqual([
        'evicted live counters: MEMORY_MAX_KEYS reached',
      ]);
      expect(lines.find((line) => line['msg'] === 'memory store created')).toMatchObject({
        level: 30,
        maxKeys: CAP,
        maxBytes: expect.any(Number),
      });
    } finally {
      await store.close();
    }
    // The least byte cap the setting accepts, and keys of 4,000 characters: the bytes run out
    // long before the default key cap.
    const { logger, lines: byteLines } = capturingLogger();
    const bytes = await createStore(loadSettings({ MEMORY_MAX_BYTES: '1048576' }), {
      clock: createManualClock(T0).now,
      logger,
    });
    try {
      for (let i = 0; i < 1_000 && bytes.size() === i; i++) {
        await bytes.apply([spec(`${i}:${'x'.repeat(4_000)}`, 1, 100)]);
      }
      await bytes.apply([spec(`last:${'x'.repeat(4_000)}`, 1, 100)]);
      expect(bytes.size()).toBeLessThan(1_000);
      expect(
        byteLines
          .filter((line) => String(line['msg']).startsWith('evicted live counters'))
          .map((line) => line['msg']),
      ).toEqual(['evicted live counters: MEMORY_MAX_BYTES reached']);
      expect(byteLines.find((line) => line['msg'] === 'memory store created')).toMatchObject({
        maxBytes: 1_048_576,
      });
    } finally {
      await bytes.close();
    }
  });

  it('evicts and refuses to store without a metrics sink, or with one that lacks notStored', async () => {
    const sinkWithoutNotStored: StoreMetricsSink = {
      evicted: () => undefined,
      storeError: () => undefined,
      localCacheOverLimit: () => undefined,
      fallback: () => undefined,
    };
    for (const metrics of [undefined, sinkWithoutNotStored]) {
      const { store, warned } = await smallMemoryStore(metrics);
      try {
        // CAP counters with room left, then one more: an LRU eviction.
        for (let i = 0; i <= CAP; i++) await store.apply([spec(`room${i}`, 1, 100)]);
        // CAP counters at their limit (limiting someone): a new key is decided but not stored.
        for (let i = 0; i < CAP; i++) await store.apply([spec(`full${i}`, 1, 1)]);
        const batch = await store.apply([spec('new', 1, 1)]);
        expect(batch.admitted).toBe(true);
        expect(warned('evicted live counters')).toHaveLength(1);
        expect(warned('new counters not stored')).toHaveLength(1);
      } finally {
        await store.close();
      }
    }
  });

  it('warns at start when MEMORY_MAX_BYTES is over half the old-space limit, and only then', async () => {
    const oldSpace = processOldSpaceLimit();
    const warnings = async (maxBytes: number) => {
      const { logger, lines } = capturingLogger();
      const store = await createStore(loadSettings({ MEMORY_MAX_BYTES: String(maxBytes) }), {
        clock: createManualClock(T0).now,
        logger,
      });
      await store.close();
      return lines.filter((line) => String(line['msg']).startsWith('MEMORY_MAX_BYTES is over'));
    };
    expect(await warnings(oldSpace)).toEqual([
      expect.objectContaining({ level: 40, maxBytes: oldSpace, oldSpaceBytes: oldSpace }),
    ]);
    expect(await warnings(Math.floor(oldSpace / 2))).toEqual([]);
  });

  it('is what BACKEND_TYPE=memory gives even with Redis options at hand, and what no Redis options give', async () => {
    const port = await freePort();
    const redisSettings = loadSettings({ BACKEND_TYPE: 'redis', REDIS_URL: `127.0.0.1:${port}` });
    const cases: StoreOptions[] = [
      { ...redisSettings, backendType: 'memory' },
      { ...redisSettings, redis: undefined },
    ];
    for (const settings of cases) {
      const { logger, lines } = capturingLogger();
      const store = await createStore(settings, { clock: createManualClock(T0).now, logger });
      try {
        // The memory store answers at once, healthy, with no Redis anywhere.
        expect(typeof store.applyNow).toBe('function');
        expect(store.healthy()).toBe(true);
        expect((await store.apply([spec('a', 1, 1)])).admitted).toBe(true);
        expect(lines.filter((line) => line['module'] === 'redis-store')).toEqual([]);
      } finally {
        await store.close();
      }
    }
  });
});

describe.skipIf(requirement.skip)('createStore: the Redis store', () => {
  async function created(env: Record<string, string>) {
    const { logger, lines } = capturingLogger();
    const store = await createStore(loadSettings(env), { clock: Date.now, logger });
    await store.close();
    return {
      store,
      created: lines.find((line) => line['msg'] === 'redis store created'),
      inferredWarning: lines.some((line) =>
        String(line['msg']).startsWith('BACKEND_TYPE is not set'),
      ),
    };
  }

  it('logs what it created: no per-second client, connected when asked to wait for Redis', async () => {
    const { address } = await redis();
    const { created: line, inferredWarning } = await created({
      BACKEND_TYPE: 'redis',
      REDIS_URL: address,
      REDIS_WAIT_AT_START: 'true',
    });
    expect(line).toMatchObject({ perSecond: false, waitAtStart: true, connected: true });
    // BACKEND_TYPE was written: nothing was inferred, so nothing to warn about.
    expect(inferredWarning).toBe(false);
  });

  it('waits for both clients: a per-second Redis that is not there leaves it not connected', async () => {
    const { address } = await redis();
    const { created: line } = await created({
      BACKEND_TYPE: 'redis',
      REDIS_URL: address,
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: `127.0.0.1:${await freePort()}`,
      REDIS_PERSECOND_TIMEOUT: '200ms',
      REDIS_WAIT_AT_START: 'true',
    });
    expect(line).toMatchObject({ perSecond: true, connected: false });
  });

  it('creates a memory fallback only for STORE_FAILURE_MODE=memory', async () => {
    const { address } = await redis();
    for (const [mode, hasTop] of [
      ['memory', true],
      ['allow', false],
      ['error', false],
    ] as const) {
      const { store } = await created({
        BACKEND_TYPE: 'redis',
        REDIS_URL: address,
        STORE_FAILURE_MODE: mode,
      });
      // The busiest-counters view is the memory fallback's: absent without one.
      expect(store.top !== undefined, mode).toBe(hasTop);
    }
  });

  describe('REDIS_MODE=cached', () => {
    afterEach(() => void vi.useRealTimers());

    it('puts the cached store in front: hits wait for the sync, every REDIS_SYNC_INTERVAL', async () => {
      const { address } = await redis();
      // Only the sync timer is fake: ioredis keeps its real timers for the connection.
      vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
      const { logger, lines } = capturingLogger();
      const store = await createStore(
        loadSettings({
          BACKEND_TYPE: 'redis',
          REDIS_URL: address,
          REDIS_MODE: 'cached',
          REDIS_SYNC_INTERVAL: '250ms',
          REDIS_WAIT_AT_START: 'true',
        }),
        { clock: Date.now, logger },
      );
      const cached = store as typeof store & { pendingHits(): number; sync(): Promise<void> };
      try {
        expect(lines.find((line) => line['msg'] === 'redis store created')).toMatchObject({
          mode: 'cached',
          syncIntervalMs: 250,
          connected: true,
        });
        // Decided locally: the hit waits for the next sync instead of going to Redis.
        expect((await store.apply([spec('cached-a', 1, 5)])).admitted).toBe(true);
        expect(cached.pendingHits()).toBe(1);
        const sync = vi.spyOn(cached, 'sync');
        vi.advanceTimersByTime(249);
        expect(sync).not.toHaveBeenCalled();
        vi.advanceTimersByTime(1);
        expect(sync).toHaveBeenCalledTimes(1);
        await sync.mock.results[0]!.value;
        expect(cached.pendingHits()).toBe(0);
      } finally {
        await store.close();
      }
    });

    it('logs its sync failures through a child of its own, module cached-store', async () => {
      const { logger, lines } = capturingLogger();
      const store = await createStore(
        loadSettings({
          BACKEND_TYPE: 'redis',
          REDIS_URL: `127.0.0.1:${await freePort()}`,
          REDIS_MODE: 'cached',
          REDIS_TIMEOUT: '200ms',
          STORE_FAILURE_MODE: 'allow',
        }),
        { clock: Date.now, logger },
      );
      const cached = store as typeof store & { sync(): Promise<void> };
      try {
        expect((await store.apply([spec('cached-b', 1, 5)])).admitted).toBe(true);
        await cached.sync();
        const failed = lines.filter((line) =>
          String(line['msg']).startsWith('cached mode: sync with redis failed'),
        );
        expect(failed).toEqual([expect.objectContaining({ module: 'cached-store', level: 40 })]);
      } finally {
        await store.close();
      }
    });

    it('an exact-mode store logs no sync interval', async () => {
      const { address } = await redis();
      const { created: line } = await created({ BACKEND_TYPE: 'redis', REDIS_URL: address });
      expect(line).toMatchObject({ mode: 'exact' });
      expect(line!['syncIntervalMs']).toBeUndefined();
    });
  });
});
