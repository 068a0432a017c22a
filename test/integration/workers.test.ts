/**
 * `WORKERS` (src/workers.ts) on a real `redis-server`: one `sluice serve` with two worker
 * processes on the same ports shares every limit exactly, says how many workers it runs in its
 * start-up line, answers `/metrics` (HTTP and debug ports) for the whole service whichever worker
 * takes the scrape, reloads its rules in every worker, and drains every worker on SIGTERM.
 */
import { readFileSync, readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
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

/**
 * Open a connection to `port`, send one `/healthcheck` request and settle with what became of it:
 * `answered` (bytes came back), `closed` (ended with nothing, or reset) or `open` (neither within
 * `holdMs` of {@link RawConnection.watch} being called).
 */
interface RawConnection {
  /** Bytes answered so far. */
  answered(): boolean;
  /** What became of the connection, waiting at most `holdMs` from now. */
  watch(holdMs: number): Promise<'answered' | 'closed' | 'open'>;
  /** Close it from this side. */
  destroy(): void;
}

function rawHealthcheck(port: number): RawConnection {
  const socket = net.connect({ host: '127.0.0.1', port });
  let bytes = 0;
  let ended = false;
  const waiters: (() => void)[] = [];
  const settle = (): void => {
    for (const w of waiters.splice(0)) w();
  };
  socket.on('connect', () =>
    socket.write('GET /healthcheck HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
  );
  socket.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    settle();
  });
  socket.on('close', () => {
    ended = true;
    settle();
  });
  socket.on('error', () => {});
  const state = (): 'answered' | 'closed' | 'open' =>
    bytes > 0 ? 'answered' : ended ? 'closed' : 'open';
  return {
    answered: () => bytes > 0,
    watch(holdMs) {
      if (state() !== 'open') return Promise.resolve(state());
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(state()), holdMs);
        waiters.push(() => {
          clearTimeout(timer);
          resolve(state());
        });
      });
    },
    destroy: () => socket.destroy(),
  };
}

/** The sockets a process holds open (from /proc). */
function socketCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).filter((fd) => {
    try {
      return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:');
    } catch {
      return false;
    }
  }).length;
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

  it('a worker killed while a connection is handed to it strands no connection (issue 31, item 6)', async () => {
    ensureBuilt();
    const redis = await startRedis(group);
    const dir = await ruleDir({ 'w.yaml': rules(30) });
    const httpPort = await freePort();
    const sluice = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_URL: `127.0.0.1:${redis.port}`,
        CACHE_KEY_PREFIX: `w-${randomUUID()}:`,
        WORKERS: '2',
        PORT: String(httpPort),
        DEBUG_PORT: String(await freePort()),
        LOG_LEVEL: 'info',
      },
    });
    const primary = sluice.proc.child.pid!;
    await waitFor('two workers', () => childrenOf(primary).length === 2, { timeoutMs: 15_000 });
    await waitFor('the start-up line', () => /sluice listening/.test(sluice.proc.output()), {
      timeoutMs: 15_000,
    });
    // Both workers answer (the primary hands fresh connections to each in turn).
    for (let i = 0; i < 4; i++) expect((await get(httpPort, '/healthcheck')).status).toBe(200);
    const socketsBefore = socketCount(primary);

    // A stopped worker takes the connection the primary hands it but never answers nor acks it;
    // killing it then is the moment of a crash between the hand-off and the accept.
    const [victim] = childrenOf(primary);
    process.kill(victim!, 'SIGSTOP');
    const connections = Array.from({ length: 4 }, () => rawHealthcheck(httpPort));
    try {
      await waitFor(
        'the other worker answering three',
        () => connections.filter((c) => c.answered()).length >= 3,
        { timeoutMs: 10_000 },
      );
      process.kill(victim!, 'SIGKILL');
      // Each connection is answered (the backlog goes to the living worker) or closed (the
      // dead worker's), never left open with no one to answer it.
      const outcomes = await Promise.all(connections.map((c) => c.watch(5_000)));
      expect(
        outcomes.filter((o) => o === 'open'),
        `outcomes ${outcomes.join(', ')}`,
      ).toEqual([]);
    } finally {
      for (const c of connections) c.destroy();
    }
    // Nor does the primary keep the stranded connection's descriptor.
    await waitFor(
      'the primary holding no more sockets than before',
      () => socketCount(primary) <= socketsBefore,
      {
        timeoutMs: 5_000,
        onTimeout: () => `primary sockets: ${socketsBefore} -> ${socketCount(primary)}`,
      },
    );
    // A replacement worker starts, and the service answers.
    await waitFor('a replacement worker', () => childrenOf(primary).length === 2, {
      timeoutMs: 15_000,
    });
    expect((await get(httpPort, '/healthcheck')).status).toBe(200);
    sluice.proc.child.kill('SIGTERM');
    expect(await sluice.proc.exited).toBe(0);
  }, 120_000);

  it('/metrics caps series for the whole service and never goes back when a worker dies (issue 31, item 7)', async () => {
    ensureBuilt();
    const redis = await startRedis(group);
    const dir = await ruleDir({
      'w.yaml':
        'domain: w\ndescriptors:\n  - key: user\n    detailed_metric: true\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n',
    });
    const httpPort = await freePort();
    const sluice = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      env: {
        BACKEND_TYPE: 'redis',
        REDIS_URL: `127.0.0.1:${redis.port}`,
        CACHE_KEY_PREFIX: `w-${randomUUID()}:`,
        WORKERS: '2',
        PORT: String(httpPort),
        DEBUG_PORT: String(await freePort()),
        METRICS_MAX_SERIES_PER_RULE: '4',
        LOG_LEVEL: 'info',
      },
    });
    const primary = sluice.proc.child.pid!;
    await waitFor('two workers', () => childrenOf(primary).length === 2, { timeoutMs: 15_000 });
    await waitFor('the start-up line', () => /sluice listening/.test(sluice.proc.output()), {
      timeoutMs: 15_000,
    });
    // Sixteen values on fresh connections: each worker sees about half of them and, alone, would
    // give four of its own a series.
    for (let i = 0; i < 16; i++) {
      const r = await get(
        httpPort,
        '/json',
        JSON.stringify({
          domain: 'w',
          descriptors: [{ entries: [{ key: 'user', value: `u${i}` }] }],
        }),
      );
      expect(r.status).toBe(200);
    }
    const scrape = async (): Promise<string> => {
      const r = await get(httpPort, '/metrics');
      expect(r.status).toBe(200);
      return r.text;
    };
    // Once every worker has reported (a worker that misses its first collection under load is
    // summed from the next one).
    let first = '';
    await waitFor(
      'a scrape with every worker counted',
      async () => {
        first = await scrape();
        return /ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} 16\n/.test(first);
      },
      { timeoutMs: 20_000, intervalMs: 200 },
    );
    const series = first
      .split('\n')
      .filter((line) =>
        line.startsWith('ratelimit_service_rate_limit_total_hits{domain="w",key1="user_'),
      );
    expect(series.length, series.join('\n')).toBeLessThanOrEqual(4);
    const hits = first
      .split('\n')
      .filter((line) => line.startsWith('ratelimit_service_rate_limit_total_hits{domain="w"'))
      .reduce((sum, line) => sum + Number(line.split(' ').at(-1)), 0);
    expect(hits).toBe(16);
    const total = (text: string): number =>
      Number(
        /ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} (\d+)/.exec(text)?.[1],
      );
    expect(total(first)).toBe(16);

    // A worker dies: the service's counters keep what it had counted.
    const [victim] = childrenOf(primary);
    process.kill(victim!, 'SIGKILL');
    await waitFor('the worker gone', () => !childrenOf(primary).includes(victim!), {
      timeoutMs: 10_000,
    });
    await waitFor('a replacement worker', () => childrenOf(primary).length === 2, {
      timeoutMs: 15_000,
    });
    for (let i = 0; i < 4; i++) expect(total(await scrape())).toBeGreaterThanOrEqual(16);
    sluice.proc.child.kill('SIGTERM');
    expect(await sluice.proc.exited).toBe(0);
  }, 120_000);
});
