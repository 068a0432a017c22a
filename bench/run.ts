/**
 * `npm run bench`: builds sluice, then prints one table comparing sluice with baselines measured
 * in the same run on the same machine (the ratios are the figures to compare across machines).
 * Progress goes to stderr; the machine, the table and notes go to stdout. Every loop is bounded
 * by a count and a time; the whole run takes about a minute and a half.
 *
 * Run as `node --expose-gc .cache/bench-build/bench/run.js` after `npm run build` and
 * `tsc -p tsconfig.bench.json` (the `bench` script does all three).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import { loadSluice } from './dist.js';
import { benchGrpc, type GrpcBounds } from './grpc.js';
import { benchInProcess, type RateBounds } from './in-process.js';
import { benchMemory, type MemoryBounds } from './memory.js';
import { formatTable, type Row } from './report.js';
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
    progress('1/3 in-process decision rate');
    const inProcess = await benchInProcess(sluice, rulesDir, RATE);

    progress('2/3 memory per key');
    const memory = benchMemory(sluice, MEMORY);

    progress('3/3 end-to-end gRPC (servers in child processes)');
    const grpc = await benchGrpc(sluice, rulesDir, GRPC);

    const redis: Row = {
      id: '4',
      what: 'Redis round trips per request',
      sluice: 'n/a (no Redis store yet)',
      baseline: 'n/a',
      ratio: 'n/a',
    };

    const out = [
      'sluice benchmark',
      ...machine,
      '',
      formatTable([...inProcess, ...grpc.rows, ...memory, redis]),
      '',
      'baselines:',
      `  1: a Map<string, number> counter bumped once per descriptor (precomputed keys) behind a ` +
        `promise-returning function; real clock; one awaited call at a time; median of ` +
        `${RATE.samples} alternating samples of up to ${RATE.sampleMs} ms`,
      `  2: a no-op grpc-js handler for the same method and proto answering the response sluice ` +
        `gives that request; both servers in child processes; client in this process with ` +
        `${GRPC.inFlight} calls in flight over ${GRPC.connections} connections, ` +
        `${GRPC.keys} distinct requests round-robin; ${GRPC.rounds} alternating windows of ` +
        `${GRPC.measureMs} ms per server after ${GRPC.warmupMs} ms of warm-up`,
      `  3: a Map<string, number> holding the same flat key strings (heapUsed after gc())`,
      ...grpc.notes,
      `total bench time ${((performance.now() - t0) / 1000).toFixed(0)} s`,
    ];
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    await fs.rm(rulesDir, { recursive: true, force: true });
  }
}

await main();
