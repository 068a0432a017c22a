/**
 * The debug console against a hostile neighbour (issue 31, item 8): DNS rebinding (a `Host` the
 * listener does not serve), resets from the network without a credential, and answers that grow
 * with what clients send (long descriptor values) or with a broken rule set's problems.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock, systemClock, type Clock } from '../../src/clock.js';
import { createConfigStatus } from '../../src/console/config-status.js';
import { createDebugConsole } from '../../src/console/console.js';
import { createDebugServer } from '../../src/transport/http/debug.js';
import { capturingLogger } from '../helpers/app.js';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';
import { waitFor } from '../helpers/processes.js';

/** One request with the given headers (Host included, which fetch does not let a caller set). */
function request(
  port: number,
  pathName: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: pathName,
        method: options.method ?? 'GET',
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
        );
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

const resetBody = JSON.stringify({ key: 'nothing' });

describe('the console and a hostile Host', () => {
  let sluice: ConsoleApp;
  beforeAll(async () => {
    sluice = await startConsoleApp({ DEBUG_CONSOLE_RESET_ENABLED: 'true' });
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it('refuses a name the listener does not serve (DNS rebinding), on reads and resets', async () => {
    const evil = { Host: `evil.example:${sluice.debugPort}` };
    const reset = await request(sluice.debugPort, '/api/reset', {
      method: 'POST',
      headers: {
        ...evil,
        Origin: `http://evil.example:${sluice.debugPort}`,
        'Content-Type': 'application/json',
      },
      body: resetBody,
    });
    expect(reset.status, reset.body).toBe(403);
    expect(reset.body).toContain('DEBUG_ALLOWED_HOSTS');
    for (const p of ['/api/hot', '/api/now', '/rlconfig', '/counters', '/']) {
      expect((await request(sluice.debugPort, p, { headers: evil })).status, p).toBe(403);
    }
  });

  it('serves loopback names and IP literals', async () => {
    for (const host of [
      `localhost:${sluice.debugPort}`,
      `127.0.0.1:${sluice.debugPort}`,
      '127.0.0.1',
      `[::1]:${sluice.debugPort}`,
      `10.1.2.3:${sluice.debugPort}`,
    ]) {
      const res = await request(sluice.debugPort, '/api/hot', { headers: { Host: host } });
      expect(res.status, host).toBe(200);
    }
    const reset = await request(sluice.debugPort, '/api/reset', {
      method: 'POST',
      headers: {
        Host: `localhost:${sluice.debugPort}`,
        Origin: `http://localhost:${sluice.debugPort}`,
        'Content-Type': 'application/json',
      },
      body: resetBody,
    });
    expect(reset.status, reset.body).toBe(200);
  });
});

describe('resets on a debug listener reachable from the network', () => {
  let sluice: ConsoleApp;
  beforeAll(async () => {
    sluice = await startConsoleApp();
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  /** A console as the app builds it for a non-loopback `DEBUG_HOST`, on a loopback port. */
  async function exposedConsole(resetToken: string | undefined, clock: Clock = systemClock) {
    const { logger, lines } = capturingLogger();
    const debugConsole = createDebugConsole({
      snapshot: () => sluice.app.snapshot(),
      service: sluice.app.service,
      store: sluice.app.store,
      metrics: sluice.app.metrics,
      health: sluice.app.health,
      configStatus: createConfigStatus(clock),
      clock,
      logger,
      storeInfo: { backend: 'memory', failureMode: 'error' },
      shadowMode: false,
      resetEnabled: true,
      listenHost: '0.0.0.0',
      resetToken,
    });
    const server = createDebugServer({
      snapshot: () => sluice.app.snapshot(),
      store: sluice.app.store,
      health: sluice.app.health,
      metrics: sluice.app.metrics,
      logger,
      console: debugConsole,
    });
    const port = await server.listen('127.0.0.1', 0);
    return {
      port,
      lines,
      reset: (headers: Record<string, string> = {}) =>
        request(port, '/api/reset', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', ...headers },
          body: resetBody,
        }),
      close: async () => {
        debugConsole.close();
        await server.close(0);
      },
    };
  }

  it('without DEBUG_CONSOLE_RESET_TOKEN: resets refused, and a warning at start', async () => {
    const c = await exposedConsole(undefined);
    try {
      const res = await c.reset();
      expect(res.status, res.body).toBe(403);
      expect(res.body).toContain('DEBUG_CONSOLE_RESET_TOKEN');
      expect(
        c.lines.some(
          (l) => l['level'] === 40 && /DEBUG_CONSOLE_RESET_TOKEN/.test(String(l['msg'])),
        ),
      ).toBe(true);
    } finally {
      await c.close();
    }
  });

  it('with DEBUG_CONSOLE_RESET_TOKEN: a reset needs the token as a bearer credential', async () => {
    const c = await exposedConsole('s3cret-token');
    try {
      expect((await c.reset()).status).toBe(401);
      expect((await c.reset({ Authorization: 'Bearer wrong' })).status).toBe(401);
      const ok = await c.reset({ Authorization: 'Bearer s3cret-token' });
      expect(ok.status, ok.body).toBe(200);
      expect(JSON.stringify(c.lines)).not.toContain('s3cret-token');
    } finally {
      await c.close();
    }
  });

  it('a loop of JSON requests gets 429 past 10 a second (burst 20), whoever sends it', async () => {
    const clock = createManualClock();
    const c = await exposedConsole(undefined, clock.now);
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) statuses.push((await request(c.port, '/api/hot?n=200')).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(20);
      expect(statuses.filter((s) => s === 429)).toHaveLength(10);
      // Half a second later, five more.
      clock.advance(500);
      const later: number[] = [];
      for (let i = 0; i < 6; i++) later.push((await request(c.port, '/api/now')).status);
      expect(later).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await c.close();
    }
  });
});

describe('console answers stay small', () => {
  let sluice: ConsoleApp;
  let dir: string;
  beforeAll(async () => {
    sluice = await startConsoleApp({ DEBUG_CONSOLE_RESET_ENABLED: 'true' });
    dir = sluice.app.snapshot().files[0] ? path.dirname(sluice.app.snapshot().files[0]!) : '';
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  it('/api/hot?n=200 with 4,000-character values', async () => {
    for (let i = 0; i < 250; i++) {
      const value = `${String(i).padStart(4, '0')}${'v'.repeat(3996)}`;
      await sluice.app.service.shouldRateLimit({
        domain: 'shop',
        descriptors: [
          { entries: [{ key: 'user', value }], limit: undefined, hitsAddend: undefined },
        ],
        hitsAddend: 1,
      });
    }
    const res = await request(sluice.debugPort, '/api/hot?n=200');
    expect(res.status).toBe(200);
    const hot = JSON.parse(res.body);
    expect(res.body.length, `${res.body.length} bytes`).toBeLessThanOrEqual(256 * 1024);
    expect(hot.busiest.length).toBeGreaterThan(0);
    const row = hot.busiest[0];
    // Values are cut for display, saying how long they were.
    expect(row.entries[0].value.length).toBeLessThan(300);
    expect(row.entries[0].value).toMatch(/4000 chars/);
  });

  it('/api/now with a refused rule set of many long problems', async () => {
    const broken = Array.from(
      { length: 500 },
      (_, i) =>
        `  - key: k${i}${'x'.repeat(1000)}\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n`,
    ).join('');
    await fs.writeFile(path.join(dir, 'broken.yaml'), `domain: broken\ndescriptors:\n${broken}`);
    await waitFor(
      'the refused reload',
      async () => {
        const res = await request(sluice.debugPort, '/api/now');
        return JSON.parse(res.body).config.lastLoad?.ok === false;
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    const res = await request(sluice.debugPort, '/api/now');
    expect(res.body.length, `${res.body.length} bytes`).toBeLessThanOrEqual(64 * 1024);
    const now = JSON.parse(res.body);
    expect(now.config.lastLoad.problems.length).toBeLessThanOrEqual(21);
    expect(now.config.lastLoad.problems.at(-1)).toMatch(/and \d+ more/);
  });
});
