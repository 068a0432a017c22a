/**
 * Cached mode's metrics (docs/cached-mode.md, "Metrics"): what the store reports through its sink
 * reaches the Prometheus series, and the last sync's age counts from the last successful sync.
 */
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createStoreMetrics } from '../../../../src/metrics/store-metrics.js';

/** The value of `series` in the registry's text. */
async function value(registry: Registry, series: string): Promise<number | undefined> {
  const line = (await registry.metrics()).split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

afterEach(() => {
  vi.useRealTimers();
});

describe('cached mode metrics', () => {
  it('count syncs by result, synced counters and dropped hits, and show the pending hits', async () => {
    const registry = new Registry();
    const sink = createStoreMetrics(registry, () => 3);
    sink.cachedSync!(true, 4, 0, Date.now());
    sink.cachedSync!(false, 2, 7, Date.now());
    sink.cachedDroppedHits!(5);
    expect(await value(registry, 'sluice_cached_syncs_total{result="ok"}')).toBe(1);
    expect(await value(registry, 'sluice_cached_syncs_total{result="error"}')).toBe(1);
    expect(await value(registry, 'sluice_cached_synced_counters_total')).toBe(4);
    expect(await value(registry, 'sluice_cached_pending_hits')).toBe(7);
    expect(await value(registry, 'sluice_cached_dropped_hits_total')).toBe(5);
    expect(await value(registry, 'sluice_store_keys')).toBe(3);
  });

  it('age the last successful sync, from the first attempt when none succeeded, 0 before any', async () => {
    vi.useFakeTimers({ now: 1_700_000_000_000 });
    const registry = new Registry();
    const sink = createStoreMetrics(registry, undefined);
    expect(await value(registry, 'sluice_cached_last_sync_age_seconds')).toBe(0);
    sink.cachedSync!(false, 1, 1, Date.now());
    vi.advanceTimersByTime(2_000);
    expect(await value(registry, 'sluice_cached_last_sync_age_seconds')).toBe(2);
    sink.cachedSync!(true, 1, 0, Date.now());
    vi.advanceTimersByTime(500);
    sink.cachedSync!(false, 1, 1, Date.now());
    vi.advanceTimersByTime(1_000);
    expect(await value(registry, 'sluice_cached_last_sync_age_seconds')).toBe(1.5);
  });
});
