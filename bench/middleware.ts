/**
 * `npm run bench:middleware`: what sluice's HTTP middleware adds to an Express 5 app per request,
 * remote (sluice/client to a sluice server) and embedded (the memory store in process), next to
 * express-rate-limit's memory store and to no limiter at all, measured in the same run on the
 * same machine (issue 34, acceptance 3; BENCHMARKS.md, "HTTP middleware").
 *
 * Each app runs in its own process (bench/middleware-app.ts); autocannon drives it from this one
 * over loopback HTTP/1.1 with keep-alive: a warm-up, then a measured run of BENCH_SECONDS
 * (default 10, at most 60) at BENCH_CONNECTIONS (default 10), in BENCH_ROUNDS rounds (default 3,
 * at most 9; every other round in reverse order), each figure the median of its rounds; the
 * added CPU of each round is printed too. Per row: requests/s, mean and
 * p99 latency, and the app process's CPU per request (user + system from /proc, divided by the
 * requests answered); for the remote row also the sluice server's CPU per request. "Added" is the
 * row minus the `none` row. Every request is admitted (see middleware-app.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { BENCH_LIMIT_PER_MINUTE } from './middleware-limits.js';
import { cpuMs, startSluice, type BenchServer } from './servers.js';

const VARIANTS = ['none', 'express-rate-limit', 'sluice-embedded', 'sluice-remote'] as const;
type Variant = (typeof VARIANTS)[number];

const SECONDS = Math.min(60, Math.max(1, Number(process.env['BENCH_SECONDS'] ?? 10)));
const CONNECTIONS = Math.min(100, Math.max(1, Number(process.env['BENCH_CONNECTIONS'] ?? 10)));
const ROUNDS = Math.min(9, Math.max(1, Number(process.env['BENCH_ROUNDS'] ?? 3)));
const WARMUP_SECONDS = 2;
const APP = path.join(path.dirname(fileURLToPath(import.meta.url)), 'middleware-app.js');

/** One measured row. */
interface Row {
  readonly variant: Variant;
  readonly rps: number;
  /** Mean latency, ms (autocannon's percentiles are whole milliseconds, too coarse here). */
  readonly meanMs: number;
  readonly p99Ms: number;
  /** App CPU per request, µs. */
  readonly cpuUs: number;
  /** The sluice server's CPU per request, µs (remote only). */
  readonly serverCpuUs: number | undefined;
  readonly non2xx: number;
}

/** Start one app; resolves with its port once it prints `listening PORT`. */
function startApp(
  variant: Variant,
  rulesDir: string,
  address: string,
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [APP, variant, rulesDir, address], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`${variant}: no port within 30 s`)), 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening (\d+)/.exec(out);
      if (match !== null) {
        clearTimeout(timer);
        resolve({ child, port: Number(match[1]) });
      }
    });
    child.once('exit', (code) => reject(new Error(`${variant} exited with ${String(code)}`)));
  });
}

function load(port: number, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `http://127.0.0.1:${port}/`,
    connections: CONNECTIONS,
    duration: seconds,
  });
}

async function measure(variant: Variant, rulesDir: string, sluice: BenchServer): Promise<Row> {
  const { child, port } = await startApp(variant, rulesDir, `127.0.0.1:${sluice.port}`);
  try {
    await load(port, WARMUP_SECONDS);
    const appBefore = cpuMs([child.pid!]);
    const serverBefore = cpuMs(sluice.pids);
    const result = await load(port, SECONDS);
    const appMs = cpuMs([child.pid!]) - appBefore;
    const serverMs = cpuMs(sluice.pids) - serverBefore;
    const answered = result.requests.total;
    return {
      variant,
      rps: result.requests.average,
      meanMs: result.latency.mean,
      p99Ms: result.latency.p99,
      cpuUs: (appMs * 1000) / answered,
      serverCpuUs: variant === 'sluice-remote' ? (serverMs * 1000) / answered : undefined,
      non2xx: result.non2xx,
    };
  } finally {
    child.kill('SIGTERM');
  }
}

/** The median of each figure over `rows` (one per round). */
function medianRow(variant: Variant, rows: readonly Row[]): Row {
  const median = (pick: (r: Row) => number): number => {
    const sorted = rows.map(pick).sort((a, b) => a - b);
    const mid = Math.floor(sorted.length / 2);
    return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  return {
    variant,
    rps: median((r) => r.rps),
    meanMs: median((r) => r.meanMs),
    p99Ms: median((r) => r.p99Ms),
    cpuUs: median((r) => r.cpuUs),
    serverCpuUs: variant === 'sluice-remote' ? median((r) => r.serverCpuUs ?? NaN) : undefined,
    non2xx: rows.reduce((sum, r) => sum + r.non2xx, 0),
  };
}

function table(rows: readonly Row[]): string {
  const base = rows.find((r) => r.variant === 'none')!;
  const lines = [
    '| middleware | requests/s | mean ms | p99 ms | app CPU µs/req | added CPU µs/req | added mean ms | sluice server CPU µs/req | non-2xx |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of rows) {
    const added = r.variant === 'none' ? '—' : (r.cpuUs - base.cpuUs).toFixed(1);
    const addedMean = r.variant === 'none' ? '—' : (r.meanMs - base.meanMs).toFixed(3);
    lines.push(
      `| ${r.variant} | ${Math.round(r.rps)} | ${r.meanMs.toFixed(3)} | ${r.p99Ms} | ${r.cpuUs.toFixed(1)} | ${added} | ${addedMean} | ${r.serverCpuUs === undefined ? '—' : r.serverCpuUs.toFixed(1)} | ${r.non2xx} |`,
    );
  }
  return lines.join('\n');
}

const rulesDir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-mw-'));
await fs.writeFile(
  path.join(rulesDir, 'bench.yaml'),
  `domain: bench\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: ${BENCH_LIMIT_PER_MINUTE}}\n`,
);
const sluice = await startSluice('lean', rulesDir);
const samples = new Map<Variant, Row[]>(VARIANTS.map((v) => [v, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Every other round backwards, so a drift of the machine's load favours no variant.
    const order = round % 2 === 0 ? VARIANTS : [...VARIANTS].reverse();
    for (const variant of order) {
      process.stderr.write(
        `bench:middleware: round ${round + 1}/${ROUNDS}, ${variant} (${SECONDS} s, ${CONNECTIONS} connections)\n`,
      );
      samples.get(variant)!.push(await measure(variant, rulesDir, sluice));
    }
  }
} finally {
  await sluice.stop();
  await fs.rm(rulesDir, { recursive: true, force: true });
}
const rows = VARIANTS.map((variant) => medianRow(variant, samples.get(variant)!));
const base = samples.get('none')!;
const perRound = VARIANTS.filter((v) => v !== 'none').map((v) => {
  const added = samples.get(v)!.map((r, i) => (r.cpuUs - base[i]!.cpuUs).toFixed(1));
  return `${v} ${added.join(' / ')}`;
});
process.stdout.write(
  `Express 5 on Node ${process.version}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), ` +
    `${SECONDS} s per row at ${CONNECTIONS} connections, median of ${ROUNDS} rounds\n\n` +
    `${table(rows)}\n\nadded CPU µs/req, round by round: ${perRound.join('; ')}\n`,
);
