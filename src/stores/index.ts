/**
 * The store factory: the counter store the settings ask for (docs/configuration.md).
 * `BACKEND_TYPE=memory` gives the memory store; `redis` gives the Redis store behind the failure
 * policy (`STORE_FAILURE_MODE`), still connecting in the background when the promise resolves
 * (unless `REDIS_WAIT_AT_START` asks to wait up to `REDIS_TIMEOUT` for it); `REDIS_MODE=cached`
 * puts the cached store (stores/cached/) in front of it.
 */
import { getHeapStatistics } from 'node:v8';
import type { Clock } from '../clock.js';
import type { Logger } from '../logging/logger.js';
import type { StoreMetricsSink } from '../metrics/metrics.js';
import type { CounterStore } from './counter-store.js';
import { withFailurePolicy, type StoreFailureMode } from './failure-policy.js';
import { createMemoryStore, defaultMaxBytes } from './memory/memory-store.js';
import { processOldSpaceLimit } from './memory/old-space.js';
import { createRedisClient, waitUntilReady, type RedisConnectionOptions } from './redis/connect.js';
import { createRedisStore } from './redis/redis-store.js';
import { createCachedStore } from './cached/cached-store.js';

/** Least time between two "evicted live counters" warnings of one memory store, ms. */
export const LRU_WARNING_INTERVAL_MS = 60_000;

/** The Redis store's options (`REDIS_*`, `CACHE_KEY_PREFIX`, `LOCAL_CACHE_SIZE_IN_BYTES`). */
export interface RedisStoreOptions {
  /** The connection for every counter (or every counter but the per-second ones). */
  readonly main: RedisConnectionOptions;
  /** `REDIS_PERSECOND=true`: the connection for windows under a minute; else `undefined`. */
  readonly perSecond: RedisConnectionOptions | undefined;
  /** `CACHE_KEY_PREFIX`: put before every Redis key ('' for none). */
  readonly keyPrefix: string;
  /** `LOCAL_CACHE_SIZE_IN_BYTES`: budget of the local over-limit cache; 0 (default) = off. */
  readonly localCacheBytes: number;
  /**
   * `REDIS_WAIT_AT_START` (default false; sluice only): wait up to `REDIS_TIMEOUT` for Redis to
   * answer before listening. By default sluice listens at once and its health fails until Redis
   * answers.
   */
  readonly waitAtStart: boolean;
  /**
   * `REDIS_MODE`: `exact` (default) decides every call in Redis; `cached` decides locally and
   * syncs with Redis every `syncIntervalMs` (docs/cached-mode.md).
   */
  readonly mode: 'exact' | 'cached';
  /** `REDIS_SYNC_INTERVAL` in ms (default 100): how often cached mode syncs with Redis. */
  readonly syncIntervalMs: number;
}

/**
 * Which store to create and how (docs/configuration.md). The field names are the settings' own
 * (src/settings.ts reads them from the environment), so a Settings object is one of these.
 */
export interface StoreOptions {
  /** `BACKEND_TYPE`: `memory` or `redis`. */
  readonly backendType: 'memory' | 'redis';
  /** `BACKEND_TYPE` was unset and `redis` was chosen because `REDIS_URL` is set (logged). */
  readonly backendTypeInferred: boolean;
  /** `MEMORY_MAX_KEYS`: cap on live counters in the memory store. */
  readonly memoryMaxKeys: number;
  /**
   * `MEMORY_MAX_BYTES`: cap on the bytes the memory store's counters hold, key text included;
   * `undefined` means half of V8's old-space limit (`defaultMaxBytes`).
   */
  readonly memoryMaxBytes: number | undefined;
  /** `STORE_FAILURE_MODE`: what a call answers when the Redis store fails. */
  readonly storeFailureMode: StoreFailureMode;
  /** The Redis store's options; `undefined` unless `backendType` is `redis`. */
  readonly redis: RedisStoreOptions | undefined;
}

/** What {@link createStore} works with: time, logs and metrics. */
export interface CreateStoreOptions {
  /** Time source of the memory store (and of the Redis store's local cache). */
  readonly clock: Clock;
  /** Parent logger; the store logs through a `store` child. */
  readonly logger: Logger;
  /** Where evictions, store errors, local cache answers and fallbacks are counted. */
  readonly metrics?: StoreMetricsSink;
}

/** Create the counter store `settings` describe. */
export async function createStore(
  settings: StoreOptions,
  options: CreateStoreOptions,
): Promise<CounterStore> {
  const { clock, metrics } = options;
  const memoryLog = options.logger.child({ module: 'memory-store' });
  const memory = (): CounterStore => {
    // A key flood evicts on every request: warn at once, then at most once per
    // LRU_WARNING_INTERVAL_MS with the evictions since the last warning (`count`), so the log
    // does not grow with the flood. The metric counts every eviction.
    let unlogged = 0;
    let loggedAt = -Infinity;
    let unstored = 0;
    let unstoredLoggedAt = -Infinity;
    const maxKeys = settings.memoryMaxKeys;
    const defaultBytes = defaultMaxBytes();
    const maxBytes = settings.memoryMaxBytes ?? defaultBytes;
    // Which cap was reached: the key cap when the store holds that many keys, else the byte cap
    // (read when the warning is written, after the call that evicted; `store` is set by then).
    const cap = (): string => (store.size() >= maxKeys ? 'MEMORY_MAX_KEYS' : 'MEMORY_MAX_BYTES');
    const oldSpaceBytes = processOldSpaceLimit();
    const heapLimitBytes = getHeapStatistics().heap_size_limit;
    memoryLog.info({ maxKeys, maxBytes, oldSpaceBytes, heapLimitBytes }, 'memory store created');
    // Above half the old space the cap no longer leaves the rest of the process, and the
    // garbage of a flood, their room: a flood of long keys can exhaust the heap before it.
    if (maxBytes > defaultBytes) {
      memoryLog.warn(
        { maxBytes, oldSpaceBytes },
        'MEMORY_MAX_BYTES is over half the old-space limit: a flood of long keys can exhaust the heap; lower it or raise --max-old-space-size',
      );
    }
    const store = createMemoryStore({
      clock,
      maxKeys,
      maxBytes,
      onEvict: (reason, count) => {
        metrics?.evicted(reason, count);
        if (reason !== 'lru') return;
        unlogged += count;
        const now = clock();
        if (now - loggedAt < LRU_WARNING_INTERVAL_MS) return;
        memoryLog.warn(
          { count: unlogged, maxKeys, maxBytes },
          `evicted live counters: ${cap()} reached`,
        );
        unlogged = 0;
        loggedAt = now;
      },
      onNotStored: (count) => {
        metrics?.notStored?.(count);
        unstored += count;
        const now = clock();
        if (now - unstoredLoggedAt < LRU_WARNING_INTERVAL_MS) return;
        memoryLog.warn(
          { count: unstored, maxKeys, maxBytes },
          `new counters not stored: ${cap()} reached and the counters held are limiting clients`,
        );
        unstored = 0;
        unstoredLoggedAt = now;
      },
    });
    return store;
  };
  const redis = settings.redis;
  if (settings.backendType !== 'redis' || redis === undefined) return memory();

  const logger = options.logger.child({ module: 'redis-store' });
  if (settings.backendTypeInferred) {
    logger.warn('BACKEND_TYPE is not set and REDIS_URL is: using the Redis store');
  }
  const client = createRedisClient(redis.main);
  const perSecondClient =
    redis.perSecond === undefined ? undefined : createRedisClient(redis.perSecond);
  const store = createRedisStore({
    client,
    perSecondClient,
    keyPrefix: redis.keyPrefix,
    timeoutMs: redis.main.timeoutMs,
    perSecondTimeoutMs: redis.perSecond?.timeoutMs,
    localCacheBytes: redis.localCacheBytes,
    clock,
    metrics,
    logger,
  });
  // By default nothing waits for Redis: the servers listen at once and health fails until Redis
  // answers (calls get the failure policy's answer meanwhile). REDIS_WAIT_AT_START restores a
  // wait of up to REDIS_TIMEOUT before listening.
  const connected = redis.waitAtStart
    ? (
        await Promise.all([
          waitUntilReady(client, redis.main.timeoutMs),
          perSecondClient === undefined
            ? true
            : waitUntilReady(perSecondClient, redis.perSecond!.timeoutMs),
        ])
      ).every(Boolean)
    : undefined;
  logger.info(
    {
      mode: redis.mode,
      syncIntervalMs: redis.mode === 'cached' ? redis.syncIntervalMs : undefined,
      redisType: redis.main.type,
      perSecond: perSecondClient !== undefined,
      localCacheBytes: redis.localCacheBytes,
      failureMode: settings.storeFailureMode,
      waitAtStart: redis.waitAtStart,
      connected,
    },
    'redis store created',
  );
  if (redis.mode === 'cached') {
    // Decisions are local; the failure policy's rules are applied by the cached store itself
    // (docs/cached-mode.md, "Redis down").
    return createCachedStore({
      remote: store,
      syncIntervalMs: redis.syncIntervalMs,
      maxCounters: settings.memoryMaxKeys,
      failureMode: settings.storeFailureMode,
      clock,
      metrics,
      logger: options.logger.child({ module: 'cached-store' }),
    });
  }
  return withFailurePolicy({
    store,
    mode: settings.storeFailureMode,
    fallback: settings.storeFailureMode === 'memory' ? memory() : undefined,
    metrics,
  });
}
