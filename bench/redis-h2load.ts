/**
 * The Redis rows (issue 18): sluice on Redis against envoyproxy/ratelimit on Redis, each with a
 * redis-server of its own, driven by h2load with the same request bytes: 1 and 4 descriptors,
 * shapes 4x32 and 16x64, sluice's default algorithm (sliding_window) and fixed_window (the
 * reference counts fixed windows whatever the rule, so one reference serves both), and 8
 * descriptors (the four, plus four more keys). Per server and
 * case: calls/s at saturation and CPU per call split into the server's processes (all sluice
 * workers) and its Redis, from /proc. Then a Redis Cluster row: 3 masters on loopback, shared in
 * turn by sluice and the reference; the CPU per call of the busiest node next to each.
 *
 * Cached mode rows (issue 30, docs/cached-mode.md): three sluice processes (`WORKERS=1` each
 * unless `SLUICE_BENCH_WORKERS` says otherwise) in `REDIS_MODE=cached` on one redis-server, each
 * driven by an h2load of its own with a third of the shape's connections (rounded up) and the
 * same streams, all three at once; calls/s is the fleet's sum, process CPU the three processes'
 * sum, Redis CPU its redis-server's. The reference row beside it is the reference under the
 * shape's full load, alternated round by round. `SLUICE_BENCH_REDIS_ONLY_CACHED=1` runs only
 * these rows (to try them; the full run is `npm run bench`).
 *
 * `npm run bench:redis` runs only these rows; `npm run bench` runs them after the others.
 * `SLUICE_BENCH_REDIS_S` (seconds per window, default 4) and `SLUICE_BENCH_REDIS_ROUNDS`
 * (default 3) size the run; on a quiet machine the defaults take about 6 minutes.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Sluice } from './dist.js';
import { checkServer, grid, h2load, h2loadUnavailable, type Shape } from './h2load.js';
import { ratio, si } from './report.js';
import {
  cpuMs,
  referenceUnavailable,
  startRedisCluster,
  startRedisServer,
  startReference,
  startSluice,
  type BenchServer,
} from './servers.js';
import { eightRequest, fourRequest, ipRequest, toWire } from './workloads.js';

/** Bounds of the Redis rows. */
export interface RedisBounds {
  readonly shapes: readonly Shape[];
  readonly descriptors: readonly number[];
  readonly algorithms: readonly ('sliding_window' | 'fixed_window')[];
  readonly warmupS: number;
  readonly durationS: number;
  readonly rounds: number;
  /** sluice's `WORKERS` (undefined: its default, one per core; 1 per cached replica). */
  readonly workers: number | undefined;
  /** Descriptor counts of the cached mode rows (sliding_window; every shape). */
  readonly cachedDescriptors: readonly number[];
  /** Replicas of the cached mode rows. */
  readonly cachedReplicas: number;
  /** Run only the cached mode rows. */
  readonly onlyCached: boolean;
}

/** One server's figures in one case, pooled over the rounds. */
export interface RedisFigures {
  readonly callsPerSec: number;
  /** CPU per call of the server's own processes, µs. */
  readonly processUs: number;
  /** CPU per call of its Redis (the busiest node on a cluster), µs. */
  readonly redisUs: number;
  readonly failed: number;
}

/** One case: sluice and the reference side by side. */
export interface RedisCase {
  readonly label: string;
  /** `REDIS_MODE` of the sluice side. */
  readonly mode: 'exact' | 'cached';
  /** The load, the same for both modes (`sliding_window, 1 descriptor, 4x32`); the cluster: ''. */
  readonly load: string;
  readonly sluice: RedisFigures;
  readonly reference: RedisFigures | undefined;
}

export interface RedisResult {
  readonly cases: RedisCase[];
  readonly referenceSkipped: string | undefined;
  readonly bounds: RedisBounds;
  readonly workers: string;
}

export const REDIS_BOUNDS: RedisBounds = {
  shapes: [
    { connections: 4, streams: 32 },
    { connections: 16, streams: 64 },
  ],
  descriptors: [1, 4, 8],
  algorithms: ['sliding_window', 'fixed_window'],
  warmupS: 2,
  durationS: Number(process.env.SLUICE_BENCH_REDIS_S ?? 4),
  rounds: Number(process.env.SLUICE_BENCH_REDIS_ROUNDS ?? 3),
  workers: process.env.SLUICE_BENCH_WORKERS ? Number(process.env.SLUICE_BENCH_WORKERS) : undefined,
  cachedDescriptors: [1, 4],
  cachedReplicas: 3,
  onlyCached: process.env.SLUICE_BENCH_REDIS_ONLY_CACHED === '1',
};

/** A server under test with the pids of its Redis (every node, for a cluster). */
interface Measured {
  readonly server: BenchServer;
  readonly redisPids: readonly number[];
}

async function frameFor(sluice: Sluice, dir: string, descriptors: number): Promise<string> {
  const method = sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage()).ShouldRateLimit!;
  const request =
    descriptors === 1 ? ipRequest(0) : descriptors === 4 ? fourRequest(0) : eightRequest(0);
  const message = method.requestSerialize(toWire(request));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  const file = path.join(dir, `request-${descriptors}.bin`);
  await fs.writeFile(file, frame);
  return file;
}

/** Alternating saturation windows of every server at one shape; figures per server. */
async function saturate(
  servers: readonly Measured[],
  frameFile: string,
  shape: Shape,
  bounds: RedisBounds,
): Promise<RedisFigures[]> {
  const pooled = servers.map(() => ({ done: 0, ok: 0, s: 0, proc: 0, redis: 0 }));
  for (let round = 0; round < bounds.rounds; round++) {
    for (let k = 0; k < servers.length; k++) {
      const { server, redisPids } = servers[k]!;
      const own = server.processPids ?? server.pids;
      const procBefore = cpuMs(own);
      const nodesBefore = redisPids.map((pid) => cpuMs([pid]));
      const run = await h2load(server, frameFile, shape, bounds.durationS);
      const p = pooled[k]!;
      p.done += run.done;
      p.ok += run.succeeded;
      p.s += run.seconds;
      p.proc += cpuMs(own) - procBefore;
      // The busiest node: all of a single Redis.
      p.redis += Math.max(...redisPids.map((pid, i) => cpuMs([pid]) - nodesBefore[i]!));
    }
  }
  return pooled.map((p) => ({
    callsPerSec: p.done / p.s,
    processUs: (p.proc * 1000) / p.done,
    redisUs: (p.redis * 1000) / p.done,
    failed: p.done - p.ok,
  }));
}

/** `sliding_window, 4 descriptors, 4x32`: a load, the same words in both modes' rows. */
function loadLabel(algorithm: string, descriptors: number, shape: Shape): string {
  return `${algorithm}, ${descriptors} descriptor${descriptors === 1 ? '' : 's'}, ${shape.connections}x${shape.streams}`;
}

function workersText(bounds: RedisBounds): string {
  return bounds.workers === undefined ? 'default (one per core)' : String(bounds.workers);
}

/**
 * Alternating saturation windows of a cached-mode fleet (every replica driven at once, each by
 * its own h2load with a share of the connections) and of the reference (the whole shape).
 */
async function saturateFleet(
  fleet: readonly BenchServer[],
  redisPid: number,
  reference: Measured | undefined,
  frameFile: string,
  shape: Shape,
  bounds: RedisBounds,
): Promise<[RedisFigures, RedisFigures | undefined]> {
  const share: Shape = {
    connections: Math.max(1, Math.ceil(shape.connections / fleet.length)),
    streams: shape.streams,
  };
  const own = fleet.flatMap((server) => server.processPids ?? server.pids);
  const p = { done: 0, ok: 0, s: 0, proc: 0, redis: 0 };
  // The reference's windows, one per round, alternating with the fleet's.
  const refRounds: RedisFigures[] = [];
  for (let round = 0; round < bounds.rounds; round++) {
    const procBefore = cpuMs(own);
    const redisBefore = cpuMs([redisPid]);
    const runs = await Promise.all(
      fleet.map((server) => h2load(server, frameFile, share, bounds.durationS)),
    );
    p.proc += cpuMs(own) - procBefore;
    p.redis += cpuMs([redisPid]) - redisBefore;
    for (const run of runs) {
      p.done += run.done;
      p.ok += run.succeeded;
    }
    // The windows ran side by side: the fleet's time is the longest of them.
    p.s += Math.max(...runs.map((run) => run.seconds));
    if (reference !== undefined) {
      refRounds.push((await saturate([reference], frameFile, shape, { ...bounds, rounds: 1 }))[0]!);
    }
  }
  const mine: RedisFigures = {
    callsPerSec: p.done / p.s,
    processUs: (p.proc * 1000) / p.done,
    redisUs: (p.redis * 1000) / p.done,
    failed: p.done - p.ok,
  };
  if (refRounds.length === 0) return [mine, undefined];
  // Windows of equal length: the mean of each figure.
  const mean = (pick: (f: RedisFigures) => number): number =>
    refRounds.reduce((sum, f) => sum + pick(f), 0) / refRounds.length;
  return [
    mine,
    {
      callsPerSec: mean((f) => f.callsPerSec),
      processUs: mean((f) => f.processUs),
      redisUs: mean((f) => f.redisUs),
      failed: refRounds.reduce((sum, f) => sum + f.failed, 0),
    },
  ];
}

/**
 * The cached mode rows: {@link RedisBounds.cachedReplicas} sluice processes in
 * `REDIS_MODE=cached` on one redis-server, sliding_window, at each shape and
 * {@link RedisBounds.cachedDescriptors} count, next to the reference.
 */
async function cachedRows(
  sluice: Sluice,
  rulesDir: string,
  frames: ReadonlyMap<number, string>,
  reference: Measured | undefined,
  bounds: RedisBounds,
  progress: (message: string) => void,
): Promise<RedisCase[]> {
  const cases: RedisCase[] = [];
  const replicas = bounds.cachedReplicas;
  progress(`redis rows: ${replicas} sluice replicas in cached mode on one Redis`);
  const redis = await startRedisServer();
  const fleet: BenchServer[] = [];
  try {
    for (let i = 0; i < replicas; i++) {
      fleet.push(
        await startSluice('lean', rulesDir, {
          name: `sluice redis cached ${i + 1}`,
          env: {
            BACKEND_TYPE: 'redis',
            REDIS_URL: `127.0.0.1:${redis.port}`,
            REDIS_MODE: 'cached',
            DEFAULT_ALGORITHM: 'sliding_window',
            WORKERS: String(bounds.workers ?? 1),
          },
        }),
      );
    }
    for (const d of bounds.cachedDescriptors) {
      const file = frames.get(d);
      if (file === undefined) continue;
      const frame = await fs.readFile(file);
      for (const server of fleet) {
        await checkServer(server, frame, sluice, d);
        await h2load(server, file, bounds.shapes[0]!, bounds.warmupS);
      }
      for (const shape of bounds.shapes) {
        const load = loadLabel('sliding_window', d, shape);
        const label = `cached x${replicas}, ${load}`;
        progress(`redis rows: ${label}`);
        const [mine, ref] = await saturateFleet(fleet, redis.pid, reference, file, shape, bounds);
        cases.push({ label, mode: 'cached', load, sluice: mine, reference: ref });
      }
    }
  } finally {
    for (const server of fleet) await server.stop();
    await redis.stop();
  }
  return cases;
}

/** Run the Redis rows. */
export async function benchRedisH2load(
  sluice: Sluice,
  rulesDir: string,
  bounds: RedisBounds,
  progress: (message: string) => void,
): Promise<RedisResult | string> {
  const h2Skipped = h2loadUnavailable();
  if (h2Skipped !== undefined) return h2Skipped;
  const referenceSkipped = referenceUnavailable();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-redis-'));
  const stops: (() => Promise<void>)[] = [];
  const cases: RedisCase[] = [];
  const workerEnv: Record<string, string> =
    bounds.workers === undefined ? {} : { WORKERS: String(bounds.workers) };
  try {
    const frames = new Map<number, string>();
    for (const d of bounds.descriptors) frames.set(d, await frameFor(sluice, dir, d));

    let reference: Measured | undefined;
    if (referenceSkipped === undefined) {
      const server = await startReference();
      stops.push(() => server.stop());
      reference = { server, redisPids: server.pids.filter((p) => p !== server.processPids![0]) };
    }
    for (const algorithm of bounds.onlyCached ? [] : bounds.algorithms) {
      progress(`redis rows: sluice on Redis, ${algorithm}`);
      const redis = await startRedisServer();
      const server = await startSluice('lean', rulesDir, {
        name: `sluice redis ${algorithm}`,
        env: {
          BACKEND_TYPE: 'redis',
          REDIS_URL: `127.0.0.1:${redis.port}`,
          DEFAULT_ALGORITHM: algorithm,
          ...workerEnv,
        },
        redisPids: [redis.pid],
      });
      const measured: Measured = { server, redisPids: [redis.pid] };
      const servers = reference === undefined ? [measured] : [measured, reference];
      try {
        for (const d of bounds.descriptors) {
          const frame = await fs.readFile(frames.get(d)!);
          for (const m of servers) {
            await checkServer(m.server, frame, sluice, d);
            await h2load(m.server, frames.get(d)!, bounds.shapes[0]!, bounds.warmupS);
          }
          for (const shape of bounds.shapes) {
            const label = loadLabel(algorithm, d, shape);
            progress(`redis rows: ${label}`);
            const [mine, ref] = await saturate(servers, frames.get(d)!, shape, bounds);
            cases.push({ label, mode: 'exact', load: label, sluice: mine!, reference: ref });
          }
        }
      } finally {
        await server.stop();
        await redis.stop();
      }
    }
    cases.push(...(await cachedRows(sluice, rulesDir, frames, reference, bounds, progress)));
    for (const stop of stops.splice(0)) await stop();
    if (bounds.onlyCached) {
      return { cases, referenceSkipped, bounds, workers: workersText(bounds) };
    }

    // The cluster row: one cluster, each server on it in turn (1 descriptor, sliding window
    // for sluice; the reference's fixed window), at the first shape.
    progress('redis rows: Redis Cluster, 3 masters');
    const cluster = await startRedisCluster();
    stops.push(() => cluster.stop());
    const onCluster: Measured[] = [
      {
        server: await startSluice('lean', rulesDir, {
          name: 'sluice redis cluster',
          env: {
            BACKEND_TYPE: 'redis',
            REDIS_TYPE: 'cluster',
            REDIS_URL: cluster.url,
            ...workerEnv,
          },
          redisPids: cluster.pids,
        }),
        redisPids: cluster.pids,
      },
    ];
    stops.unshift(() => onCluster[0]!.server.stop());
    if (referenceSkipped === undefined) {
      const server = await startReference(cluster, 'reference cluster');
      stops.unshift(() => server.stop());
      onCluster.push({ server, redisPids: cluster.pids });
    }
    const frame = await fs.readFile(frames.get(1)!);
    for (const m of onCluster) {
      await checkServer(m.server, frame, sluice, 1);
      await h2load(m.server, frames.get(1)!, bounds.shapes[0]!, bounds.warmupS);
    }
    const shape = bounds.shapes[0]!;
    const [mine, ref] = await saturate(onCluster, frames.get(1)!, shape, bounds);
    cases.push({
      label: `cluster (3 masters, busiest node), sliding_window, 1 descriptor, ${shape.connections}x${shape.streams}`,
      mode: 'exact',
      load: '',
      sluice: mine!,
      reference: ref,
    });
    return { cases, referenceSkipped, bounds, workers: workersText(bounds) };
  } finally {
    for (const stop of stops) await stop().catch(() => undefined);
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Redis CPU per call, µs: cached mode's fraction of a µs keeps its digits. */
function redisText(us: number): string {
  return us < 1 ? us.toFixed(3) : us.toFixed(1);
}

/** The Redis table: per case, both servers, and the ratios the targets judge. */
export function formatRedis(result: RedisResult | string): string {
  if (typeof result === 'string') return `Redis rows: ${result}`;
  const f = (x: RedisFigures | undefined): string =>
    x === undefined
      ? 'n/a'
      : `${si(x.callsPerSec)}/s, ${x.processUs.toFixed(1)} + ${redisText(x.redisUs)} µs` +
        (x.failed > 0 ? ` (${x.failed} failed)` : '');
  const rows = result.cases.map((c) => {
    const s = c.sluice;
    const r = c.reference;
    return [
      c.label,
      f(s),
      f(r),
      r ? ratio(s.callsPerSec, r.callsPerSec) : 'n/a',
      r ? ratio(s.redisUs, r.redisUs) : 'n/a',
      r ? ratio(s.processUs + s.redisUs, r.processUs + r.redisUs) : 'n/a',
    ];
  });
  // What one Redis core serves for the whole fleet: one second of Redis CPU over its CPU per
  // call (a fleet of any size hits this ceiling first when Redis is the shared part). One row
  // per load, exact and cached mode side by side.
  const serves = (x: RedisFigures | undefined): number | undefined =>
    x === undefined ? undefined : 1e6 / x.redisUs;
  const rate = (x: number | undefined): string => (x === undefined ? 'n/a' : `${si(x)}/s`);
  const versus = (x: number | undefined, y: number | undefined): string =>
    x === undefined || y === undefined ? 'n/a' : ratio(x, y);
  const loads: string[] = [];
  for (const c of result.cases) {
    const load = c.load === '' ? c.label : c.load;
    if (!loads.includes(load)) loads.push(load);
  }
  const capacity = loads.map((load) => {
    const of = (mode: RedisCase['mode']): RedisCase | undefined =>
      result.cases.find((c) => c.mode === mode && (c.load === '' ? c.label : c.load) === load);
    const exact = of('exact');
    const cached = of('cached');
    const exactServes = serves(exact?.sluice);
    const cachedServes = serves(cached?.sluice);
    const theirs = serves(exact?.reference ?? cached?.reference);
    return [
      load,
      rate(exactServes),
      rate(cachedServes),
      rate(theirs),
      versus(exactServes, theirs),
      versus(cachedServes, theirs),
    ];
  });
  return [
    grid(
      [
        'on Redis (calls/s, CPU µs/call: process + Redis)',
        `sluice (WORKERS ${result.workers}; cached rows ${result.bounds.workers ?? 1} per replica)`,
        'reference',
        'calls/s ratio (target >= 1.5)',
        'Redis CPU ratio (<= 1.0)',
        'total CPU ratio (<= 0.7)',
      ],
      rows,
    ),
    '',
    grid(
      [
        'capacity: calls/s one Redis core serves the fleet (1 s / Redis CPU per call)',
        'sluice (exact)',
        `sluice (cached, ${result.bounds.cachedReplicas} replicas)`,
        'reference',
        'exact/reference',
        'cached/reference',
      ],
      capacity,
    ),
    ...judgeRedis(result.cases.filter((c) => c.mode === 'exact')),
    ...judgeCached(result.cases.filter((c) => c.mode === 'cached')),
    ...(result.referenceSkipped === undefined ? [] : [`reference: ${result.referenceSkipped}`]),
  ].join('\n');
}

/**
 * Issue 30's exact-mode targets, judged on the rows that have the reference beside them: Redis
 * CPU per call <= 1.0 x and total CPU per call <= 0.7 x on every row, calls/s >= 1.5 x on the
 * rows of 1 and 4 descriptors. Each line names the worst row.
 */
function judgeRedis(cases: readonly RedisCase[]): string[] {
  const paired = cases.filter((c) => c.reference !== undefined);
  if (paired.length === 0) return [];
  const judge = (
    what: string,
    rows: readonly RedisCase[],
    value: (s: RedisFigures, r: RedisFigures) => number,
    ok: (x: number) => boolean,
    worstOf: (a: number, b: number) => boolean,
  ): string => {
    let worst: RedisCase | undefined;
    let worstValue = NaN;
    for (const c of rows) {
      const x = value(c.sluice, c.reference!);
      if (worst === undefined || worstOf(x, worstValue)) {
        worst = c;
        worstValue = x;
      }
    }
    if (worst === undefined) return `  [n/a] ${what}`;
    const met = rows.every((c) => ok(value(c.sluice, c.reference!)));
    return `  [${met ? 'met' : 'missed'}] ${what}: worst ${worstValue.toFixed(2)} x (${worst.label})`;
  };
  const fewDescriptors = paired.filter((c) => /\b[14] descriptors?,/.test(c.label));
  return [
    '',
    'targets (issue 30, exact mode):',
    judge(
      'Redis CPU per call <= 1.0 x the reference, every row',
      paired,
      (s, r) => s.redisUs / r.redisUs,
      (x) => x <= 1.0,
      (a, b) => a > b,
    ),
    judge(
      'calls/s >= 1.5 x the reference, 1 and 4 descriptors',
      fewDescriptors,
      (s, r) => s.callsPerSec / r.callsPerSec,
      (x) => x >= 1.5,
      (a, b) => a < b,
    ),
    judge(
      'total CPU per call (process + Redis) <= 0.7 x the reference, every row',
      paired,
      (s, r) => (s.processUs + s.redisUs) / (r.processUs + r.redisUs),
      (x) => x <= 0.7,
      (a, b) => a > b,
    ),
  ];
}

/**
 * Issue 30's cached-mode targets, on the cached rows of 1 and 4 descriptors that have the
 * reference beside them: Redis CPU per call <= 0.1 x the reference's, calls/s >= 2.0 x.
 */
function judgeCached(cases: readonly RedisCase[]): string[] {
  const rows = cases.filter(
    (c) => c.reference !== undefined && /\b[14] descriptors?,/.test(c.label),
  );
  if (rows.length === 0) return [];
  const line = (
    what: string,
    value: (s: RedisFigures, r: RedisFigures) => number,
    ok: (x: number) => boolean,
    worse: (a: number, b: number) => boolean,
  ): string => {
    let worst = rows[0]!;
    for (const c of rows) {
      if (worse(value(c.sluice, c.reference!), value(worst.sluice, worst.reference!))) worst = c;
    }
    const x = value(worst.sluice, worst.reference!);
    const met = rows.every((c) => ok(value(c.sluice, c.reference!)));
    return `  [${met ? 'met' : 'missed'}] ${what}: worst ${x.toFixed(3)} x (${worst.label})`;
  };
  return [
    '',
    'targets (issue 30, cached mode, fleet against the reference):',
    line(
      'Redis CPU per call <= 0.1 x the reference, 1 and 4 descriptors',
      (s, r) => s.redisUs / r.redisUs,
      (x) => x <= 0.1,
      (a, b) => a > b,
    ),
    line(
      'calls/s >= 2.0 x the reference, 1 and 4 descriptors',
      (s, r) => s.callsPerSec / r.callsPerSec,
      (x) => x >= 2.0,
      (a, b) => a < b,
    ),
  ];
}
