/**
 * Issue 22, item 3: per-value metric series are bounded per rule by default. Requests choose the
 * label values of `detailed_metric` and `value_to_metric` rules and of RateLimitOverride
 * descriptors; a flood of distinct long values (scaled down from the 1,600 calls x 64
 * descriptors x 4,000 characters) must leave /metrics answering 200 with a bounded number of
 * series and bytes, count what was folded into each rule's overflow series, and keep the
 * process's heap bounded.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { silentLogger } from '../../src/logging/logger.js';
import type { RateLimitRequest, RequestDescriptor } from '../../src/model.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, ruleDir } from '../helpers/app.js';

const RULES = [
  'domain: card',
  'descriptors:',
  '  - key: user',
  '    detailed_metric: true',
  '    rate_limit: {unit: hour, requests_per_unit: 1000}',
  '  - key: ip',
  '    value_to_metric: true',
  '    rate_limit: {unit: hour, requests_per_unit: 1000}',
  '  - key: plain',
  '    rate_limit: {unit: hour, requests_per_unit: 1000}',
  '',
].join('\n');

/** Calls sent; each has one descriptor of each kind with a distinct value. */
const CALLS = 3_000;
/** Caps set for the test (defaults are 1000 and 10000). */
const PER_RULE = 200;
const TOTAL = 500;

function request(i: number, long: boolean): RateLimitRequest {
  const value = (kind: string) => `${kind}-${i}-${long ? 'x'.repeat(1_000) : ''}`;
  const d = (key: string, override = false): RequestDescriptor => ({
    entries: [{ key, value: value(key) }],
    limit: override ? { requestsPerUnit: 5, unit: 'minute' } : undefined,
    hitsAddend: undefined,
  });
  return {
    domain: 'card',
    descriptors: [d('user'), d('ip'), d('plain', true), d('plain')],
    hitsAddend: 0,
  };
}

function series(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`));
}

function sample(text: string, line: string): number {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  if (found === undefined) throw new Error(`no sample ${line}`);
  return Number(found.slice(line.length + 1));
}

describe('metric cardinality is bounded per rule', () => {
  let app: App;
  let base: string;

  beforeAll(async () => {
    const dir = await ruleDir({ 'card.yaml': RULES });
    const settings = loadSettings(
      {
        ...LOOPBACK_LISTENERS,
        METRICS_MAX_SERIES_PER_RULE: String(PER_RULE),
        METRICS_MAX_SERIES: String(TOTAL),
      },
      { config: [path.join(dir, 'card.yaml')] },
    );
    app = await createApp({ settings, logger: silentLogger(), watch: false });
    const addresses = await app.start();
    base = `http://127.0.0.1:${addresses.httpPort}`;
  });
  afterAll(async () => {
    await app?.close();
  });

  it(`${CALLS} calls with distinct values: series capped, the rest in overflow series, counted`, async () => {
    for (let i = 0; i < CALLS; i++) {
      const response = await app.service.shouldRateLimit(request(i, i % 2 === 1));
      expect(response.overallCode).toBe('OK');
    }
    const answer = await fetch(`${base}/metrics`);
    expect(answer.status).toBe(200);
    const text = await answer.text();
    // Three rules with request-chosen keys, at most PER_RULE each and TOTAL in all, plus one
    // overflow series per rule and the plain rule's own series.
    const hits = series(text, 'ratelimit_service_rate_limit_total_hits');
    expect(hits.length).toBeLessThanOrEqual(TOTAL + 3 + 1);
    expect(hits.length).toBeGreaterThan(PER_RULE);
    expect(text.length).toBeLessThan(2_000_000);
    // Long values never get a series of their own.
    expect(hits.every((line) => !line.includes('x'.repeat(300)))).toBe(true);
    // Every hit is still counted: in its own series or its rule's overflow series.
    const total = hits.reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    expect(total).toBe(CALLS * 4);
    const overflow = hits.filter((line) => line.includes('key2="__overflow__"'));
    expect(overflow.map((line) => line.replace(/ \d+$/, '')).sort()).toEqual([
      'ratelimit_service_rate_limit_total_hits{domain="card",key1="ip",key2="__overflow__"}',
      'ratelimit_service_rate_limit_total_hits{domain="card",key1="plain",key2="__overflow__"}',
      'ratelimit_service_rate_limit_total_hits{domain="card",key1="user",key2="__overflow__"}',
    ]);
    const created = hits.length - overflow.length - 1;
    expect(sample(text, 'sluice_metric_series_dropped_total')).toBe(CALLS * 3 - created);
    // The plain rule keeps its one series.
    expect(
      sample(text, 'ratelimit_service_rate_limit_total_hits{domain="card",key1="plain"}'),
    ).toBe(CALLS);
  });
});
