/**
 * Where a Redis call's cost goes, at the store level (issue 30): Redis CPU and client CPU per
 * request of the Redis store against the reference's command pattern (a pipeline of INCRBY and
 * EXPIRE per descriptor, sent with ioredis), on a redis-server of its own, with no gRPC in the
 * way. Each case: sliding or fixed window; 1, 4 or 8 descriptors; the same keys every request
 * (`hot`, what h2load's one prepared frame sends) or new keys every request (`distinct`, e.g.
 * one client address per request); 1 request in flight (so every script call carries one
 * request) or 64 (so the requests of a turn share one). Redis CPU from `INFO cpu`
 * (`used_cpu_user + used_cpu_sys`, the server's own getrusage), client CPU from
 * `process.cpuUsage()`; each case runs at most {@link REQUESTS} requests and at most
 * {@link MAX_MS} ms.
 *
 * Run: `npm run --silent build && npx tsc -p tsconfig.bench.json && node
 * .cache/bench-build/bench/redis-script-cpu.js` (never part of `npm test`).
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type * as StoresModule from '../src/stores/index.js';
import type { CounterSpec, CounterStore } from '../src/stores/counter-store.js';
import { loadSluice, REPO_ROOT } from './dist.js';
import { grid } from './h2load.js';
import { freePort } from './servers.js';

/** Most requests per case. */
const REQUESTS = Number(process.env.SLUICE_BENCH_SCRIPT_REQUESTS ?? 20_000);
/** Most time per case, ms. */
const MAX_MS = 3_000;
const WINDOW_MS = 60_000;

/** Redis's own CPU time so far, µs. */
async function redisCpuUs(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string): number =>
    Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (field('used_cpu_user') + field('used_cpu_sys')) * 1e6;
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

interface Case {
  readonly algorithm: 'sliding_window' | 'fixed_window';
  readonly descriptors: number;
  readonly keys: 'hot' | 'distinct';
  readonly inFlight: number;
}

/** The specs of request `i` of `c`. */
function specsOf(c: Case, i: number): CounterSpec[] {
  const tag = c.algorithm === 'sliding_window' ? 'sw' : 'fw';
  const id = c.keys === 'hot' ? 0 : i;
  return Array.from({ length: c.descriptors }, (_, d) => ({
    key: `${tag}|${WINDOW_MS}|bench|d${d}=${id}`,
    algorithm: c.algorithm,
    limit: 4_000_000_000,
    windowMs: WINDOW_MS,
    burst: 4_000_000_000,
    hits: 1,
    mode: 'enforced' as const,
  }));
}

/** Run `one(i)` for up to REQUESTS requests, `inFlight` at a time; figures per request. */
async function drive(
  admin: Redis,
  inFlight: number,
  one: (i: number) => Promise<unknown>,
): Promise<{ redisUs: number; clientUs: number; perSec: number }> {
  const redisBefore = await redisCpuUs(admin);
  const cpuBefore = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < REQUESTS && performance.now() - t0 < MAX_MS) await one(next++);
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const redisUs = (await redisCpuUs(admin)) - redisBefore;
  return {
    redisUs: redisUs / next,
    clientUs: (cpu.user + cpu.system) / next,
    perSec: next / seconds,
  };
}

const sluice = await loadSluice();
const stores = (await import(
  pathToFileURL(path.join(REPO_ROOT, 'dist', 'stores', 'index.js')).href
)) as typeof StoresModule;
const port = await freePort();
const server = spawn(
  'redis-server',
  ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
  { stdio: 'ignore' },
);
const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
const reference = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
let store: CounterStore | undefined;
try {
  for (let attempt = 0; !(await listening(port)); attempt++) {
    if (attempt > 100) throw new Error(`redis-server did not listen on ${port}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await admin.connect();
  await reference.connect();
  const settings = sluice.settings.loadSettings({
    BACKEND_TYPE: 'redis',
    REDIS_URL: `127.0.0.1:${port}`,
    REDIS_TIMEOUT: '2s',
    REDIS_WAIT_AT_START: 'true',
  });
  store = await stores.createStore(settings, {
    clock: sluice.clock.systemClock,
    logger: sluice.logger.silentLogger(),
  });
  const rows: string[][] = [];
  for (const algorithm of ['sliding_window', 'fixed_window'] as const) {
    for (const descriptors of [1, 4, 8]) {
      for (const keys of ['hot', 'distinct'] as const) {
        for (const inFlight of [1, 64]) {
          const c: Case = { algorithm, descriptors, keys, inFlight };
          await admin.flushall();
          const mine = await drive(admin, inFlight, (i) => store!.apply(specsOf(c, i)));
          await admin.flushall();
          // The reference's pattern: INCRBY then EXPIRE per descriptor, one pipeline a request.
          const theirs = await drive(admin, inFlight, (i) => {
            const pipeline = reference.pipeline();
            for (const spec of specsOf(c, i)) {
              pipeline.incrby(spec.key, 1);
              pipeline.expire(spec.key, 60);
            }
            return pipeline.exec();
          });
          rows.push([
            `${algorithm}, ${descriptors} d, ${keys} keys, ${inFlight} in flight`,
            `${mine.redisUs.toFixed(1)} µs`,
            `${theirs.redisUs.toFixed(1)} µs`,
            (mine.redisUs / theirs.redisUs).toFixed(2),
            `${mine.clientUs.toFixed(1)} µs`,
            `${theirs.clientUs.toFixed(1)} µs`,
          ]);
          process.stderr.write(`bench: ${rows.at(-1)!.join(' | ')}\n`);
        }
      }
    }
  }
  process.stdout.write(
    grid(
      [
        'case',
        'Redis CPU/request: sluice',
        'reference pattern',
        'ratio',
        'client CPU/request: sluice',
        'reference pattern (ioredis)',
      ],
      rows,
    ) + '\n',
  );
} finally {
  await store?.close();
  admin.disconnect();
  reference.disconnect();
  server.kill('SIGKILL');
}
