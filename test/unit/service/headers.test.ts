/**
 * Rate limit response headers through the real service, limiter and memory store on a fixed clock:
 * the reference's three headers (its descriptor choice and values), the IETF structured fields read
 * back with a structured-field parser, Retry-After, and the problem+json body.
 */
import { parseList } from 'structured-headers';
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import { createLimiter } from '../../../src/limiter/limiter.js';
import { silentLogger } from '../../../src/logging/logger.js';
import type { RateLimitResponse } from '../../../src/model.js';
import type { HeaderOptions } from '../../../src/service/headers.js';
import { createRateLimitService } from '../../../src/service/rate-limit-service.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';

const REFERENCE: HeaderOptions = {
  format: 'reference',
  limitHeader: 'RateLimit-Limit',
  remainingHeader: 'RateLimit-Remaining',
  resetHeader: 'RateLimit-Reset',
};
const IETF: HeaderOptions = { ...REFERENCE, format: 'ietf' };

function service(
  yaml: string,
  options: { headers?: HeaderOptions; problemJson?: boolean; startMs?: number } = {},
) {
  const clock = createManualClock(options.startMs ?? 2_222_000);
  const snapshot = buildSnapshot([{ name: 'r.yaml', content: yaml }]);
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const svc = createRateLimitService({
    limiter: createLimiter({ store, shadowMode: false }),
    config: () => snapshot,
    bounds: { maxDescriptors: 16, maxEntries: 8, maxEntryLength: 256 },
    logger: silentLogger(),
    headers: options.headers,
    problemJson: options.problemJson,
    clock: clock.now,
  });
  const call = (...descriptors: Record<string, string>[]): Promise<RateLimitResponse> =>
    svc.shouldRateLimit({
      domain: 'web',
      descriptors: descriptors.map((d) => ({
        entries: Object.entries(d).map(([key, value]) => ({ key, value })),
        limit: undefined,
        hitsAddend: undefined,
      })),
      hitsAddend: 0,
    });
  return { call, clock };
}

function headers(response: RateLimitResponse): Record<string, string> {
  return Object.fromEntries(response.responseHeadersToAdd.map(({ key, value }) => [key, value]));
}

const FIXED = `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
`;

const TWO_RULES = `
domain: web
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-user}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: free
`;

describe('reference headers (LIMIT_RESPONSE_HEADERS_ENABLED)', () => {
  it('10 per MINUTE at unix time 2222 s with the fixed window: limit 10, remaining 9, reset 58', async () => {
    const { call } = service(FIXED, { headers: REFERENCE });
    const response = await call({ user: 'a' });
    expect(response.responseHeadersToAdd).toEqual([
      { key: 'RateLimit-Limit', value: '10' },
      { key: 'RateLimit-Remaining', value: '9' },
      { key: 'RateLimit-Reset', value: '58' },
    ]);
  });

  it('picks the descriptor with the least remaining, and the OVER_LIMIT one when any', async () => {
    const { call } = service(TWO_RULES, { headers: { ...REFERENCE, limitHeader: 'X-Limit' } });
    let response = await call({ user: 'a' }, { ip: '1' });
    // user has 9 left, ip 1: the reference reports ip.
    expect(headers(response)).toMatchObject({ 'X-Limit': '2', 'RateLimit-Remaining': '1' });
    await call({ ip: '1' });
    response = await call({ user: 'a' }, { ip: '1' });
    expect(response.overallCode).toBe('OVER_LIMIT');
    expect(headers(response)).toMatchObject({ 'X-Limit': '2', 'RateLimit-Remaining': '0' });
    expect(Number(headers(response)['RateLimit-Reset'])).toBeGreaterThanOrEqual(1);
  });

  it('a quota descriptor over its limit is chosen only by least remaining, never forced (master)', async () => {
    const { call } = service(
      `
domain: web
descriptors:
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`,
      { headers: { ...REFERENCE, limitHeader: 'X-Limit' } },
    );
    await call({ ip: '1' });
    await call({ ip: '1' });
    await call({ quota: 'q' });
    // ip (2/s) is over and first; the quota descriptor after it is over too, with remaining 0:
    // as the reference, ip keeps the headers (an over-limit quota status is not forced).
    const response = await call({ ip: '1' }, { quota: 'q' });
    expect(response.statuses.map((s) => s.code)).toEqual(['OVER_LIMIT', 'OVER_LIMIT']);
    expect(headers(response)).toMatchObject({ 'X-Limit': '2', 'RateLimit-Remaining': '0' });
  });

  it('adds nothing when no descriptor has a limit', async () => {
    const { call } = service(TWO_RULES, { headers: REFERENCE });
    expect((await call({ free: 'x' })).responseHeadersToAdd).toEqual([]);
  });

  it('adds nothing when headers are off', async () => {
    const { call } = service(TWO_RULES);
    expect((await call({ user: 'a' })).responseHeadersToAdd).toEqual([]);
  });
});

describe('IETF headers (LIMIT_RESPONSE_HEADERS_FORMAT=ietf)', () => {
  it('one policy per limited descriptor, read back by a structured-field parser', async () => {
    const { call } = service(TWO_RULES, { headers: IETF });
    const response = await call({ user: 'a' }, { free: 'x' }, { ip: '1' });
    const h = headers(response);
    expect(Object.keys(h).sort()).toEqual(['RateLimit', 'RateLimit-Policy']);

    const policies = parseList(h['RateLimit-Policy']!);
    expect(policies.map(([name, params]) => [name, Object.fromEntries(params)])).toEqual([
      ['per-user', { q: 10, w: 60 }],
      ['web.ip', { q: 2, w: 1 }],
    ]);
    const limits = parseList(h['RateLimit']!);
    expect(limits.map(([name]) => name)).toEqual(['per-user', 'web.ip']);
    const [userParams, ipParams] = limits.map(([, params]) => Object.fromEntries(params));
    expect(userParams).toMatchObject({ r: 9 });
    expect(ipParams).toMatchObject({ r: 1 });
    for (const params of [userParams!, ipParams!]) {
      expect(Number.isInteger(params.t)).toBe(true);
      expect(params.t).toBeGreaterThanOrEqual(0);
    }
  });

  it('Retry-After on OVER_LIMIT: whole seconds, rounded up, at least 1', async () => {
    const { call, clock } = service(TWO_RULES, { headers: IETF });
    await call({ ip: '1' });
    await call({ ip: '1' });
    clock.advance(999); // 1 ms before the oldest hit leaves the one-second window
    const response = await call({ ip: '1' });
    expect(response.overallCode).toBe('OVER_LIMIT');
    const h = headers(response);
    expect(h['Retry-After']).toMatch(/^[1-9]\d*$/);
    expect(Number(h['Retry-After'])).toBe(1);
    const [[, params]] = parseList(h['RateLimit']!).map(([n, p]) => [n, Object.fromEntries(p)]) as [
      [unknown, Record<string, unknown>],
    ];
    expect(params.r).toBe(0);
    // An OK answer has no Retry-After.
    expect(headers(await call({ user: 'z' }))['Retry-After']).toBeUndefined();
  });
});

describe('problem+json raw_body (LIMIT_PROBLEM_JSON_ENABLED)', () => {
  it('is sent with OVER_LIMIT only, as RFC 9457 problem details', async () => {
    const { call } = service(TWO_RULES, { problemJson: true });
    const ok = await call({ ip: '9' });
    expect(ok.rawBody).toBeUndefined();
    await call({ ip: '9' });
    const over = await call({ ip: '9' });
    expect(over.overallCode).toBe('OVER_LIMIT');
    expect(headers(over)['content-type']).toBe('application/problem+json');
    const body = JSON.parse(new TextDecoder().decode(over.rawBody)) as Record<string, unknown>;
    expect(body).toMatchObject({ type: 'about:blank', title: 'Too Many Requests', status: 429 });
    expect(body.detail).toMatch(/2 per second/);
    expect(body.retry_after).toBeGreaterThanOrEqual(1);
  });
});
