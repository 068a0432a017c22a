/**
 * What the counter stores report (docs/operations-metrics.md): evictions, counters not stored,
 * failed operations, local-cache answers, the failure policy, and the number of counters held.
 */
import type { Registry } from 'prom-client';
import { labelledCounter, plainCounter, plainGauge } from './plain-metrics.js';

/**
 * What a counter store reports (passed to the store by the composition root). Every method adds
 * to a plain number; none may throw.
 */
export interface StoreMetricsSink {
  /** `count` counters dropped, because they had expired (`expired`) or by the key cap (`lru`). */
  evicted(reason: 'expired' | 'lru', count: number): void;
  /**
   * `count` new counters decided but not stored, because the memory store was full of counters
   * that are limiting someone (`MEMORY_MAX_KEYS` reached; docs/operations.md, "Memory store").
   */
  notStored?(count: number): void;
  /** One failed store operation; `kind` is a short, bounded word (`timeout`, `connection`, ...). */
  storeError(kind: string): void;
  /** `count` counters answered over limit from the local cache without asking the store. */
  localCacheOverLimit(count: number): void;
  /** Whether a fallback policy answered instead of the store (`allow`, `memory`, `error`). */
  fallback(policy: string): void;
  /**
   * Cached mode (docs/cached-mode.md): one sync with Redis ended, `ok` or not, carrying `counters`
   * counters; `pendingHits` admitted hits are still waiting for Redis; `atMs` its end (epoch ms).
   */
  cachedSync?(ok: boolean, counters: number, pendingHits: number, atMs: number): void;
  /** Cached mode: `hits` admitted hits dropped before reaching Redis (their counter was evicted). */
  cachedDroppedHits?(hits: number): void;
}

/**
 * Register the store's metrics on `registry` and give the sink that feeds them; `storeSize`
 * reads the number of counters held at scrape time (0 without it).
 */
export function createStoreMetrics(
  registry: Registry,
  storeSize: (() => number) | undefined,
): StoreMetricsSink {
  const evictions = { expired: 0, lru: 0 };
  let notStored = 0;
  const storeErrors = new Map<string, number>();
  const fallbacks = new Map<string, number>();
  let localCacheOverLimit = 0;
  const syncs = { ok: 0, error: 0 };
  let syncedCounters = 0;
  let pendingHits = 0;
  let droppedHits = 0;
  // Until the first sync: counted from the start (a store that never syncs ages from then).
  let lastSyncOkMs: number | undefined;
  let firstSyncMs: number | undefined;
  labelledCounter(
    registry,
    'sluice_store_evictions_total',
    'Counters dropped by the store: expired (idle reclaim) or lru (MEMORY_MAX_KEYS reached)',
    'reason',
    () => Object.entries(evictions),
  );
  plainCounter(
    registry,
    'sluice_store_keys_not_stored_total',
    'New counters decided as fresh but not stored: MEMORY_MAX_KEYS reached and every counter examined was limiting someone',
    () => notStored,
  );
  labelledCounter(
    registry,
    'sluice_store_errors_total',
    'Failed store operations by kind',
    'kind',
    () => storeErrors,
  );
  plainCounter(
    registry,
    'sluice_store_local_cache_over_limit_total',
    'Counters answered over limit from the local cache without a store round trip',
    () => localCacheOverLimit,
  );
  labelledCounter(
    registry,
    'sluice_store_fallback_total',
    'Calls answered by the failure policy while the store was failing, by policy',
    'policy',
    () => fallbacks,
  );
  plainGauge(
    registry,
    'sluice_store_keys',
    'Counters held by the store (may include expired ones not yet reclaimed)',
    storeSize,
  );
  labelledCounter(
    registry,
    'sluice_cached_syncs_total',
    'Cached mode: syncs with Redis by result (ok, error)',
    'result',
    () => Object.entries(syncs),
  );
  plainCounter(
    registry,
    'sluice_cached_synced_counters_total',
    'Cached mode: counters carried by syncs with Redis (one write per counter per sync)',
    () => syncedCounters,
  );
  plainCounter(
    registry,
    'sluice_cached_dropped_hits_total',
    'Cached mode: admitted hits dropped before reaching Redis (their counter was evicted)',
    () => droppedHits,
  );
  plainGauge(
    registry,
    'sluice_cached_pending_hits',
    'Cached mode: admitted hits not yet in Redis, as of the last sync',
    () => pendingHits,
  );
  plainGauge(
    registry,
    'sluice_cached_last_sync_age_seconds',
    'Cached mode: seconds since the last successful sync with Redis (0 before the first sync)',
    () => {
      const since = lastSyncOkMs ?? firstSyncMs;
      return since === undefined ? 0 : Math.max(0, Date.now() - since) / 1000;
    },
  );
  return {
    cachedSync(ok, counters, pending, atMs) {
      firstSyncMs ??= atMs;
      syncs[ok ? 'ok' : 'error']++;
      if (ok) {
        syncedCounters += counters;
        lastSyncOkMs = atMs;
      }
      pendingHits = pending;
    },
    cachedDroppedHits(hits) {
      droppedHits += hits;
    },
    evicted(reason, count) {
      evictions[reason] += count;
    },
    notStored(count) {
      notStored += count;
    },
    storeError(kind) {
      storeErrors.set(kind, (storeErrors.get(kind) ?? 0) + 1);
    },
    localCacheOverLimit(count) {
      localCacheOverLimit += count;
    },
    fallback(policy) {
      fallbacks.set(policy, (fallbacks.get(policy) ?? 0) + 1);
    },
  };
}
