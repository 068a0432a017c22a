/**
 * What a scrape costs (issue 31, item 7): concurrent scrapes share one render, renders are paced
 * so a scrape loop cannot take the event loop from the calls, and the primary's sum over workers
 * (src/metrics/cluster.ts) caps series for the whole service and keeps a dead worker's counts.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createClusterMetrics } from '../../../src/metrics/cluster.js';
import { RENDER_PAUSE_RATIO } from '../../../src/metrics/render.js';
import { createMetrics, type Metrics, type MetricsReport } from '../../../src/metrics/metrics.js';

const options = { nearLimitRatio: 0.8, processMetrics: false } as const;

afterEach(() => {
  vi.useRealTimers();
});

describe('render', () => {
  it('concurrent scrapes share one render', async () => {
    let renders = 0;
    // storeSize is read once per render (the sluice_store_keys gauge).
    const m = createMetrics({ ...options, storeSize: () => ++renders });
    m.service.callsOk = 3;
    const texts = await Promise.all(Array.from({ length: 8 }, () => m.render()));
    expect(renders).toBe(1);
    for (const text of texts) expect(text).toBe(texts[0]);
    expect(texts[0]).toContain('sluice_should_rate_limit_calls_total{result="ok"} 3\n');
  });

  it('waits RENDER_PAUSE_RATIO times the last render before the next, and answers fresh values', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let t = 0;
    let renders = 0;
    const m = createMetrics({
      ...options,
      now: () => t,
      storeSize: () => {
        // This render takes 10 ms.
        t += 10;
        return ++renders;
      },
    });
    await m.render();
    expect(renders).toBe(1);
    m.service.callsOk = 7;
    let second: string | undefined;
    void m.render().then((text) => (second = text));
    const third = m.render();
    await vi.advanceTimersByTimeAsync(10 * RENDER_PAUSE_RATIO - 1);
    expect(renders).toBe(1);
    expect(second).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(await third).toContain('sluice_should_rate_limit_calls_total{result="ok"} 7\n');
    expect(second).toBe(await third);
    expect(renders).toBe(2);
  });
});

/** A worker's report after `hits` calls on each of `values` of rule `w.user` (detailed). */
async function workerReport(values: string[], calls: number): Promise<MetricsReport> {
  const m: Metrics = createMetrics({ ...options, maxSeriesPerRule: 4 });
  for (const value of values) m.requestStatsFor(`w.user_${value}`, 'w.user').totalHits += 1;
  m.statsFor('w.path').totalHits += 5;
  m.service.callsOk = calls;
  return m.report();
}

describe('the primary sum over workers', () => {
  it('caps request series for the whole service, in the same overflow series', async () => {
    const reports = new Map<number, MetricsReport>();
    const cluster = createClusterMetrics({
      maxSeriesPerRule: 4,
      collect: () => {
        for (const [id, report] of reports) cluster.report(id, report);
        return Promise.resolve();
      },
    });
    cluster.join(1);
    cluster.join(2);
    // Each worker alone keeps four of its own; the service may keep four in all.
    reports.set(1, await workerReport(['a', 'b', 'c', 'd', 'e'], 10));
    reports.set(2, await workerReport(['f', 'g', 'h', 'i', 'j', 'k'], 20));
    const text = await cluster.render();
    const own = text
      .split('\n')
      .filter((l) =>
        l.startsWith('ratelimit_service_rate_limit_total_hits{domain="w",key1="user_'),
      );
    expect(own).toHaveLength(4);
    expect(text).toContain(
      'ratelimit_service_rate_limit_total_hits{domain="w",key1="user",key2="__overflow__"} 7\n',
    );
    expect(text).toContain('ratelimit_service_rate_limit_total_hits{domain="w",key1="path"} 10\n');
    expect(text).toContain('ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 30\n');
  });

  it("keeps a dead worker's counters (not its gauges) and never goes back", async () => {
    const reports = new Map<number, MetricsReport>();
    const cluster = createClusterMetrics({
      collect: () => {
        for (const [id, report] of reports) cluster.report(id, report);
        return Promise.resolve();
      },
    });
    cluster.join(1);
    cluster.join(2);
    reports.set(1, await workerReport(['a'], 2000));
    reports.set(2, await workerReport(['b'], 2000));
    expect(await cluster.render()).toContain(
      'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 4000\n',
    );
    // Worker 1 dies; worker 3 replaces it and starts from zero.
    reports.delete(1);
    cluster.retire(1);
    cluster.join(3);
    reports.set(3, await workerReport([], 5));
    const after = await cluster.render();
    expect(after).toContain(
      'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 4005\n',
    );
    expect(after).toContain(
      'ratelimit_service_rate_limit_total_hits{domain="w",key1="user_a"} 1\n',
    );
    expect(after).toContain('ratelimit_service_rate_limit_total_hits{domain="w",key1="path"} 15\n');
    // The store-size gauge is the living workers' only (0 each here), not the dead one's.
    expect(after).toContain('sluice_store_keys 0\n');
    // A late report of the dead worker counts for nothing.
    cluster.report(1, await workerReport(['z'], 9999));
    expect(await cluster.render()).toContain(
      'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 4005\n',
    );
  });

  it('a worker slow to report delays its scrape, not the next one', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let t = 0;
    let collections = 0;
    const cluster = createClusterMetrics({
      now: () => t,
      collect: () => {
        // Waiting for a stopped worker until the collection gives up, doing nothing.
        t += 5_000;
        collections++;
        return Promise.resolve();
      },
    });
    await cluster.render();
    await cluster.render();
    expect(collections).toBe(2);
  });

  it('concurrent scrapes share one collection', async () => {
    let collections = 0;
    const cluster = createClusterMetrics({
      collect: () => {
        collections++;
        return Promise.resolve();
      },
    });
    await Promise.all(Array.from({ length: 16 }, () => cluster.render()));
    expect(collections).toBe(1);
  });
});
