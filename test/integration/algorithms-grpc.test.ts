/**
 * The algorithm extensions over gRPC, called with a client built from Envoy's own rls.proto
 * (docs/semantics.md §3 admission, §4 algorithms, §5 status fields): several limits on one rule
 * (`rate_limits`), `unit_multiplier` on the wire, and the reference's quota mode with its
 * `dynamic_metadata`. Every app runs on a manual clock: no sleeps.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { ALGORITHMS } from '../../src/algorithms/index.js';
import { durationMs, rlsRequest, type EnvoyResponse } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

/** A whole minute (and so a whole second), and a multiple of 300 s. */
const T0 = 1_700_000_100_000;

type Status = EnvoyResponse['statuses'][number];

/** The response with its `dynamic_metadata` (a google.protobuf.Struct as proto-loader decodes it). */
type ResponseWithMetadata = EnvoyResponse & { dynamic_metadata?: unknown };

/** A decoded google.protobuf.Value / Struct as plain JSON. */
function plain(value: unknown): unknown {
  if (value === null || value === undefined) return value;
  const v = value as Record<string, unknown>;
  if ('fields' in v && typeof v.fields === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, f] of Object.entries(v.fields as Record<string, unknown>)) out[k] = plain(f);
    return out;
  }
  switch (v.kind) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return v.numberValue;
    case 'stringValue':
      return v.stringValue;
    case 'boolValue':
      return v.boolValue;
    case 'structValue':
      return plain(v.structValue);
    case 'listValue':
      return ((v.listValue as { values?: unknown[] }).values ?? []).map(plain);
    default:
      throw new Error(`not a google.protobuf.Value: ${JSON.stringify(value)}`);
  }
}

describe('rate_limits: 2 per second AND 5 per minute on one rule', () => {
  const clock = createManualClock(T0);
  let running: RunningApp;

  beforeAll(async () => {
    const dir = await ruleDir({
      'multi.yaml': `
domain: multi
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: minute, requests_per_unit: 5}
`,
    });
    running = await startApp([dir], {}, { clock: clock.now });
  });
  afterAll(async () => {
    await running?.stop();
  });

  const hit = (user: string, hitsAddend = 0) =>
    running.client.shouldRateLimit(
      rlsRequest('multi', [{ user }], hitsAddend > 0 ? { hits_addend: hitsAddend } : {}),
    );

  /** Remaining room of both counters of `user`, read from the store (charges nothing). */
  function counts(user: string): { second: number; minute: number } {
    const rows = running.app.store.top!(1000).filter((row) => row.key.includes(user));
    const second = rows.find((row) => row.limit === 2);
    const minute = rows.find((row) => row.limit === 5);
    return { second: second?.count ?? 0, minute: minute?.count ?? 0 };
  }

  /** Refused one ms before `waitMs`, admitted at `waitMs` (the clock ends at the admission). */
  async function admittedAfterExactly(user: string, waitMs: number): Promise<Status> {
    const start = clock.now();
    clock.set(start + waitMs - 1);
    expect((await hit(user)).overall_code, `refused at wait - 1 = ${waitMs - 1} ms`).toBe(
      'OVER_LIMIT',
    );
    clock.set(start + waitMs);
    const ok = await hit(user);
    expect(ok.overall_code, `admitted at wait = ${waitMs} ms`).toBe('OK');
    return ok.statuses[0]!;
  }

  it('rejects the 3rd hit in a second and the 6th in a minute; rejected hits charge neither limit', async () => {
    clock.set(T0);
    const first = await hit('a');
    expect(first.overall_code).toBe('OK');
    // The status reports the limit with the least room left: the per-second one.
    expect(first.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 2, unit: 'SECOND' },
      limit_remaining: 1,
    });
    clock.set(T0 + 100);
    const second = await hit('a');
    expect(second.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 2, unit: 'SECOND' },
      limit_remaining: 0,
    });

    // 3rd hit in the second: refused by the per-second limit, three times over.
    clock.set(T0 + 200);
    let wait = 0;
    for (let i = 0; i < 3; i++) {
      const over = await hit('a');
      expect(over.overall_code).toBe('OVER_LIMIT');
      expect(over.statuses[0]).toMatchObject({
        code: 'OVER_LIMIT',
        current_limit: { requests_per_unit: 2, unit: 'SECOND' },
        limit_remaining: 0,
      });
      wait = durationMs(over.statuses[0]!.duration_until_reset);
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(1_000);
    }
    // Neither counter took the rejected hits: 2 of 2 and 2 of 5 counted.
    expect(counts('a')).toEqual({ second: 2, minute: 2 });

    // The announced wait is exact; then exactly the minute's remaining room (3) is admitted.
    let admitted = 1;
    const third = await admittedAfterExactly('a', wait);
    expect(third.current_limit).toMatchObject({ unit: 'SECOND' });
    expect(counts('a').minute).toBe(3);
    for (const at of [T0 + 2_000, T0 + 3_000]) {
      clock.set(at);
      const ok = await hit('a');
      expect(ok.overall_code).toBe('OK');
      admitted++;
    }
    expect(admitted).toBe(3);
    // The hit at +2 s still counts in the sliding second until its 50 ms sub-bucket leaves it.
    expect(counts('a')).toEqual({ second: 2, minute: 5 });

    // 6th hit in the minute: the per-second limit has room, the per-minute one does not.
    clock.set(T0 + 3_100);
    const sixth = await hit('a');
    expect(sixth.overall_code).toBe('OVER_LIMIT');
    expect(sixth.statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 5, unit: 'MINUTE' },
      limit_remaining: 0,
    });
    const minuteWait = durationMs(sixth.statuses[0]!.duration_until_reset);
    // The first hit (T0) leaves the minute window 60 s (+ at most one 3 s sub-bucket) later.
    expect(minuteWait).toBeGreaterThanOrEqual(60_000 - 3_100);
    expect(minuteWait).toBeLessThanOrEqual(63_000 - 3_100);
    expect(counts('a').minute).toBe(5);
    await admittedAfterExactly('a', minuteWait);
  });

  it('when both limits are over, reports the one that frees last and waits until every limit admits', async () => {
    clock.set(T0 + 120_000);
    const base = clock.now();
    expect((await hit('b', 2)).overall_code).toBe('OK'); // second 2/2, minute 2/5
    clock.set(base + 1_500);
    expect((await hit('b', 2)).overall_code).toBe('OK'); // second 2/2, minute 4/5
    clock.set(base + 3_000);
    expect((await hit('b', 1)).overall_code).toBe('OK'); // second 1/2, minute 5/5
    expect(counts('b')).toEqual({ second: 1, minute: 5 });

    // Two more hits: over the per-second limit (1 + 2 > 2) and the per-minute one (5 + 2 > 5).
    clock.set(base + 3_100);
    const over = await hit('b', 2);
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses[0]).toMatchObject({
      code: 'OVER_LIMIT',
      current_limit: { requests_per_unit: 5, unit: 'MINUTE' },
      limit_remaining: 0,
    });
    const wait = durationMs(over.statuses[0]!.duration_until_reset);
    // The minute frees 2 hits when the two of `base` leave it: about 60 s, far beyond the second.
    expect(wait).toBeGreaterThan(50_000);
    expect(counts('b')).toEqual({ second: 1, minute: 5 });

    // Once the per-second limit alone would admit, the request is still refused.
    clock.set(base + 3_100 + 2_000);
    const stillOver = await hit('b', 2);
    expect(stillOver.overall_code).toBe('OVER_LIMIT');
    expect(stillOver.statuses[0]!.current_limit).toMatchObject({ unit: 'MINUTE' });
    expect(durationMs(stillOver.statuses[0]!.duration_until_reset)).toBe(wait - 2_000);

    clock.set(base + 3_100 + wait - 1);
    expect((await hit('b', 2)).overall_code).toBe('OVER_LIMIT');
    clock.set(base + 3_100 + wait);
    expect((await hit('b', 2)).overall_code).toBe('OK');
  });
});

describe('unit_multiplier 5 x minute on the wire, for every algorithm', () => {
  const clock = createManualClock(T0);
  let running: RunningApp;

  beforeAll(async () => {
    const rules = ALGORITHMS.map(
      (algorithm) => `
  - key: ${algorithm}
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 1, algorithm: ${algorithm}}`,
    ).join('');
    running = await startApp(
      [await ruleDir({ 'five.yaml': `domain: five\ndescriptors:${rules}\n` })],
      {},
      { clock: clock.now },
    );
  });
  afterAll(async () => {
    await running?.stop();
  });

  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: current_limit.unit stays MINUTE and the wait is the 300 s window's`, async () => {
      clock.set(T0);
      const ask = () => running.client.shouldRateLimit(rlsRequest('five', [{ [algorithm]: 'x' }]));
      const ok = await ask();
      expect(ok.overall_code).toBe('OK');
      expect(ok.statuses[0]!.current_limit).toEqual({
        requests_per_unit: 1,
        unit: 'MINUTE',
        name: '',
      });
      clock.set(T0 + 61_000);
      const over = await ask();
      expect(over.overall_code).toBe('OVER_LIMIT');
      expect(over.statuses[0]!.current_limit!.unit).toBe('MINUTE');
      const wait = durationMs(over.statuses[0]!.duration_until_reset);
      // 300 s after T0 (sliding_window: up to one 15 s sub-bucket later), never one minute.
      expect(wait).toBeGreaterThanOrEqual(300_000 - 61_000);
      expect(wait).toBeLessThanOrEqual(315_000 - 61_000);
      clock.set(T0 + 61_000 + wait - 1);
      expect((await ask()).overall_code).toBe('OVER_LIMIT');
      clock.set(T0 + 61_000 + wait);
      expect((await ask()).overall_code).toBe('OK');
    });
  }
});

const QUOTA_RULES = `
domain: quota-domain
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {name: service_1, team: {id: 1}}
  - key: quota
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
    metadata: {name: service_2, team: {id: 2, on_call: b}}
  - key: quota1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: shadowquota
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: plain1
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {other: p1}
  - key: plain2
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
`;

/** Start an app on QUOTA_RULES with `env`, at T0 on a manual clock. */
async function quotaApp(env: Record<string, string>) {
  const clock = createManualClock(T0);
  const running = await startApp([await ruleDir({ 'quota.yaml': QUOTA_RULES })], env, {
    clock: clock.now,
  });
  const ask = (descriptors: Record<string, string>[], hitsAddend = 0) =>
    running.client.shouldRateLimit(
      rlsRequest('quota-domain', descriptors, hitsAddend > 0 ? { hits_addend: hitsAddend } : {}),
    ) as Promise<ResponseWithMetadata>;
  return { clock, running, ask };
}

/** Overall code, then each status's code and limit_remaining. */
function summary(r: EnvoyResponse): [string, ...[string, number][]] {
  return [r.overall_code, ...r.statuses.map((s): [string, number] => [s.code, s.limit_remaining])];
}

// The reference's master (f2fb157, `shouldRateLimitWorker`): a quota descriptor over its limit
// keeps OVER_LIMIT in its status; the request is OVER_LIMIT when a regular descriptor is over or
// when every quota descriptor is. sluice charges a rejected request nothing and an admitted one
// only on the quota counters with room (docs/semantics.md §3).
describe('quota_mode per descriptor (the reference: TestServicePerDescriptorQuotaMode, TestServiceQuotaModeOnly*, TestServiceMixedPerDescriptorModes)', () => {
  let app: Awaited<ReturnType<typeof quotaApp>>;
  beforeAll(async () => {
    app = await quotaApp({ RESPONSE_DYNAMIC_METADATA: 'true' });
  });
  afterAll(async () => {
    await app?.running.stop();
  });

  it('two quota descriptors (1 and 2 per minute) three times: OK, OK with one over, then OVER_LIMIT', async () => {
    const ask = () => app.ask([{ quota1: 'a' }, { quota2: 'a' }]);
    expect(summary(await ask())).toEqual(['OK', ['OK', 0], ['OK', 1]]);
    expect(summary(await ask())).toEqual(['OK', ['OVER_LIMIT', 0], ['OK', 0]]);
    const third = await ask();
    expect(summary(third)).toEqual(['OVER_LIMIT', ['OVER_LIMIT', 0], ['OVER_LIMIT', 0]]);
    // An over-limit quota status carries its reset like any other (the end of the window).
    expect(durationMs(third.statuses[0]!.duration_until_reset)).toBeGreaterThan(0);
  });

  it('mixed with a regular descriptor: the regular one over rejects; the only quota one over rejects too', async () => {
    for (let i = 0; i < 3; i++) await app.ask([{ quota: 'm' }]);
    // The regular descriptor has room, the only quota descriptor is over: rejected, nothing
    // charged (the regular one still has 5 left).
    expect(summary(await app.ask([{ regular: 'm' }, { quota: 'm' }]))).toEqual([
      'OVER_LIMIT',
      ['OK', 5],
      ['OVER_LIMIT', 0],
    ]);
    // With a second quota descriptor that has room: admitted, the regular one charged.
    expect(summary(await app.ask([{ regular: 'm' }, { quota: 'm' }, { quota2: 'm' }]))).toEqual([
      'OK',
      ['OK', 4],
      ['OVER_LIMIT', 0],
      ['OK', 1],
    ]);
    for (let i = 0; i < 4; i++) await app.ask([{ regular: 'n' }]);
    // The regular descriptor over rejects whatever the quota one says; the quota one keeps
    // the room it had, as nothing was charged.
    expect(summary(await app.ask([{ regular: 'n' }, { quota: 'n' }], 2))).toEqual([
      'OVER_LIMIT',
      ['OVER_LIMIT', 0],
      ['OK', 3],
    ]);
  });

  it('a quota descriptor over its limit in an admitted request is not charged', async () => {
    await app.ask([{ quota2: 'c' }]);
    // 2 hits do not fit in the 1 left; the unmatched descriptor is no quota descriptor, so the
    // only quota one decides: rejected.
    expect(summary(await app.ask([{ quota2: 'c' }, { none: 'x' }], 2))).toEqual([
      'OVER_LIMIT',
      ['OVER_LIMIT', 0],
      ['OK', 0],
    ]);
    // Next to a quota descriptor with room: admitted, and quota2 still has its 1 left.
    expect(summary(await app.ask([{ quota2: 'c' }, { quota: 'c' }], 2))).toEqual([
      'OK',
      ['OVER_LIMIT', 0],
      ['OK', 1],
    ]);
    expect(summary(await app.ask([{ quota2: 'c' }]))).toEqual(['OK', ['OK', 0]]);
  });

  it('a quota rule in shadow mode is never over, so it never lets quota reject', async () => {
    await app.ask([{ quota1: 's' }]);
    await app.ask([{ shadowquota: 's' }]);
    expect(summary(await app.ask([{ quota1: 's' }, { shadowquota: 's' }]))).toEqual([
      'OK',
      ['OVER_LIMIT', 0],
      ['OK', 0],
    ]);
  });

  it('dynamic_metadata: domain, entries, hitsAddend, and the metadata of the descriptors that passed', async () => {
    for (let i = 0; i < 3; i++) await app.ask([{ quota: 'd' }]);
    const r = await app.ask([{ regular: 'd' }, { quota: 'd' }, { quota2: 'd' }], 1);
    expect(r.overall_code).toBe('OK');
    // The quota descriptor is over: only the regular rule's metadata is returned.
    expect(plain(r.dynamic_metadata)).toEqual({
      domain: 'quota-domain',
      descriptors: [
        { entries: ['regular=d'] },
        { entries: ['quota=d'] },
        { entries: ['quota2=d'] },
      ],
      hitsAddend: 1,
      metadata: { name: 'service_1', team: { id: 1 } },
    });
    // Both passed: merged in request order, the first value of a name wins, mappings merge.
    const both = await app.ask([{ regular: 'e' }, { quota: 'e' }]);
    expect(plain(both.dynamic_metadata)).toEqual({
      domain: 'quota-domain',
      descriptors: [{ entries: ['regular=e'] }, { entries: ['quota=e'] }],
      metadata: { name: 'service_1', team: { id: 1, on_call: 'b' } },
    });
    // No rule with metadata passed: no `metadata` field.
    const none = await app.ask([{ plain2: 'f', x: 'y' }]);
    expect(plain(none.dynamic_metadata)).toEqual({
      domain: 'quota-domain',
      descriptors: [{ entries: ['plain2=f', 'x=y'] }],
    });
  });
});

describe('QUOTA_MODE=true (the reference: TestServiceGlobalQuotaMode, TestMetadataReturnedForPassedDescriptors)', () => {
  let app: Awaited<ReturnType<typeof quotaApp>>;
  beforeAll(async () => {
    app = await quotaApp({ QUOTA_MODE: 'true', RESPONSE_DYNAMIC_METADATA: 'true' });
  });
  afterAll(async () => {
    await app?.running.stop();
  });

  it('every descriptor is a quota descriptor: OVER_LIMIT only when all of them are over', async () => {
    const ask = () => app.ask([{ plain1: 'g' }, { plain2: 'g' }]);
    expect(summary(await ask())).toEqual(['OK', ['OK', 0], ['OK', 1]]);
    const some = await ask();
    expect(summary(some)).toEqual(['OK', ['OVER_LIMIT', 0], ['OK', 0]]);
    // plain1 is over: its metadata is not returned.
    expect(plain(some.dynamic_metadata)).toEqual({
      domain: 'quota-domain',
      descriptors: [{ entries: ['plain1=g'] }, { entries: ['plain2=g'] }],
    });
    expect(summary(await ask())).toEqual(['OVER_LIMIT', ['OVER_LIMIT', 0], ['OVER_LIMIT', 0]]);
  });

  it('an unmatched or unlimited descriptor: unmatched counts as a quota descriptor that passes', async () => {
    await app.ask([{ plain1: 'h' }]);
    expect(summary(await app.ask([{ plain1: 'h' }, { none: 'h' }]))).toEqual([
      'OK',
      ['OVER_LIMIT', 0],
      ['OK', 0],
    ]);
    // An unlimited descriptor is no quota descriptor: plain1 alone decides.
    expect(summary(await app.ask([{ plain1: 'h' }, { free: 'h' }]))).toEqual([
      'OVER_LIMIT',
      ['OVER_LIMIT', 0],
      ['OK', 4294967295],
    ]);
  });
});

describe('quota_mode with SHADOW_MODE=true (the reference: TestServiceQuotaModeWithShadowMode)', () => {
  let app: Awaited<ReturnType<typeof quotaApp>>;
  beforeAll(async () => {
    app = await quotaApp({ SHADOW_MODE: 'true' });
  });
  afterAll(async () => {
    await app?.running.stop();
  });

  it('every quota descriptor over: the statuses say OVER_LIMIT, overall OK', async () => {
    await app.ask([{ quota1: 's' }, { quota2: 's' }]);
    await app.ask([{ quota2: 's' }]);
    expect(summary(await app.ask([{ quota1: 's' }, { quota2: 's' }]))).toEqual([
      'OK',
      ['OVER_LIMIT', 0],
      ['OVER_LIMIT', 0],
    ]);
  });
});
