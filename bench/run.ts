/**
 * `npm run bench`: builds sluice, then prints one table comparing sluice with baselines measured
 * in the same run on the same machine (the ratios are the figures to compare across machines).
 * Progress goes to stderr; the machine, the table and notes go to stdout. Every loop is bounded
 * by a count and a time; the whole run takes about twelve minutes (about six of them the Redis
 * rows, bench/redis-h2load.ts).
 *
 * Run as `node --expose-gc .cache/bench-build/bench/run.js` after `npm run build` and
 * `tsc -p tsconfig.bench.json` (the `bench` script does all three).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadSluice } from './dist.js';
import { RESULTS_JSON, writeChart, CHART_SVG, type BenchResults } from './chart.js';
import { benchGrpc, type GrpcBounds } from './grpc.js';
import {
  benchH2load,
  formatH2load,
  h2loadUnavailable,
  type H2loadBounds,
  type H2loadResult,
} from './h2load.js';
import { benchInProcess, type RateBounds } from './in-process.js';
import { benchMemory, type MemoryBounds } from './memory.js';
import { benchRedisH2load, formatRedis, REDIS_BOUNDS } from './redis-h2load.js';
import { benchRedisTrips } from './redis-trips.js';
import { formatTable, type Row } from './report.js';
import { formatTargets, judgeTargets } from './targets.js';
import { writeRules } from './workloads.js';

const t0 = performance.now();
const progress = (message: string): void =>
  void process.stderr.write(
    `bench: [${((performance.now() - t0) / 1000).toFixed(0)}s] ${message}\n`,
  );

/** Row 1 bounds: about 17 s. */
const RATE: RateBounds = { warmupMs: 300, sampleMs: 600, maxOpsPerSample: 5_000_000, samples: 3 };

/** Row 3 bounds: about 13 s. */
const MEMORY: MemoryBounds = { quietKeys: 1_000_000, busyKeys: 200_000, maxMs: 30_000 };

/** Row 2 bounds: about 60 s (two shapes, two servers, warm-up and three windows each). */
const GRPC: GrpcBounds = {
  connections: 4,
  inFlight: 64,
  warmupMs: 3_000,
  leadMs: 500,
  measureMs: 3_000,
  maxCalls: 1_000_000,
  keys: 1_000,
  rounds: 3,
};

/** Rows 5-6 bounds: about 2.5 minutes with the reference (four servers). */
const H2LOAD: H2loadBounds = {
  shapes: [
    { connections: 1, streams: 1 },
    { connections: 4, streams: 32 },
    { connections: 16, streams: 64 },
  ],
  latencyShape: { connections: 4, streams: 32 },
  warmupS: 2,
  durationS: 3,
  rounds: 2,
  sweep: [0.2, 0.4, 0.6, 0.8, 0.9],
  sweepDurationS: 3,
};

async function main(): Promise<void> {
  const sluice = await loadSluice();
  const rulesDir = await writeRules();
  const cpus = os.cpus();
  const machine = [
    `node ${process.version} (${process.platform} ${process.arch})`,
    `cpu: ${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores` +
      ` (available parallelism ${os.availableParallelism()})`,
    `memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
  ];

  try {
    progress('1/4 in-process decision rate');
    const inProcess = await benchInProcess(sluice, rulesDir, RATE);

    progress('2/4 memory per key');
    const memory = benchMemory(sluice, MEMORY);

    progress('3/4 end-to-end gRPC (servers in child processes)');
    const grpc = await benchGrpc(sluice, rulesDir, GRPC);

    progress('4/4 h2load: sluice (lean, grpc-js), no-op grpc-js, envoyproxy/ratelimit');
    const h2Skipped = h2loadUnavailable();
    const h2: H2loadResult | undefined =
      h2Skipped === undefined ? await benchH2load(sluice, rulesDir, H2LOAD, progress) : undefined;

    progress('Redis commands per decision');
    const redis: Row = await benchRedisTrips(sluice);

    progress('on Redis: sluice and envoyproxy/ratelimit, each with its own Redis, then a cluster');
    const onRedis = await benchRedisH2load(sluice, rulesDir, REDIS_BOUNDS, progress);

    const rows = [...inProcess, ...grpc.rows, ...memory, redis];
    const targets = judgeTargets(rows, h2);
    const out = [
      'sluice benchmark',
      ...machine,
      '',
      formatTable(rows),
      '',
      h2 === undefined ? `h2load rows: ${h2Skipped}` : formatH2load(h2),
      ...(h2?.referenceSkipped === undefined ? [] : [`reference: ${h2.referenceSkipped}`]),
      '',
      formatRedis(onRedis),
      '',
      'targets:',
      formatTargets(targets),
      '',
      'baselines:',
      `  1: a Map<string, number> counter bumped once per descriptor (precomputed keys) behind a ` +
        `promise-returning function; real clock; one awaited call at a time; median of ` +
        `${RATE.samples} alternating samples of up to ${RATE.sampleMs} ms`,
      `  2: a no-op grpc-js handler for the same method and proto answering the response sluice (default GRPC_SERVER, lean) ` +
        `gives that request; both servers in child processes; client in this process with ` +
        `${GRPC.inFlight} calls in flight over ${GRPC.connections} connections, ` +
        `${GRPC.keys} distinct requests round-robin; ${GRPC.rounds} alternating windows of ` +
        `${GRPC.measureMs} ms per server after ${GRPC.warmupMs} ms of warm-up`,
      `  3: a Map<string, number> holding the same flat key strings (heapUsed + arrayBuffers after gc())`,
      `  h2load: one prepared frame (${h2?.requestBytes ?? '?'} B request, one remote_address ` +
        `descriptor, the same bytes to every server), h2load -t 1; saturation: ` +
        `${H2LOAD.rounds} alternating windows of ${H2LOAD.durationS} s per server and shape after ` +
        `${H2LOAD.warmupS} s of warm-up; fixed rate: h2load --rps for ${H2LOAD.sweepDurationS} s ` +
        `at each fraction of the server's own maximum; latency from h2load's per-request log; ` +
        `server CPU per call from /proc (the reference: service_cmd plus its redis-server)`,
      ...grpc.notes,
      `results JSON: ${RESULTS_JSON}; chart: ${CHART_SVG} (npm run bench:chart re-renders it)`,
      `total bench time ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    ];
    process.stdout.write(out.join('\n') + '\n');
    const results: BenchResults & Record<string, unknown> = {
      date: new Date().toISOString(),
      machine,
      h2load: h2,
      redis: onRedis,
      rows,
      targets,
      report: out.join('\n'),
    };
    await fs.mkdir(path.dirname(RESULTS_JSON), { recursive: true });
    await fs.writeFile(RESULTS_JSON, JSON.stringify(results, null, 2) + '\n');
    if (h2 !== undefined) await writeChart(results);
  } finally {
    await fs.rm(rulesDir, { recursive: true, force: true });
  }
}

await main();
