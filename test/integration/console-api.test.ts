/**
 * The debug console's JSON endpoints (docs/operations-console.md) against a real app on free
 * loopback ports, driven by real gRPC calls: what each panel reads, "try it" charging nothing,
 * reset refused unless enabled, POST guards, and the console absent from the HTTP port.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';
import { waitFor } from '../helpers/processes.js';

async function getJson(url: string): Promise<any> {
  const res = await fetch(url);
  expect(res.status, url).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return res.json();
}

async function post(
  url: string,
  body: unknown,
  headers: Record<string, string> = { 'Content-Type': 'application/json' },
): Promise<{ status: number; data: any }> {
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: res.status, data: await res.json() };
}

const tryBody = (...descriptors: Record<string, string>[]): unknown => ({
  domain: 'shop',
  descriptors: descriptors.map((d) => ({
    entries: Object.entries(d).map(([key, value]) => ({ key, value })),
  })),
});

describe('debug console endpoints', () => {
  let sluice: ConsoleApp;

  beforeAll(async () => {
    sluice = await startConsoleApp({}, undefined, 50);
    // user=alice: 3 admitted, the 4th over limit.
    for (let i = 0; i < 3; i++) expect(await sluice.call('shop', { user: 'alice' })).toBe('OK');
    expect(await sluice.call('shop', { user: 'alice' })).toBe('OVER_LIMIT');
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it('serves the page to a browser at / and the endpoint list to curl', async () => {
    const page = await fetch(`${sluice.debugUrl}/`, { headers: { Accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
    expect(await page.text()).toContain('<title>sluice console</title>');
    const list = await (await fetch(`${sluice.debugUrl}/`)).text();
    expect(list).toContain('/rlconfig: ');
    expect(list).toContain('/api/now: ');
    for (const [asset, type] of [
      ['console.js', /^text\/javascript/],
      ['console.css', /^text\/css/],
    ] as const) {
      const res = await fetch(`${sluice.debugUrl}/console/${asset}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(type);
    }
  });

  it('now: calls, store, config status and sampled series', async () => {
    const now = await getJson(`${sluice.debugUrl}/api/now`);
    expect(now.calls).toEqual({ ok: 3, overLimit: 1, errors: 0 });
    expect(now.store).toMatchObject({ backend: 'memory', healthy: true, keys: 1, canReset: true });
    expect(now.config).toMatchObject({ version: 1, domains: 1, rules: 4 });
    expect(now.config.lastLoad).toMatchObject({ ok: true, problems: [] });
    expect(now.health).toEqual({ serving: true, reasons: [] });
    expect(now.resetEnabled).toBe(false);
    expect(now.uptimeMs).toBeGreaterThanOrEqual(0);
    expect(now.series.intervalMs).toBe(50);
    // The sampler may have taken points before beforeAll's calls; wait for one taken after them.
    const callsDone = Date.now();
    let point: any;
    await waitFor(
      'a sample of the series taken after the calls',
      async () => {
        point = (await getJson(`${sluice.debugUrl}/api/now`)).series.points.at(-1);
        return point !== undefined && point.t > callsDone;
      },
      { timeoutMs: 5000 },
    );
    expect(point).toMatchObject({ keys: 1, storeHealthy: true });
    expect(typeof point.okPerSecond).toBe('number');
  });

  it('rules: the domain as a tree with kinds and flags', async () => {
    const { version, domains } = await getJson(`${sluice.debugUrl}/api/rules`);
    expect(version).toBe(1);
    expect(domains).toHaveLength(1);
    const shop = domains[0];
    expect(shop.domain).toBe('shop');
    const byKey = new Map<string, any>(shop.descriptors.map((d: any) => [d.key, d]));
    expect(byKey.get('user')).toMatchObject({
      kind: 'default',
      value: '',
      rule: {
        fullKey: 'shop.user',
        shadowMode: false,
        limits: [{ requestsPerUnit: 3, unit: 'minute', algorithm: 'sliding_window' }],
      },
    });
    expect(byKey.get('api_key')).toMatchObject({
      kind: 'wildcard',
      value: 'partner-*',
      rule: { shadowMode: true },
    });
    expect(byKey.get('health').rule.unlimited).toBe(true);
    const login = byKey.get('path');
    expect(login).toMatchObject({ kind: 'exact', value: '/login' });
    expect(login.rule).toBeUndefined();
    expect(login.children[0]).toMatchObject({
      key: 'remote_address',
      rule: { fullKey: 'shop.path_/login.remote_address', limits: [{ name: 'login' }] },
    });
  });

  it('hot: the limited counter with its rule, remaining and reset; the most limited rule', async () => {
    const hot = await getJson(`${sluice.debugUrl}/api/hot`);
    expect(hot.listsCounters).toBe(true);
    expect(hot.limited).toHaveLength(1);
    expect(hot.limited[0]).toMatchObject({
      domain: 'shop',
      entries: [{ key: 'user', value: 'alice' }],
      rule: 'shop.user',
      count: 3,
      limit: 3,
      remaining: 0,
    });
    expect(hot.limited[0].resetMs).toBeGreaterThan(0);
    // The counter empties after the window plus at most one sliding-window sub-bucket.
    expect(hot.limited[0].resetMs).toBeLessThan(2 * 60_000);
    expect(hot.busiest[0].key).toBe(hot.limited[0].key);
    expect(hot.rules).toEqual([{ domain: 'shop', key1: 'user', key2: '', overLimit: 1 }]);
  });

  it('try: limited, unlimited, nested and unknown answers, charging nothing', async () => {
    const before = await getJson(`${sluice.debugUrl}/api/now`);
    const { status, data } = await post(
      `${sluice.debugUrl}/api/try`,
      tryBody(
        { user: 'alice' },
        { user: 'bob' },
        { health: 'x' },
        { path: '/login', remote_address: '10.0.0.1' },
        { nothing: 'here' },
      ),
    );
    expect(status).toBe(200);
    expect(data.overallCode).toBe('OVER_LIMIT');
    expect(data.charged).toBe(false);
    const [alice, bob, health, login, nothing] = data.descriptors;
    expect(alice).toMatchObject({ code: 'OVER_LIMIT', limitRemaining: 0, hits: 1 });
    expect(alice.rule.fullKey).toBe('shop.user');
    expect(alice.path).toEqual([
      {
        entry: { key: 'user', value: 'alice' },
        matched: 'default',
        node: { key: 'user', value: '' },
        hasRule: true,
        hasChildren: false,
      },
    ]);
    expect(alice.durationUntilResetMs).toBeGreaterThan(0);
    expect(bob).toMatchObject({ code: 'OK', limitRemaining: 3, remainingAfter: 2 });
    expect(health).toMatchObject({ code: 'OK', limitRemaining: 4294967295 });
    expect(health.rule.unlimited).toBe(true);
    expect(login.path.map((s: any) => s.matched)).toEqual(['exact', 'default']);
    expect(login).toMatchObject({ code: 'OK', limitRemaining: 20 });
    expect(nothing).toMatchObject({ code: 'OK', path: [{ matched: 'none' }] });
    expect(nothing.rule).toBeUndefined();

    // Only bob: OK overall; 4 hits would not fit in 3.
    const fits = await post(`${sluice.debugUrl}/api/try`, tryBody({ user: 'bob' }));
    expect(fits.data.overallCode).toBe('OK');
    const tooMany = await post(`${sluice.debugUrl}/api/try`, {
      ...(tryBody({ user: 'bob' }) as object),
      hits_addend: 4,
    });
    expect(tooMany.data.overallCode).toBe('OVER_LIMIT');

    // Nothing was charged or counted: bob still has 3, the calls did not move.
    const after = await getJson(`${sluice.debugUrl}/api/now`);
    expect(after.calls).toEqual(before.calls);
    expect(after.store.keys).toBe(before.store.keys);
    for (let i = 0; i < 3; i++) expect(await sluice.call('shop', { user: 'bob' })).toBe('OK');
    expect(await sluice.call('shop', { user: 'bob' })).toBe('OVER_LIMIT');
  });

  it('try: a bad body says what to fix', async () => {
    const bad = await post(`${sluice.debugUrl}/api/try`, { domain: 'shop', descriptors: 3 });
    expect(bad.status).toBe(400);
    expect(bad.data.error).toMatch(/descriptors/);
    const empty = await post(`${sluice.debugUrl}/api/try`, { domain: '', descriptors: [] });
    expect(empty.status).toBe(400);
    expect(empty.data.error).toMatch(/domain/);
  });

  it('POST endpoints refuse other methods, other content types and other origins', async () => {
    expect((await fetch(`${sluice.debugUrl}/api/try`)).status).toBe(405);
    const form = await post(`${sluice.debugUrl}/api/try`, tryBody({ user: 'x' }), {
      'Content-Type': 'application/x-www-form-urlencoded',
    });
    expect(form.status).toBe(415);
    const cross = await post(`${sluice.debugUrl}/api/try`, tryBody({ user: 'x' }), {
      'Content-Type': 'application/json',
      Origin: 'http://evil.example',
    });
    expect(cross.status).toBe(403);
    const same = await post(`${sluice.debugUrl}/api/try`, tryBody({ user: 'x' }), {
      'Content-Type': 'application/json',
      Origin: sluice.debugUrl,
    });
    expect(same.status).toBe(200);
  });

  it('reset: refused when not enabled, and logged with the remote address', async () => {
    const { status, data } = await post(`${sluice.debugUrl}/api/reset`, { key: 'anything' });
    expect(status).toBe(403);
    expect(data.error).toContain('DEBUG_CONSOLE_RESET_ENABLED=true');
    const line = sluice.logLines.find((l) => String(l['msg']).includes('reset refused'));
    expect(line?.['remote']).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(await sluice.call('shop', { user: 'alice' })).toBe('OVER_LIMIT');
  });

  it('is not served on the HTTP port', async () => {
    const base = `http://127.0.0.1:${sluice.httpPort}`;
    for (const p of ['/', '/api/now', '/api/rules', '/api/hot', '/console/console.js']) {
      const res = await fetch(`${base}${p}`, { headers: { Accept: 'text/html' } });
      expect(res.status, p).toBe(404);
    }
    const tried = await fetch(`${base}/api/try`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(tryBody({ user: 'x' })),
    });
    expect(tried.status).toBe(404);
  });
});

describe('debug console reset, enabled', () => {
  let sluice: ConsoleApp;
  beforeAll(async () => {
    sluice = await startConsoleApp({ DEBUG_CONSOLE_RESET_ENABLED: 'true' });
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it('resets a counter by key and by descriptor, and logs who asked', async () => {
    for (let i = 0; i < 3; i++) await sluice.call('shop', { user: 'carol' });
    expect(await sluice.call('shop', { user: 'carol' })).toBe('OVER_LIMIT');
    const hot = await getJson(`${sluice.debugUrl}/api/hot`);
    const key = hot.limited[0].key as string;
    const { status, data } = await post(`${sluice.debugUrl}/api/reset`, { key });
    expect(status).toBe(200);
    expect(data).toEqual({ keys: [key], reset: [key] });
    expect(await sluice.call('shop', { user: 'carol' })).toBe('OK');
    const line = sluice.logLines.find((l) => l['msg'] === 'console: counters reset');
    expect(line).toMatchObject({ keys: [key], reset: 1 });
    expect(line?.['remote']).toMatch(/^127\.0\.0\.1:\d+$/);

    for (let i = 0; i < 3; i++) await sluice.call('shop', { user: 'carol' });
    expect(await sluice.call('shop', { user: 'carol' })).toBe('OVER_LIMIT');
    const byDescriptor = await post(`${sluice.debugUrl}/api/reset`, tryBody({ user: 'carol' }));
    expect(byDescriptor.data.reset).toEqual([key]);
    expect(await sluice.call('shop', { user: 'carol' })).toBe('OK');

    const gone = await post(`${sluice.debugUrl}/api/reset`, { key: 'sw|1|none' });
    expect(gone.data).toEqual({ keys: ['sw|1|none'], reset: [] });
    const bad = await post(`${sluice.debugUrl}/api/reset`, { key: 7 });
    expect(bad.status).toBe(400);
  });
});

describe('debug console config status', () => {
  it('shows a refused reload with its problems while the previous rules keep serving', async () => {
    const sluice = await startConsoleApp();
    try {
      const files = (await getJson(`${sluice.debugUrl}/api/now`)).config.files as string[];
      const dir = path.dirname(files[0]!);
      await fs.writeFile(
        path.join(dir, 'broken.yaml'),
        'domain: broken\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
      );
      let now: any;
      await waitFor(
        'the refused reload in /api/now',
        async () => {
          now = await getJson(`${sluice.debugUrl}/api/now`);
          return now.config.lastLoad.ok === false;
        },
        { timeoutMs: 15_000 },
      );
      expect(now.config.version).toBe(1);
      expect(now.config.loads).toEqual({ ok: 1, failed: 1 });
      expect(now.config.lastLoad.problems.join('\n')).toMatch(/broken\.yaml.*fortnight/s);
      expect(now.config.domains).toBe(1);
    } finally {
      await sluice.stop();
    }
  });
});
