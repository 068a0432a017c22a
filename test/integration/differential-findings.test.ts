/**
 * Findings of the differential tier (test/differential/) that are deliberate, pinned here so they
 * stay as docs/compatibility.md describes them. Each comment gives what the pinned reference
 * answered for the same calls.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

describe('one counter charged by several descriptors of one request', () => {
  let running: RunningApp;

  beforeAll(async () => {
    const dir = await ruleDir({
      'd.yaml':
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 5}\n',
    });
    running = await startApp([dir], { DEFAULT_ALGORITHM: 'fixed_window' });
  });
  afterAll(async () => {
    await running?.stop();
  });

  // The request's hits_addend (the Envoy protos the test client uses predate the per-descriptor one).
  const twice = (value: string, hits: number) => ({
    domain: 'd',
    hits_addend: hits,
    descriptors: [1, 2].map(() => ({ entries: [{ key: 'k', value }] })),
  });

  it('every status shows the counter after the whole request (the reference: 3, then 1)', async () => {
    const response = await running.client.shouldRateLimit(twice('a', 2));
    expect(response.overall_code).toBe('OK');
    expect(response.statuses.map((s) => [s.code, s.limit_remaining])).toEqual([
      ['OK', 1],
      ['OK', 1],
    ]);
  });

  it('codes follow the running total as in the reference (OK, then OVER_LIMIT), and nothing is charged', async () => {
    const response = await running.client.shouldRateLimit(twice('b', 3));
    expect(response.overall_code).toBe('OVER_LIMIT');
    expect(response.statuses.map((s) => s.code)).toEqual(['OK', 'OVER_LIMIT']);
    // A rejected request charges nothing (the reference charged 6 and would report 0 left).
    const after = await running.client.shouldRateLimit({
      domain: 'd',
      descriptors: [{ entries: [{ key: 'k', value: 'b' }] }],
    });
    expect(after.statuses[0]?.limit_remaining).toBe(4);
  });
});
