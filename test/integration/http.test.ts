/**
 * The HTTP side over real HTTP on 127.0.0.1: /healthcheck, /json (both protobuf JSON spellings,
 * the reference's status codes and body shapes), /metrics after a scripted sequence whose expected
 * values were observed from the pinned reference binary, and the debug server's /rlconfig before
 * and after a reload.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App, type AppAddresses } from '../../src/app.js';
import { createManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, ruleDir } from '../helpers/app.js';
import { waitFor } from '../helpers/processes.js';

/**
 * The rules used for the reference run (same file, same calls): see docs/operations-metrics.md
 * "How the expected values were obtained".
 */
const RULES = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /api.v1
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: user
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: a
    descriptors:
      - key: b
        descriptors:
          - key: c
            rate_limit: {unit: hour, requests_per_unit: 3}
  - key: unl
    rate_limit: {unlimited: true}
  - key: det
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 3}
`;

/** What the pinned reference's /rlconfig printed for RULES (its order is a map's; compared as sets). */
const REFERENCE_RLCONFIG = [
  'edge.remote_address: unit=MINUTE requests_per_unit=10, shadow_mode: false, quota_mode: false',
  'edge.path_/api.v1: unit=MINUTE requests_per_unit=5, shadow_mode: false, quota_mode: false',
  'edge.user: unit=MINUTE requests_per_unit=2, shadow_mode: true, quota_mode: false',
  'edge.a.b.c: unit=HOUR requests_per_unit=3, shadow_mode: false, quota_mode: false',
  'edge.unl: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false',
  'edge.det: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false',
];

interface Started {
  app: App;
  addresses: AppAddresses;
  dir: string;
  base: string;
  debug: string;
}

async function start(env: Record<string, string> = {}, clockMs = 1_700_000_000_000) {
  const dir = await ruleDir({ 'edge.yaml': RULES });
  const clock = createManualClock(clockMs);
  const settings = loadSettings(
    {
      ...LOOPBACK_LISTENERS,
      ...env,
    },
    { config: [dir] },
  );
  const app = await createApp({
    settings,
    logger: silentLogger(),
    clock: clock.now,
    watchPollIntervalMs: 200,
  });
  const addresses = await app.start();
  const started: Started = {
    app,
    addresses,
    dir,
    base: `http://127.0.0.1:${addresses.httpPort}`,
    debug: `http://127.0.0.1:${addresses.debugPort}`,
  };
  return started;
}

async function postJson(base: string, body: unknown): Promise<Response> {
  return fetch(`${base}/json`, {
    method: 'POST',
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** Parse the Prometheus text into `name{labels}` -> value, for series of names starting `prefix`. */
function series(text: string, prefix: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith(prefix)) continue;
    const at = line.lastIndexOf(' ');
    out[line.slice(0, at)] = Number(line.slice(at + 1));
  }
  return out;
}

describe('HTTP /healthcheck, /json, /metrics and the debug server', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start();
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('/healthcheck answers 200 OK while serving', async () => {
    const res = await fetch(`${s.base}/healthcheck`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe('OK');
  });

  it('/json answers 200 with the protobuf JSON response, for snake_case and lowerCamelCase', async () => {
    for (const [domainKey, hitsKey] of [
      ['domain', 'hits_addend'],
      ['domain', 'hitsAddend'],
    ] as const) {
      const res = await postJson(s.base, {
        [domainKey]: 'edge',
        descriptors: [{ entries: [{ key: 'det', value: `shape-${hitsKey}` }] }],
        [hitsKey]: 1,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toEqual({
        overallCode: 'OK',
        statuses: [
          {
            code: 'OK',
            currentLimit: { requestsPerUnit: 3, unit: 'MINUTE' },
            limitRemaining: 2,
            durationUntilReset: expect.stringMatching(/^\d+(\.\d{3})?s$/),
          },
        ],
      });
    }
    // Descriptor-level fields in both spellings too.
    for (const body of [
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det","value":"o1"}],"hits_addend":0,"limit":{"requests_per_unit":7,"unit":"SECOND"}}]}',
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det","value":"o2"}],"hitsAddend":"0","limit":{"requestsPerUnit":"7","unit":1}}]}',
    ]) {
      const res = await postJson(s.base, body);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        overallCode: 'OK',
        statuses: [
          {
            code: 'OK',
            currentLimit: { requestsPerUnit: 7, unit: 'SECOND' },
            limitRemaining: 7,
            durationUntilReset: expect.stringMatching(/s$/),
          },
        ],
      });
    }
  });

  it('/json answers an unknown domain 200 with a bare OK status, as the reference', async () => {
    const res = await postJson(s.base, {
      domain: 'nope',
      descriptors: [{ entries: [{ key: 'x', value: 'y' }] }],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ overallCode: 'OK', statuses: [{ code: 'OK' }] });
  });

  it("/json answers 429 with OVER_LIMIT, and 400 'Bad Request' for malformed or invalid requests", async () => {
    for (const hitsKey of ['hits_addend', 'hitsAddend']) {
      const over = {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'det', value: `over-${hitsKey}` }] }],
        [hitsKey]: 1,
      };
      for (let i = 0; i < 3; i++) expect((await postJson(s.base, over)).status).toBe(200);
      const res = await postJson(s.base, over);
      expect(res.status).toBe(429);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toEqual({
        overallCode: 'OVER_LIMIT',
        statuses: [
          {
            code: 'OVER_LIMIT',
            currentLimit: { requestsPerUnit: 3, unit: 'MINUTE' },
            durationUntilReset: expect.stringMatching(/^\d+(\.\d{3})?s$/),
          },
        ],
      });
    }

    const bad = [
      '{"domain":"edge" bad',
      '',
      '[]',
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det"}]}],"unknownField":1}',
      '{"domain":"edge","hits_addend":1,"hitsAddend":1,"descriptors":[{"entries":[{"key":"det"}]}]}',
      '{"domain":5,"descriptors":[]}',
      '{"domain":"edge","descriptors":[{"limit":{"unit":"FORTNIGHT"}}]}',
      // Valid JSON, invalid requests (the reference's service errors).
      '{"domain":"","descriptors":[{"entries":[{"key":"det"}]}]}',
      '{"domain":"edge","descriptors":[]}',
    ];
    for (const body of bad) {
      const r = await postJson(s.base, body);
      expect(r.status, body).toBe(400);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(await r.text()).toBe('Bad Request\n');
    }
    const get = await fetch(`${s.base}/json`);
    expect(get.status).toBe(400);
  });

  it('/json refuses strings that are not UTF-8 with 400, as the reference does, and counts nothing', async () => {
    const before = await (await fetch(`${s.base}/metrics`)).text();
    const prefix = Buffer.from(
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det","value":"',
    );
    const suffix = Buffer.from('"}]}]}');
    const invalidBytes = Buffer.concat([prefix, Buffer.from([0xff, 0xfe]), suffix]);
    for (const body of [
      invalidBytes,
      // A lone surrogate escape has no UTF-8 form.
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det","value":"\\ud800"}]}]}',
      '{"domain":"edge\\udc00","descriptors":[{"entries":[{"key":"det","value":"x"}]}]}',
    ]) {
      const r = await fetch(`${s.base}/json`, { method: 'POST', body });
      expect(r.status, String(body)).toBe(400);
      expect(await r.text()).toBe('Bad Request\n');
    }
    expect(
      series(
        await (await fetch(`${s.base}/metrics`)).text(),
        'ratelimit_service_rate_limit_total_hits',
      ),
    ).toEqual(series(before, 'ratelimit_service_rate_limit_total_hits'));
    // A surrogate pair is one valid character.
    const pair = await postJson(
      s.base,
      '{"domain":"edge","descriptors":[{"entries":[{"key":"det","value":"utf8-\\ud83d\\ude00"}]}]}',
    );
    expect(pair.status).toBe(200);
  });

  it('the debug server lists its endpoints and prints /rlconfig in the reference format', async () => {
    const index = await (await fetch(`${s.debug}/`)).text();
    for (const endpoint of ['/rlconfig', '/counters', '/health', '/metrics']) {
      expect(index).toMatch(new RegExp(`^${endpoint}: .+$`, 'm'));
    }
    const rlconfig = await (await fetch(`${s.debug}/rlconfig`)).text();
    expect(rlconfig.endsWith('\n')).toBe(true);
    expect(rlconfig.trimEnd().split('\n').sort()).toEqual([...REFERENCE_RLCONFIG].sort());
  });

  it('/counters shows the busiest live counters with count, limit, remaining and reset', async () => {
    const text = await (await fetch(`${s.debug}/counters?n=2`)).text();
    const rows = text.split('\n').filter((line) => line !== '' && !line.startsWith('#'));
    expect(rows).toHaveLength(2);
    // The busiest are the det=over-* counters: 3 hits of 3.
    const [count, limit, remaining, reset, ...key] = rows[0]!.split(' ');
    expect([count, limit, remaining]).toEqual(['3', '3', '0']);
    expect(Number(reset)).toBeGreaterThan(0);
    expect(key.join(' ')).toContain('over');
  });

  it('/rlconfig changes after a reload', async () => {
    // Each new file is written whole, then renamed in (as a ConfigMap update does): a plain
    // writeFile truncates first, and a watcher that fires in between reloads a half-written file.
    const replace = async (content: string): Promise<void> => {
      const tmp = path.join(s.dir, '.edge.yaml.tmp');
      await fs.writeFile(tmp, content);
      await fs.rename(tmp, path.join(s.dir, 'edge.yaml'));
    };
    await replace(
      'domain: edge\ndescriptors:\n  - key: only\n    rate_limit: {unit: second, requests_per_unit: 4}\n',
    );
    const expected =
      'edge.only: unit=SECOND requests_per_unit=4, shadow_mode: false, quota_mode: false\n';
    await waitFor(
      '/rlconfig shows the reloaded rules',
      async () => (await (await fetch(`${s.debug}/rlconfig`)).text()) === expected,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const metrics = await (await fetch(`${s.base}/metrics`)).text();
    expect(series(metrics, 'ratelimit_service_config_load_success')).toEqual({
      ratelimit_service_config_load_success: 2,
    });

    // A reload that fails validation is counted and keeps the rules serving.
    await replace(
      'domain: edge\ndescriptors:\n  - key: x\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
    );
    await waitFor(
      'config_load_error counted',
      async () =>
        series(
          await (await fetch(`${s.base}/metrics`)).text(),
          'ratelimit_service_config_load_error',
        )['ratelimit_service_config_load_error'] === 1,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    expect(await (await fetch(`${s.debug}/rlconfig`)).text()).toBe(expected);
  });
});

describe('/metrics after a scripted sequence', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start();
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('has the values the pinned reference reported for the same calls, under its names', async () => {
    const call = (body: unknown): Promise<Response> => postJson(s.base, body);
    const statuses: number[] = [];
    // 13 calls on a 10/minute rule: 10 within (the 9th and 10th near), 3 over.
    for (let i = 0; i < 13; i++) {
      const r = await call({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }],
      });
      statuses.push(r.status);
    }
    expect(statuses).toEqual([...Array<number>(10).fill(200), 429, 429, 429]);
    // hits_addend 2, in both spellings, on a 5/minute rule whose value has a dot.
    for (const body of [
      {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'path', value: '/api.v1' }] }],
        hitsAddend: 2,
      },
      {
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'path', value: '/api.v1' }] }],
        hits_addend: 2,
      },
    ]) {
      expect((await call(body)).status).toBe(200);
    }
    // One unknown domain: no per-rule series.
    expect(
      (await call({ domain: 'nope', descriptors: [{ entries: [{ key: 'x', value: 'y' }] }] }))
        .status,
    ).toBe(200);
    // One invalid request (service_error) and one malformed body (never reaches the service).
    expect(
      (await call({ domain: '', descriptors: [{ entries: [{ key: 'x', value: 'y' }] }] })).status,
    ).toBe(400);
    expect((await call('{"domain":"edge" bad')).status).toBe(400);
    // A shadow rule of 2/minute hit 4 times: all answered OK, 2 over.
    for (let i = 0; i < 4; i++) {
      const r = await call({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'user', value: 'u' }] }],
      });
      expect(r.status).toBe(200);
    }
    // Unlimited, detailed_metric and a three-level key in one request.
    expect(
      (
        await call({
          domain: 'edge',
          descriptors: [
            { entries: [{ key: 'unl' }] },
            { entries: [{ key: 'det', value: 'v1' }] },
            {
              entries: [
                { key: 'a', value: '1' },
                { key: 'b', value: '2' },
                { key: 'c', value: '3' },
              ],
            },
          ],
        })
      ).status,
    ).toBe(200);
    // A RateLimitOverride on the path rule counts under the request's key, as the reference does.
    expect(
      (
        await call({
          domain: 'edge',
          descriptors: [
            {
              entries: [{ key: 'path', value: '/api.v1' }],
              limit: { requests_per_unit: 7, unit: 'SECOND' },
            },
          ],
        })
      ).status,
    ).toBe(200);

    const res = await fetch(`${s.base}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    // Exactly these per-rule series, with the values the reference exported for this sequence.
    expect(series(text, 'ratelimit_service_rate_limit_')).toEqual({
      'ratelimit_service_rate_limit_near_limit{domain="edge",key1="remote_address"}': 2,
      'ratelimit_service_rate_limit_near_limit{domain="edge",key1="user"}': 1,
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="remote_address"}': 3,
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="user"}': 2,
      'ratelimit_service_rate_limit_shadow_mode{domain="edge",key1="user"}': 2,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="a",key2="b"}': 1,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="det_v1"}': 1,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="path_/api",key2="v1"}': 5,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="remote_address"}': 13,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="user"}': 4,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="a",key2="b"}': 1,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="det_v1"}': 1,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="path_/api",key2="v1"}': 5,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="remote_address"}': 10,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="user"}': 2,
    });
    expect(series(text, 'ratelimit_service_should_rate_limit_error')).toEqual({
      'ratelimit_service_should_rate_limit_error{err_type="service_error"}': 1,
    });
    expect(series(text, 'ratelimit_service_config_load_')).toEqual({
      ratelimit_service_config_load_success: 1,
      ratelimit_service_config_load_error: 0,
    });
    // sluice's own: calls by result (13 + 2 + 1 + 4 + 1 + 1 answered, 1 invalid).
    expect(series(text, 'sluice_should_rate_limit_calls_total')).toEqual({
      'sluice_should_rate_limit_calls_total{result="ok"}': 19,
      'sluice_should_rate_limit_calls_total{result="over_limit"}': 3,
      'sluice_should_rate_limit_calls_total{result="invalid"}': 1,
      'sluice_should_rate_limit_calls_total{result="store_error"}': 0,
      'sluice_should_rate_limit_calls_total{result="internal"}': 0,
    });
    expect(
      series(text, 'ratelimit_service_response_time_seconds_count')[
        'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}'
      ],
      // Every call is timed, the invalid one too (as total_requests counts it).
    ).toBe(23);
    // Node process metrics are there too.
    expect(text).toMatch(/^process_cpu_user_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d/m);
  });
});

describe('SHADOW_MODE counts global_shadow_mode', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start({ SHADOW_MODE: 'true' });
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('answers OK while over limit and counts each such request once', async () => {
    const body = {
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'det', value: 'g' }] }],
    };
    for (let i = 0; i < 5; i++) expect((await postJson(s.base, body)).status).toBe(200);
    const text = await (await fetch(`${s.base}/metrics`)).text();
    expect(series(text, 'ratelimit_service_global_shadow_mode')).toEqual({
      ratelimit_service_global_shadow_mode: 2,
    });
    expect(series(text, 'ratelimit_service_rate_limit_over_limit')).toEqual({
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="det_g"}': 2,
    });
  });
});

describe('QUOTA_MODE: an admitted request with a quota descriptor over its limit', () => {
  let s: Started;
  beforeAll(async () => {
    s = await start({ QUOTA_MODE: 'true' });
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('is no global_shadow_mode call and counts the over-limit hits once each', async () => {
    // det allows 3 per minute; the unmatched descriptor is a quota descriptor that passes.
    const body = {
      domain: 'edge',
      descriptors: [
        { entries: [{ key: 'det', value: 'q' }] },
        { entries: [{ key: 'no', value: 'x' }] },
      ],
    };
    for (let i = 0; i < 5; i++) expect((await postJson(s.base, body)).status).toBe(200);
    const text = await (await fetch(`${s.base}/metrics`)).text();
    expect(series(text, 'ratelimit_service_global_shadow_mode')).toEqual({
      ratelimit_service_global_shadow_mode: 0,
    });
    expect(series(text, 'ratelimit_service_rate_limit_over_limit')).toEqual({
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="det_q"}': 2,
    });
  });
});

describe('/metrics keys for value_to_metric, detailed_metric and multi-hit requests', () => {
  const rules = `
domain: edge
descriptors:
  - key: v2m
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: wild
    value: "pre*"
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: ip
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: n
    rate_limit: {unit: minute, requests_per_unit: 10}
`;
  let app: App;
  let base: string;
  beforeAll(async () => {
    const dir = await ruleDir({ 'edge.yaml': rules });
    const settings = loadSettings({ ...LOOPBACK_LISTENERS }, { config: [dir] });
    app = await createApp({ settings, logger: silentLogger(), clock: createManualClock().now });
    base = `http://127.0.0.1:${(await app.start()).httpPort}`;
  });
  afterAll(async () => {
    await app.close();
  });

  it('match what the pinned reference exported for the same calls', async () => {
    const call = (descriptors: unknown[]): Promise<Response> =>
      postJson(base, { domain: 'edge', descriptors });
    await call([
      { entries: [{ key: 'v2m', value: 'abc' }] },
      { entries: [{ key: 'wild', value: 'prefix1' }] },
      { entries: [{ key: 'ip', value: '10.1.2.3' }] },
      { entries: [{ key: 'n', value: 'a:b|c' }] },
    ]);
    await call([{ entries: [{ key: 'n', value: 'x' }], hitsAddend: 3 }]);
    for (let i = 0; i < 8; i++) await call([{ entries: [{ key: 'n', value: 'x' }] }]);
    expect((await call([{ entries: [{ key: 'v2m', value: 'abc' }], hitsAddend: 9 }])).status).toBe(
      200,
    );
    expect((await call([{ entries: [{ key: 'v2m', value: 'abc' }], hitsAddend: 3 }])).status).toBe(
      429,
    );
    const text = await (await fetch(`${base}/metrics`)).text();
    expect(series(text, 'ratelimit_service_rate_limit_')).toEqual({
      'ratelimit_service_rate_limit_near_limit{domain="edge",key1="n"}': 2,
      'ratelimit_service_rate_limit_near_limit{domain="edge",key1="v2m_abc"}': 2,
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="n"}': 1,
      'ratelimit_service_rate_limit_over_limit{domain="edge",key1="v2m_abc"}': 3,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="ip_10_1_2_3"}': 1,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="n"}': 12,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="v2m_abc"}': 13,
      'ratelimit_service_rate_limit_total_hits{domain="edge",key1="wild_prefix1"}': 1,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="ip_10_1_2_3"}': 1,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="n"}': 11,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="v2m_abc"}': 10,
      'ratelimit_service_rate_limit_within_limit{domain="edge",key1="wild_prefix1"}': 1,
    });
  });
});

describe('reference headers over /json with DEFAULT_ALGORITHM=fixed_window on a fixed clock', () => {
  let s: Started;
  beforeAll(async () => {
    // Unix time 2222 s, as in the reference's own header test.
    s = await start(
      { DEFAULT_ALGORITHM: 'fixed_window', LIMIT_RESPONSE_HEADERS_ENABLED: 'true' },
      2_222_000,
    );
  });
  afterAll(async () => {
    await s.app.close();
  });

  it('10 per MINUTE at 2222 s: RateLimit-Limit 10, -Remaining 9, -Reset 58', async () => {
    const res = await postJson(s.base, {
      domain: 'edge',
      descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.9' }] }],
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: { requestsPerUnit: 10, unit: 'MINUTE' },
          limitRemaining: 9,
          durationUntilReset: '58s',
        },
      ],
      responseHeadersToAdd: [
        { key: 'RateLimit-Limit', value: '10' },
        { key: 'RateLimit-Remaining', value: '9' },
        { key: 'RateLimit-Reset', value: '58' },
      ],
    });
  });
});
