/**
 * docs/grafana-dashboard.json reads only metrics sluice exports: every metric name in every panel
 * query must be a family on a real /metrics page (prom-client's process metrics included).
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createMetrics, EXPORTED_METRIC_NAMES } from '../../../src/metrics/metrics.js';

interface Panel {
  title: string;
  targets?: { expr: string }[];
}

const dashboard = JSON.parse(
  fs.readFileSync(new URL('../../../docs/grafana-dashboard.json', import.meta.url), 'utf8'),
) as { panels: Panel[] };

/** Metric names in a PromQL expression: identifiers of our prefixes (labels are lower-case words). */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b(?:ratelimit|sluice|process|nodejs)_[a-zA-Z0-9_]+/g)].map(
    (m) => m[0],
  );
}

/** Every sample name a /metrics page can hold: each `# TYPE` family, histograms with suffixes. */
async function exportedSampleNames(): Promise<Set<string>> {
  const metrics = createMetrics({ nearLimitRatio: 0.8, storeSize: () => 0 });
  const names = new Set<string>();
  for (const line of (await metrics.render()).split('\n')) {
    const match = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (match === null) continue;
    const [, name, type] = match;
    names.add(name!);
    if (type === 'histogram') for (const s of ['_bucket', '_sum', '_count']) names.add(name! + s);
  }
  return names;
}

describe('docs/grafana-dashboard.json', () => {
  it('queries only metric names that sluice exports', async () => {
    const exported = await exportedSampleNames();
    const used = dashboard.panels.flatMap((panel) =>
      (panel.targets ?? []).flatMap((target) =>
        metricNames(target.expr).map((name) => ({ panel: panel.title, name })),
      ),
    );
    expect(used.length).toBeGreaterThan(10);
    const unknown = used.filter(({ name }) => !exported.has(name));
    expect(unknown).toEqual([]);
  });

  it('shows every metric sluice defines itself', () => {
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const used = new Set(
      exprs.flatMap(metricNames).map((n) => n.replace(/_(bucket|sum|count)$/, '')),
    );
    const missing = EXPORTED_METRIC_NAMES.filter((name) => !used.has(name));
    // The reference's request counter duplicates the calls-by-result panel.
    expect(missing).toEqual(['ratelimit_service_total_requests']);
  });
});
