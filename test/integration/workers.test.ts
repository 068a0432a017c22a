/**
 * `WORKERS` (src/workers.ts) on a real `redis-server`: one `sluice serve` with two worker
 * processes on the same ports shares every limit exactly, says how many workers it runs in its
 * start-up line, answers `/metrics` (HTTP and debug ports) for the whole service whichever worker
 * takes the scrape, reloads its rules in every worker, and drains every worker on SIGTERM.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ruleDir } from '../helpers/app.js';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
import {
  ensureBuilt,
  freePort,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';

const requirement = requireRedis('workers');

/** One HTTP request on a fresh connection (so the workers take turns), body as text. */
function get(
  port: number,
  pathName: string,
  body?: string,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: pathName, method: body ? 'POST' : 'GET', agent: false },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The pids of the processes whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const rules = (limit: number): string =>
  `domain: w\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: ${limit}}\n`;

describe.skipIf(requirement.skip)('WORKERS=2 with the Redis store', () => {
  const group = useProcessGroup();

  it('two workers share the ports and the limits, /metrics sums both, reloads reach both, SIGTERM drains both', async () => {
    ensureBuilt();
    const redis = await startRedis(group);
    const dir = await ruleDir({ 'w.yaml': rules(30) });
    const httpPort = await freePort();
    const debugPort = await freePort();
    const sluice = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_URL: `127.0.0.1:${redis.port}`,
        CACHE_KEY_PREFIX: `w-${randomUUID()}:`,
        WORKERS: '2',
        PORT: String(httpPort),
        DEBUG_PORT: String(debugPort),
        LOG_LEVEL: 'info',
      },
    });
    const primary = sluice.proc.child.pid!;
    await waitFor('two workers', () => childrenOf(primary).length === 2, { timeoutMs: 15_000 });
    const workers = childrenOf(primary);

    // One start-up line, naming both workers.
    await waitFor('the start-up line', () => /sluice listening/.test(sluice.proc.output()), {
      timeoutMs: 15_000,
    });
    const lines = sluice.proc
      .output()
      .split('\n')
      .filter((line) => line.includes('sluice listening'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ workers: 2, store: 'redis' });

    // Exactly the limit, whichever worker answers (fresh connections alternate between them).
    const client = createEnvoyRlsClient(`127.0.0.1:${sluice.grpcPort}`);
    let statuses: number[];
    try {
      const over = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? client
                .shouldRateLimit(rlsRequest('w', [{ user: 'u' }]), 15_000)
                .then((r) => (r.overall_code === 'OK' ? 200 : 429))
            : get(
                httpPort,
                '/json',
                JSON.stringify({
                  domain: 'w',
                  descriptors: [{ entries: [{ key: 'user', value: 'u' }] }],
                }),
              ).then((r) => r.status),
        ),
      );
      statuses = over;
    } finally {
      client.close();
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(30);
    expect(statuses.filter((s) => s === 429)).toHaveLength(10);

    // /metrics sums both workers, on either port, whichever worker takes the scrape.
    for (const port of [httpPort, httpPort, httpPort, debugPort, debugPort]) {
      const metrics = await get(port, '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.text).toMatch(
        /ratelimit_service_rate_limit_total_hits\{domain="w",key1="user"\} 40\n/,
      );
    }

    // A reload reaches every worker: ten fresh connections in a row all see the new rules.
    writeFileSync(path.join(dir, 'w.yaml'), rules(1000));
    const body = JSON.stringify({
      domain: 'w',
      descriptors: [{ entries: [{ key: 'user', value: 'fresh' }] }],
    });
    await waitFor(
      'every worker serving the reloaded limit',
      async () => {
        for (let i = 0; i < 10; i++) {
          const r = await get(httpPort, '/json', body);
          if (!r.text.includes('"requestsPerUnit":1000')) return false;
        }
        return true;
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );

    // SIGTERM to the primary drains both workers; the primary exits 0 once they have.
    sluice.proc.child.kill('SIGTERM');
    expect(await sluice.proc.exited).toBe(0);
    for (const pid of workers) expect(alive(pid), `worker ${pid}`).toBe(false);
    expect(sluice.proc.output()).toMatch(/draining every worker/);
  });
});
