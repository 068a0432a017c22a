/**
 * The console's "try it" and the service answer from the same code (issue 33, item 2): the same
 * request goes to `POST /api/try` and then to the service (`/json`, which charges it), step by
 * step over one evolving set of counters, across every algorithm, quota and shadow rules, several
 * limits on one key, `replaces`, unlimited and unknown descriptors, repeated counters in one
 * request, and with QUOTA_MODE and SHADOW_MODE. The store's clock is a manual one, so nothing
 * moves between the two answers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';

const RULES = `domain: eq
descriptors:
  - key: sw
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: fw
    rate_limit: {algorithm: fixed_window, unit: hour, requests_per_unit: 3}
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 3, burst: 4}
  - key: log
    rate_limit: {algorithm: sliding_log, unit: hour, requests_per_unit: 3}
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: q2
    quota_mode: true
    rate_limit: {algorithm: fixed_window, unit: hour, requests_per_unit: 4}
  - key: sh
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: shq
    shadow_mode: true
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: two
    rate_limits:
      - {unit: hour, requests_per_unit: 5}
      - {algorithm: token_bucket, unit: minute, requests_per_unit: 2}
  - key: boss
    rate_limit: {unit: hour, requests_per_unit: 6, name: boss}
    replaces: [{name: plain}]
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1, name: plain}
  - key: free
    rate_limit: {unlimited: true}
`;

const KEYS = [
  'sw',
  'fw',
  'tb',
  'log',
  'q1',
  'q2',
  'sh',
  'shq',
  'two',
  'boss',
  'plain',
  'free',
  'none',
];

/** A small seeded generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One request of 1 to 4 descriptors on few values, so counters repeat within and across calls. */
function requestOf(next: () => number): Record<string, unknown> {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const descriptors = Array.from({ length: 1 + Math.floor(next() * 4) }, () => ({
    entries: [{ key: pick(KEYS), value: pick(['a', 'b']) }],
    ...(next() < 0.2 ? { hits_addend: pick([0, 1, 2, 3]) } : {}),
  }));
  return { domain: 'eq', descriptors, ...(next() < 0.2 ? { hits_addend: 2 } : {}) };
}

/** The `/json` duration text of `ms` (protobuf JSON: seconds with up to 3 decimals). */
function durationText(ms: number | undefined): string | undefined {
  if (ms === undefined) return undefined;
  const whole = Math.max(0, Math.round(ms));
  const millis = whole % 1000;
  const seconds = Math.floor(whole / 1000);
  return millis === 0 ? `${seconds}s` : `${seconds}.${String(millis).padStart(3, '0')}s`;
}

/** POST `body` as JSON: the status and the answer's JSON. */
async function post(url: string, body: unknown): Promise<{ status: number; answer: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  // `/json` refuses a request with a plain-text status line.
  return { status: res.status, answer: text.startsWith('{') ? JSON.parse(text) : { text } };
}

/**
 * What `/json` must answer for the descriptor the console shows as `d` in an answer that was
 * `admitted`: over its limit 0; else, admitted, the room after the charge; else the room now.
 */
function expectedRemaining(d: any, admitted: boolean): number {
  if (d.counterKeys.length === 0) return d.limitRemaining;
  if (d.remainingAfter === undefined) return 0;
  return admitted ? d.remainingAfter : d.limitRemaining;
}

describe.each<{ name: string; env: Record<string, string> }>([
  { name: 'defaults', env: {} },
  { name: 'QUOTA_MODE', env: { QUOTA_MODE: 'true' } },
  { name: 'SHADOW_MODE', env: { SHADOW_MODE: 'true' } },
])('try it answers as the service does ($name)', ({ env }) => {
  let sluice: ConsoleApp | undefined;
  afterEach(async () => {
    await sluice?.stop();
  });

  it('for 300 requests in a row, each tried and then sent', async () => {
    const clock = createManualClock();
    sluice = await startConsoleApp(env, RULES, undefined, clock.now);
    const next = random(33);
    const json = `http://127.0.0.1:${sluice.httpPort}/json`;
    let rejected = 0;
    for (let step = 0; step < 300; step++) {
      const request = requestOf(next);
      const where = `step ${step}: ${JSON.stringify(request)}`;
      const { status: tryStatus, answer: tried } = await post(
        `${sluice.debugUrl}/api/try`,
        request,
      );
      expect(tryStatus, where).toBe(200);
      const { status: jsonStatus, answer: served } = await post(json, request);
      // `/json` answers an OVER_LIMIT request with 429.
      expect(jsonStatus, where).toBe(served.overallCode === 'OVER_LIMIT' ? 429 : 200);
      expect(tried.overallCode, where).toBe(served.overallCode);
      expect(
        tried.descriptors.map((d: any) => d.code),
        where,
      ).toEqual(served.statuses.map((s: any) => s.code));
      tried.descriptors.forEach((d: any, i: number) => {
        const status = served.statuses[i];
        expect(status.limitRemaining ?? 0, `${where} #${i}`).toBe(
          expectedRemaining(d, tried.admitted),
        );
        expect(status.currentLimit?.requestsPerUnit, `${where} #${i}`).toBe(
          d.currentLimit?.requestsPerUnit,
        );
        expect(status.durationUntilReset, `${where} #${i}`).toBe(
          durationText(d.durationUntilResetMs),
        );
      });
      if (!tried.admitted) rejected++;
      // Up to 20 minutes: windows slide, buckets refill, fixed windows roll over at times.
      clock.advance(1_000 + Math.floor(next() * 20 * 60_000));
    }
    // The walk saw both answers many times.
    expect(rejected).toBeGreaterThan(5);
    expect(rejected).toBeLessThan(295);
  });
});

describe('try it refuses what the service refuses', () => {
  let sluice: ConsoleApp | undefined;
  afterEach(async () => {
    await sluice?.stop();
  });

  it('answers 400 saying why for a request over MAX_DESCRIPTORS_PER_REQUEST, as /json does', async () => {
    sluice = await startConsoleApp({ MAX_DESCRIPTORS_PER_REQUEST: '2' }, RULES);
    const request = {
      domain: 'eq',
      descriptors: ['sw', 'fw', 'tb'].map((key) => ({ entries: [{ key, value: 'a' }] })),
    };
    const tried = await post(`${sluice.debugUrl}/api/try`, request);
    const served = await post(`http://127.0.0.1:${sluice.httpPort}/json`, request);
    expect(served.status).toBe(400);
    expect(tried.status).toBe(400);
    expect(tried.answer).toMatchObject({ code: 'INVALID_REQUEST' });
    expect(tried.answer.error).toContain('at most 2 are allowed (MAX_DESCRIPTORS_PER_REQUEST)');
  });
});
