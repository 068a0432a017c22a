/**
 * `npm run bench:soak [-- --minutes N]`: a long run of sluice (`node dist/main.js serve`, memory
 * store, the lean gRPC server) at a fixed fraction (default 80%) of its own maximum, watching for
 * leaks and latency drift. Not part of `npm test` or CI.
 *
 * 1. Starts sluice with the bench rules (bench/workloads.ts) and `MEMORY_MAX_KEYS` set, so the key
 *    cap is reached during the run.
 * 2. Measures the maximum: h2load at 4 connections x 32 streams (as bench/h2load.ts), no rate cap.
 * 3. Runs consecutive slices (default 10 s) of h2load `--rps` at the fraction of that maximum. The
 *    h2load frame is a four-descriptor request (a hot key, a client address, a nested path/address
 *    pair, an API key) whose address and API key change every slice. Alongside, a small paced
 *    client in this process sends a steady trickle of requests with a new address and API key
 *    every call ("churn"), so counters keep expiring (minute windows) and the cap keeps evicting
 *    (the hour-window nested pair).
 * 4. After every slice it samples: server RSS (/proc/<pid>/status VmRSS), V8 heap used and the
 *    service's error and eviction counters (from /metrics on the HTTP port), the slice's p99 from
 *    h2load's per-request log, achieved calls/s, errors, server CPU and the machine's load.
 * 5. Writes `.cache/bench/soak.json`, renders `docs/benchmarks-soak.svg`, prints a summary table
 *    (every 5 minutes) and a verdict: see {@link judge}.
 *
 * Every loop is bounded by the slice count and a deadline; every child is killed on exit.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import http from 'node:http';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { loadSluice, REPO_ROOT, SLUICE_MAIN, type Sluice } from './dist.js';
import { grid } from './h2load.js';
import { esc, niceScale } from './chart.js';
import { median, percentile, si } from './report.js';
import { freePort, processCpuMs, waitForPort } from './servers.js';
import { fourRequest, toWire, writeRules } from './workloads.js';

/** Where the samples go. */
export const SOAK_JSON = path.join(REPO_ROOT, '.cache', 'bench', 'soak.json');
/** Where the chart goes. */
export const SOAK_SVG = path.join(REPO_ROOT, 'docs', 'benchmarks-soak.svg');

const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** The run's bounds and knobs (command-line flags). */
export interface SoakOptions {
  /** Length of the fixed-rate phase, minutes (`--minutes`, default 30). */
  readonly minutes: number;
  /** Offered load as a fraction of the measured maximum (`--fraction`, default 0.8). */
  readonly fraction: number;
  /** One slice (one h2load run, one sample), s (`--slice-seconds`, default 10). */
  readonly sliceSeconds: number;
  /**
   * One window of the maximum measurement, s (`--max-seconds`, default 10); the maximum is the
   * best of three windows after 3 s of warm-up.
   */
  readonly maxSeconds: number;
  /** Use this as the maximum instead of measuring it, calls/s (`--rate`). */
  readonly rate: number | undefined;
  /**
   * `--from FILE`: run nothing; judge the samples of an earlier run's JSON again, re-render the
   * chart and print the summary (the JSON is not changed).
   */
  readonly from?: string | undefined;
  /** Churn requests per second, each with new keys (`--churn-rps`, default 200). */
  readonly churnRps: number;
  /** `MEMORY_MAX_KEYS` of the server (`--max-keys`, default 100000). */
  readonly maxKeys: number;
  /** Minutes at the start that the verdict ignores (`--warmup-minutes`, default a third, <= 10). */
  readonly warmupMinutes: number;
}

/** One 10 s sample. */
export interface SoakSample {
  /** Minutes since the fixed-rate phase began, at the end of the slice. */
  readonly minute: number;
  /** Server resident set, MB (VmRSS). */
  readonly rssMb: number;
  /** V8 heap used, MB (`nodejs_heap_size_used_bytes`). */
  readonly heapMb: number;
  /** p99 latency of the slice's h2load calls, ms. */
  readonly p99Ms: number;
  /** p50 latency of the slice's h2load calls, ms. */
  readonly p50Ms: number;
  /** Offered h2load calls/s. */
  readonly offered: number;
  /** Completed h2load calls/s. */
  readonly achieved: number;
  /** Churn calls completed in the slice, per second. */
  readonly churnPerSec: number;
  /**
   * Failed calls in the slice: h2load calls not succeeded, churn calls without grpc-status 0, and
   * the server's error counters' increase. Churn sends skipped by the client are not calls and
   * not counted here (see {@link ErrorsBy.churnSkipped}).
   */
  readonly errors: number;
  /** Failed calls by where they were seen, and the churn sends skipped. */
  readonly errorsBy: ErrorsBy;
  /** Live counters in the store (`sluice_store_keys`). */
  readonly keys: number;
  /** Evictions so far (`sluice_store_evictions_total`, every reason). */
  readonly evictions: number;
  /** Server CPU over the slice, % of one core. */
  readonly cpuPct: number;
  /** The machine's 1-minute load average. */
  readonly load1: number;
}

/** Errors of one slice by where they were seen. */
export interface ErrorsBy {
  /** h2load calls done but not succeeded (no HTTP 2xx: reset streams, refused connections). */
  readonly h2load: number;
  /**
   * Churn calls not sent because 256 were already in flight: the load generator fell behind
   * (a shortfall like achieved < offered, not a failed call).
   */
  readonly churnSkipped: number;
  /** Churn calls cancelled after 10 s without an answer. */
  readonly churnTimedOut: number;
  /** Churn calls closed without any grpc-status (stream or connection error). */
  readonly churnNoStatus: number;
  /** Churn calls answered with a grpc-status other than 0. */
  readonly churnBadStatus: number;
  /** The server's own count: `ratelimit_service_should_rate_limit_error` plus internal errors. */
  readonly server: number;
}

/** The kinds of {@link ErrorsBy} that are failed calls (every kind but `churnSkipped`). */
export const FAILED_KINDS = [
  'h2load',
  'churnTimedOut',
  'churnNoStatus',
  'churnBadStatus',
  'server',
] as const satisfies readonly (keyof ErrorsBy)[];

/**
 * Failed calls of `sample`, from its split; a sample of the first version of this tool has no
 * split, and then all its `errors` count.
 */
export function failedCalls(sample: SoakSample): number {
  const by = (sample as Partial<SoakSample>).errorsBy;
  return by === undefined ? sample.errors : FAILED_KINDS.reduce((a, kind) => a + by[kind], 0);
}

/** Churn sends skipped in `sample` (0 without a split). */
function skippedSends(sample: SoakSample): number {
  return (sample as Partial<SoakSample>).errorsBy?.churnSkipped ?? 0;
}

/** The verdict and the figures it rests on. */
export interface SoakVerdict {
  readonly pass: boolean;
  /** One line per criterion. */
  readonly lines: string[];
}

/** What soak.json holds. */
export interface SoakResult {
  readonly date: string;
  readonly machine: string[];
  readonly options: SoakOptions;
  /** The measured maximum (or `--rate`), calls/s. */
  readonly maxCallsPerSec: number;
  /** Failed calls during the maximum measurement. */
  readonly maxFailed: number;
  readonly samples: SoakSample[];
  readonly verdict: SoakVerdict;
}

/** Growth allowed after warm-up, as a share of the mean, for RSS and heap. */
export const GROWTH_LIMIT = 0.1;
/** The second half's median slice p99 may be at most this multiple of the first half's. */
export const P99_DRIFT_LIMIT = 2;

const children = new Set<ChildProcess>();
function killChildren(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

const t0 = performance.now();
const progress = (message: string): void =>
  void process.stderr.write(
    `soak: [${((performance.now() - t0) / 1000).toFixed(0)}s] ${message}\n`,
  );

function parseOptions(argv: string[]): SoakOptions {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string', default: '30' },
      fraction: { type: 'string', default: '0.8' },
      'slice-seconds': { type: 'string', default: '10' },
      'max-seconds': { type: 'string', default: '10' },
      'churn-rps': { type: 'string', default: '200' },
      'max-keys': { type: 'string', default: '100000' },
      'warmup-minutes': { type: 'string' },
      rate: { type: 'string' },
      from: { type: 'string' },
    },
    strict: true,
  });
  const num = (name: string, text: string, min: number, max: number): number => {
    const v = Number(text);
    if (!Number.isFinite(v) || v < min || v > max) {
      throw new Error(`--${name}=${text}: expected a number from ${min} to ${max}`);
    }
    return v;
  };
  const minutes = num('minutes', values.minutes, 0.1, 24 * 60);
  return {
    minutes,
    fraction: num('fraction', values.fraction, 0.01, 1),
    sliceSeconds: num('slice-seconds', values['slice-seconds'], 1, 600),
    maxSeconds: num('max-seconds', values['max-seconds'], 1, 600),
    rate: values.rate === undefined ? undefined : num('rate', values.rate, 1, 10_000_000),
    from: values.from,
    churnRps: num('churn-rps', values['churn-rps'], 0, 100_000),
    maxKeys: num('max-keys', values['max-keys'], 1_000, 1_000_000_000),
    warmupMinutes:
      values['warmup-minutes'] === undefined
        ? Math.min(10, minutes / 3)
        : num('warmup-minutes', values['warmup-minutes'], 0, minutes),
  };
}

/** A running sluice with its ports. */
interface Server {
  readonly pid: number;
  readonly grpcPort: number;
  readonly httpPort: number;
  stop(): Promise<void>;
}

async function startServer(rulesDir: string, maxKeys: number): Promise<Server> {
  const grpcPort = await freePort();
  const httpPort = await freePort();
  const child = spawn(process.execPath, [SLUICE_MAIN, 'serve', '--config', rulesDir], {
    // A minimal environment, so settings in the caller's shell do not change the run.
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_SERVER: 'lean',
      BACKEND_TYPE: 'memory',
      MEMORY_MAX_KEYS: String(maxKeys),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.add(child);
  let stderr = '';
  child.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4096)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitForPort('sluice', grpcPort, child, 60_000);
  await waitForPort('sluice', httpPort, child, 60_000);
  return {
    pid: child.pid!,
    grpcPort,
    httpPort,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
      children.delete(child);
      if (child.exitCode !== null && child.exitCode !== 0) {
        process.stderr.write(`sluice exited with ${child.exitCode}:\n${stderr}\n`);
      }
    },
  };
}

/** VmRSS of `pid` in MB; NaN when unreadable. */
function rssMb(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? NaN : Number(m[1]) / 1024;
  } catch {
    return NaN;
  }
}

/**
 * The Prometheus text from `/metrics`: each metric name maps to the sum over its label sets, and
 * each `name{labels}` (as printed) to its own value.
 */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/metrics', timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('/metrics timed out')));
    req.on('error', reject);
  });
  const sums = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m === null) continue;
    const v = Number(m[2]);
    if (!Number.isFinite(v)) continue;
    sums.set(m[1]!, (sums.get(m[1]!) ?? 0) + v);
    const labelled = /^([a-zA-Z_:][\w:]*\{[^}]*\})/.exec(line);
    if (labelled !== null) sums.set(labelled[1]!, v);
  }
  return sums;
}

interface H2loadRun {
  readonly done: number;
  readonly succeeded: number;
  readonly seconds: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

/** One h2load run at 4x32 (optionally rate-capped, with a per-request log for latency). */
async function h2load(
  port: number,
  frameFile: string,
  seconds: number,
  rps: number | undefined,
  logFile: string | undefined,
): Promise<H2loadRun> {
  const connections = 4;
  const args = ['-c', String(connections), '-m', '32', '-t', '1', '-D', String(seconds)];
  args.push('-d', frameFile, '-H', 'content-type: application/grpc', '-H', 'te: trailers');
  if (rps !== undefined) args.push('--rps', String(Math.max(1, Math.round(rps / connections))));
  if (logFile !== undefined) args.push('--log-file', logFile);
  args.push(`http://127.0.0.1:${port}${PATH}`);
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      children.delete(child);
      if (code === 0) resolve(text);
      else reject(new Error(`h2load exited with ${code}:\n${text}`));
    });
  });
  const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded/.exec(out);
  const finished = /finished in ([\d.]+)(m?s)/.exec(out);
  if (requests === null || finished === null) throw new Error(`unexpected h2load output:\n${out}`);
  let p50Ms = NaN;
  let p99Ms = NaN;
  if (logFile !== undefined) {
    const values: number[] = [];
    for (const line of (await fs.readFile(logFile, 'utf8')).split('\n')) {
      const cols = line.split('\t');
      if (cols.length >= 3 && cols[1] === '200') values.push(Number(cols[2]) / 1000);
    }
    const sorted = Float64Array.from(values).sort();
    p50Ms = percentile(sorted, sorted.length, 50);
    p99Ms = percentile(sorted, sorted.length, 99);
    await fs.rm(logFile, { force: true });
  }
  return {
    done: Number(requests[3]),
    succeeded: Number(requests[4]),
    seconds: Number(finished[1]) / (finished[2] === 'ms' ? 1000 : 1),
    p50Ms,
    p99Ms,
  };
}

let methodCache: ReturnType<Sluice['proto']['rlsServiceDefinition']>['ShouldRateLimit'] | undefined;

/** A gRPC frame (5-byte prefix + message) for `fourRequest(i)`. */
function frameFor(sluice: Sluice, i: number): Buffer {
  methodCache ??= sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage()).ShouldRateLimit!;
  const method = methodCache;
  const message = method.requestSerialize(toWire(fourRequest(i)));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/**
 * The churn client: one HTTP/2 connection, `rps` calls a second paced every 20 ms, each with
 * new keys; at most 256 in flight (a tick that would exceed it skips, counted as an error).
 */
class Churn {
  ok = 0;
  skipped = 0;
  timedOut = 0;
  noStatus = 0;
  badStatus = 0;
  private next = 10_000_000;
  private inFlight = 0;
  private readonly session: http2.ClientHttp2Session;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly sluice: Sluice,
    port: number,
    rps: number,
  ) {
    this.session = http2.connect(`http://127.0.0.1:${port}`);
    this.session.on('error', () => {});
    if (rps <= 0) return;
    const started = performance.now();
    let sent = 0;
    this.timer = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * rps);
      while (sent < due) {
        sent++;
        if (this.inFlight >= 256) {
          this.skipped++;
          continue;
        }
        this.call();
      }
    }, 20);
  }

  private call(): void {
    this.inFlight++;
    const stream = this.session.request({
      ':method': 'POST',
      ':path': PATH,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    let status = '';
    stream.on('response', (h) => (status = String(h['grpc-status'] ?? status)));
    stream.on('trailers', (t: http2.IncomingHttpHeaders) => {
      status = String(t['grpc-status'] ?? status);
    });
    stream.on('data', () => {});
    stream.on('error', () => {});
    let timedOut = false;
    stream.setTimeout(10_000, () => {
      timedOut = true;
      stream.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('close', () => {
      this.inFlight--;
      if (status === '0') this.ok++;
      else if (timedOut) this.timedOut++;
      else if (status === '') this.noStatus++;
      else this.badStatus++;
    });
    stream.end(frameFor(this.sluice, this.next++));
  }

  /** Every failure so far, by kind. */
  failures(): Omit<ErrorsBy, 'h2load' | 'server'> {
    return {
      churnSkipped: this.skipped,
      churnTimedOut: this.timedOut,
      churnNoStatus: this.noStatus,
      churnBadStatus: this.badStatus,
    };
  }

  close(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.session.destroy();
  }
}

/** Least-squares slope of y against x. */
function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * The verdict over the samples after warm-up:
 * - RSS and heap: the least-squares trend across the window, as a share of the window's mean,
 *   stays within {@link GROWTH_LIMIT} (a leak shows as steady growth; GC sawtooth does not);
 * - latency: the median slice p99 of the window's second half is at most {@link P99_DRIFT_LIMIT}
 *   times that of its first half (the maximum slice p99 is reported, not judged: other work on a
 *   shared machine causes single-slice spikes);
 * - errors: no failed call in any slice (warm-up included). Churn sends the client skipped
 *   because it fell behind are reported with the achieved rate, not judged.
 */
export function judge(samples: readonly SoakSample[], warmupMinutes: number): SoakVerdict {
  const lines: string[] = [];
  let pass = true;
  const after = samples.filter((s) => s.minute > warmupMinutes);
  if (after.length < 4) {
    return { pass: false, lines: [`only ${after.length} samples after warm-up: run longer`] };
  }
  const span = after[after.length - 1]!.minute - after[0]!.minute;
  const xs = after.map((s) => s.minute);
  for (const [name, pick] of [
    ['RSS', (s: SoakSample) => s.rssMb],
    ['heap used', (s: SoakSample) => s.heapMb],
  ] as const) {
    const ys = after.map(pick);
    const mean = ys.reduce((a, b) => a + b, 0) / ys.length;
    const perMin = slope(xs, ys);
    const growth = (perMin * span) / mean;
    const ok = growth <= GROWTH_LIMIT;
    pass &&= ok;
    lines.push(
      `${ok ? 'ok  ' : 'FAIL'} ${name}: trend ${perMin >= 0 ? '+' : ''}${perMin.toFixed(3)} MB/min over ` +
        `minutes ${after[0]!.minute.toFixed(1)}-${after[after.length - 1]!.minute.toFixed(1)} = ` +
        `${(growth * 100).toFixed(1)}% of its mean ${mean.toFixed(1)} MB (limit ${GROWTH_LIMIT * 100}%); ` +
        `range ${Math.min(...ys).toFixed(1)}-${Math.max(...ys).toFixed(1)} MB`,
    );
  }
  const half = after.length >> 1;
  const p99First = median(after.slice(0, half).map((s) => s.p99Ms));
  const p99Second = median(after.slice(half).map((s) => s.p99Ms));
  const p99Ok = p99Second <= P99_DRIFT_LIMIT * p99First;
  pass &&= p99Ok;
  const maxP99 = Math.max(...samples.map((s) => s.p99Ms));
  lines.push(
    `${p99Ok ? 'ok  ' : 'FAIL'} p99: median slice p99 ${p99First.toFixed(2)} ms (first half after ` +
      `warm-up) -> ${p99Second.toFixed(2)} ms (second half), limit x${P99_DRIFT_LIMIT}; ` +
      `max slice p99 ${maxP99.toFixed(2)} ms`,
  );
  const errors = samples.reduce((a, s) => a + failedCalls(s), 0);
  pass &&= errors === 0;
  const by = new Map<string, number>();
  for (const sample of samples) {
    for (const kind of FAILED_KINDS) {
      const n = (sample as Partial<SoakSample>).errorsBy?.[kind] ?? 0;
      if (n > 0) by.set(kind, (by.get(kind) ?? 0) + n);
    }
  }
  const split =
    samples.reduce((a, s) => a + s.errors, 0) - [...by.values()].reduce((a, n) => a + n, 0);
  if (split > 0) by.set('not split', split);
  const where = [...by].map(([kind, n]) => `${kind} ${n}`).join(', ');
  const when = samples
    .filter((s) => failedCalls(s) > 0)
    .map((s) => `${failedCalls(s)} at minute ${s.minute.toFixed(1)}`)
    .join(', ');
  lines.push(
    `${errors === 0 ? 'ok  ' : 'FAIL'} errors: ${errors} failed calls over the whole run` +
      (errors === 0 ? '' : ` (${where}; ${when})`),
  );
  const skipped = samples.reduce((a, s) => a + skippedSends(s), 0);
  const churned = samples.reduce((a, s, i) => {
    const seconds = (s.minute - (i === 0 ? 0 : samples[i - 1]!.minute)) * 60;
    return a + s.churnPerSec * seconds;
  }, 0);
  lines.push(
    `info churn sends skipped (client fell behind, 256 in flight): ${skipped} of about ` +
      `${si(churned + skipped)}, in ${samples.filter((s) => skippedSends(s) > 0).length} ` +
      `of ${samples.length} slices`,
  );
  const rates = samples.map((s) => s.achieved / s.offered);
  lines.push(
    `info achieved/offered: median ${(median([...rates]) * 100).toFixed(1)}%, lowest ` +
      `${(Math.min(...rates) * 100).toFixed(1)}%; evictions ${si(samples[samples.length - 1]!.evictions)}`,
  );
  lines.unshift(`verdict: ${pass ? 'PASS' : 'FAIL'}`);
  return { pass, lines };
}

/** One summary row every `everyMinutes` (the sample nearest each mark, and the last). */
export function summaryTable(samples: readonly SoakSample[], everyMinutes = 5): string {
  const picked: SoakSample[] = [];
  const last = samples[samples.length - 1];
  for (let mark = 0; last !== undefined && mark <= last.minute + 1e-9; mark += everyMinutes) {
    const s = samples.reduce((best, x) =>
      Math.abs(x.minute - mark) < Math.abs(best.minute - mark) ? x : best,
    );
    if (!picked.includes(s)) picked.push(s);
  }
  if (last !== undefined && !picked.includes(last)) picked.push(last);
  return grid(
    [
      'minute',
      'RSS MB',
      'heap MB',
      'p50 ms',
      'p99 ms',
      'offered/s',
      'achieved/s',
      'churn/s',
      'failed',
      'skipped',
      'keys',
      'evictions',
      'server CPU',
      'load 1m',
    ],
    picked.map((s) => [
      s.minute.toFixed(1),
      s.rssMb.toFixed(1),
      s.heapMb.toFixed(1),
      s.p50Ms.toFixed(2),
      s.p99Ms.toFixed(2),
      si(s.offered),
      si(s.achieved),
      s.churnPerSec.toFixed(0),
      String(failedCalls(s)),
      String(skippedSends(s)),
      si(s.keys),
      si(s.evictions),
      `${s.cpuPct.toFixed(0)}%`,
      s.load1.toFixed(2),
    ]),
  );
}

/**
 * The SVG: three panels against minutes, with the warm-up shaded: RSS and heap used (MB); slice
 * p99 and p50 (ms); offered and achieved calls/s with the machine's load average (x1000, so a
 * load of 2 on the 2-core machine sits at 2k).
 */
export function renderSoakChart(result: SoakResult): string {
  const width = 760;
  const panelH = 200;
  const m = { left: 70, right: 150, top: 40, gap: 50, bottom: 50 };
  const height = m.top + panelH * 3 + m.gap * 2 + m.bottom;
  const plotW = width - m.left - m.right;
  const samples = result.samples;
  const x = niceScale(Math.max(1, result.options.minutes, ...samples.map((s) => s.minute)));
  const px = (v: number): number => m.left + (v / x.top) * plotW;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${m.left}" y="22" font-size="14" font-weight="bold">${esc(
      `Soak: sluice (lean, memory) at ${Math.round(result.options.fraction * 100)}% of ${si(result.maxCallsPerSec)} calls/s, ${result.options.minutes} min`,
    )}</text>`,
  ];
  const panel = (
    top: number,
    label: string,
    series: { name: string; color: string; pick: (s: SoakSample) => number }[],
  ): void => {
    const y = niceScale(Math.max(0.1, ...series.flatMap((s) => samples.map(s.pick))));
    const py = (v: number): number => top + panelH - (Math.min(v, y.top) / y.top) * panelH;
    out.push(
      `<rect x="${px(0)}" y="${top}" width="${px(result.options.warmupMinutes) - px(0)}" height="${panelH}" fill="#f3f3f3"/>`,
    );
    for (let v = 0; v <= x.top + 1e-9; v += x.step) {
      out.push(
        `<line x1="${px(v)}" y1="${top}" x2="${px(v)}" y2="${top + panelH}" stroke="#e4e4e4"/>`,
        `<text x="${px(v)}" y="${top + panelH + 16}" text-anchor="middle">${Number(v.toPrecision(3))}</text>`,
      );
    }
    for (let v = 0; v <= y.top + 1e-9; v += y.step) {
      out.push(
        `<line x1="${m.left}" y1="${py(v)}" x2="${m.left + plotW}" y2="${py(v)}" stroke="#e4e4e4"/>`,
        `<text x="${m.left - 6}" y="${py(v) + 4}" text-anchor="end">${Number(v.toPrecision(3))}</text>`,
      );
    }
    out.push(
      `<rect x="${m.left}" y="${top}" width="${plotW}" height="${panelH}" fill="none" stroke="#333333"/>`,
      `<text x="18" y="${top + panelH / 2}" text-anchor="middle" transform="rotate(-90 18 ${top + panelH / 2})">${esc(label)}</text>`,
    );
    let legendY = top + 12;
    for (const s of series) {
      const points = samples
        .filter((q) => Number.isFinite(s.pick(q)))
        .map((q) => `${px(q.minute).toFixed(1)},${py(s.pick(q)).toFixed(1)}`)
        .join(' ');
      const lx = m.left + plotW + 14;
      out.push(
        `<polyline points="${points}" fill="none" stroke="${s.color}" stroke-width="1.5"/>`,
        `<line x1="${lx}" y1="${legendY}" x2="${lx + 24}" y2="${legendY}" stroke="${s.color}" stroke-width="2"/>`,
        `<text x="${lx + 30}" y="${legendY + 4}">${esc(s.name)}</text>`,
      );
      legendY += 20;
    }
  };
  panel(m.top, 'memory, MB', [
    { name: 'RSS', color: '#1f77b4', pick: (s) => s.rssMb },
    { name: 'heap used', color: '#2ca02c', pick: (s) => s.heapMb },
  ]);
  const top2 = m.top + panelH + m.gap;
  panel(top2, 'latency, ms', [
    { name: 'p99 (slice)', color: '#d62728', pick: (s) => s.p99Ms },
    { name: 'p50 (slice)', color: '#ff9896', pick: (s) => s.p50Ms },
  ]);
  panel(top2 + panelH + m.gap, 'calls/s', [
    { name: 'offered', color: '#7f7f7f', pick: (s) => s.offered },
    { name: 'achieved', color: '#9467bd', pick: (s) => s.achieved },
    { name: 'load avg x1000', color: '#ff7f0e', pick: (s) => s.load1 * 1000 },
  ]);
  out.push(
    `<text x="${m.left + plotW / 2}" y="${height - 14}" text-anchor="middle">minutes at fixed rate (shaded: warm-up, not judged)</text>`,
    `<text x="${m.left + plotW + 14}" y="${height - 14}" font-size="10">${esc(result.date.slice(0, 16))}Z</text>`,
    '</svg>',
  );
  return out.join('\n') + '\n';
}

/** The printed report: machine, options, the summary table every 5 minutes and the verdict. */
export function report(result: SoakResult, file = SOAK_JSON): string {
  const { options } = result;
  return [
    `sluice soak, ${result.date}`,
    ...result.machine,
    `options: ${JSON.stringify(options)}`,
    `maximum at 4x32: ${si(result.maxCallsPerSec)} calls/s; offered ` +
      `${si(result.maxCallsPerSec * options.fraction)} calls/s ` +
      `(${Math.round(options.fraction * 100)}%) plus ${options.churnRps} churn calls/s`,
    '',
    summaryTable(result.samples),
    '',
    ...result.verdict.lines,
    '',
    `samples: ${file}; chart: ${SOAK_SVG}`,
  ].join('\n');
}

async function main(): Promise<void> {
  process.once('exit', killChildren);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killChildren();
      process.exit(130);
    });
  }
  const options = parseOptions(process.argv.slice(2));
  if (options.from !== undefined) {
    const earlier = JSON.parse(await fs.readFile(options.from, 'utf8')) as SoakResult;
    const result: SoakResult = {
      ...earlier,
      verdict: judge(earlier.samples, earlier.options.warmupMinutes),
    };
    await fs.writeFile(SOAK_SVG, renderSoakChart(result));
    process.stdout.write(report(result, options.from) + '\n');
    if (!result.verdict.pass) process.exitCode = 1;
    return;
  }
  if (spawnSync('h2load', ['--version']).status !== 0) {
    throw new Error('h2load is missing (Debian: apt-get install nghttp2-client)');
  }
  const sluice = await loadSluice();
  const rulesDir = await writeRules();
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-soak-'));
  const cpus = os.cpus();
  const machine = [
    `node ${process.version} (${process.platform} ${process.arch})`,
    `cpu: ${cpus[0]?.model.trim() ?? 'unknown'}, ${cpus.length} cores`,
    `memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`,
    `load average at start: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  ];
  let server: Server | undefined;
  let churn: Churn | undefined;
  try {
    server = await startServer(rulesDir, options.maxKeys);
    const frameFile = path.join(dir, 'frame.bin');
    await fs.writeFile(frameFile, frameFor(sluice, 0));
    progress('warm-up 3 s, then the maximum at 4x32');
    await h2load(server.grpcPort, frameFile, 3, undefined, undefined);
    // The best of three windows: on a shared machine one window can land on someone else's burst.
    let max = { done: 0, succeeded: 0, seconds: 1 };
    let maxFailed = 0;
    for (let w = 0; w < 3; w++) {
      const run = await h2load(
        server.grpcPort,
        frameFile,
        options.maxSeconds,
        undefined,
        undefined,
      );
      maxFailed += run.done - run.succeeded;
      if (run.done / run.seconds > max.done / max.seconds) max = run;
    }
    const maxCallsPerSec = options.rate ?? max.done / max.seconds;
    const offered = maxCallsPerSec * options.fraction;
    progress(
      `maximum ${si(maxCallsPerSec)} calls/s${options.rate === undefined ? '' : ' (--rate)'} ` +
        `(${maxFailed} failed); ` +
        `soak at ${si(offered)} calls/s + churn ${options.churnRps}/s for ${options.minutes} min`,
    );

    const slices = Math.max(1, Math.round((options.minutes * 60) / options.sliceSeconds));
    const deadline = Date.now() + (options.minutes * 60 + slices * 30 + 60) * 1000;
    churn = new Churn(sluice, server.grpcPort, options.churnRps);
    const samples: SoakSample[] = [];
    const phaseStart = performance.now();
    let before = await scrape(server.httpPort);
    for (const name of [
      'nodejs_heap_size_used_bytes',
      'sluice_store_keys',
      'sluice_store_evictions_total',
      'sluice_should_rate_limit_calls_total{result="internal"}',
    ]) {
      if (!before.has(name)) throw new Error(`/metrics has no ${name}: the soak cannot sample it`);
    }
    let cpuBefore = processCpuMs(server.pid);
    let churnOk = churn.ok;
    let churnFailures = churn.failures();
    let sliceStart = performance.now();
    for (let i = 1; i <= slices && Date.now() < deadline; i++) {
      await fs.writeFile(frameFile, frameFor(sluice, i));
      const run = await h2load(
        server.grpcPort,
        frameFile,
        options.sliceSeconds,
        offered,
        path.join(dir, `log-${i}.tsv`),
      );
      const now = performance.now();
      const wallS = (now - sliceStart) / 1000;
      const after = await scrape(server.httpPort);
      const cpu = processCpuMs(server.pid);
      const failed = (m: Map<string, number>): number =>
        (m.get('ratelimit_service_should_rate_limit_error') ?? 0) +
        (m.get('sluice_should_rate_limit_calls_total{result="internal"}') ?? 0);
      const churnNow = churn.failures();
      const errorsBy: ErrorsBy = {
        h2load: run.done - run.succeeded,
        churnSkipped: churnNow.churnSkipped - churnFailures.churnSkipped,
        churnTimedOut: churnNow.churnTimedOut - churnFailures.churnTimedOut,
        churnNoStatus: churnNow.churnNoStatus - churnFailures.churnNoStatus,
        churnBadStatus: churnNow.churnBadStatus - churnFailures.churnBadStatus,
        server: failed(after) - failed(before),
      };
      const sample: SoakSample = {
        minute: (now - phaseStart) / 60_000,
        rssMb: rssMb(server.pid),
        heapMb: (after.get('nodejs_heap_size_used_bytes') ?? NaN) / 2 ** 20,
        p50Ms: run.p50Ms,
        p99Ms: run.p99Ms,
        offered,
        achieved: run.done / run.seconds,
        churnPerSec: (churn.ok - churnOk) / wallS,
        errors: FAILED_KINDS.reduce((a, kind) => a + errorsBy[kind], 0),
        errorsBy,
        keys: after.get('sluice_store_keys') ?? NaN,
        evictions: after.get('sluice_store_evictions_total') ?? NaN,
        cpuPct: ((cpu - cpuBefore) / (wallS * 1000)) * 100,
        load1: os.loadavg()[0]!,
      };
      samples.push(sample);
      before = after;
      cpuBefore = cpu;
      churnOk = churn.ok;
      churnFailures = churnNow;
      sliceStart = now;
      if (i % 6 === 0 || i === slices) {
        progress(
          `minute ${sample.minute.toFixed(1)}: RSS ${sample.rssMb.toFixed(1)} MB, heap ` +
            `${sample.heapMb.toFixed(1)} MB, p99 ${sample.p99Ms.toFixed(2)} ms, ` +
            `${si(sample.achieved)}/s, failed ${sample.errors}, churn skipped ` +
            `${sample.errorsBy.churnSkipped}, keys ${si(sample.keys)}, ` +
            `load ${sample.load1.toFixed(2)}`,
        );
      }
    }
    churn.close();
    churn = undefined;

    const verdict = judge(samples, options.warmupMinutes);
    const result: SoakResult = {
      date: new Date().toISOString(),
      machine,
      options,
      maxCallsPerSec,
      maxFailed,
      samples,
      verdict,
    };
    await fs.mkdir(path.dirname(SOAK_JSON), { recursive: true });
    await fs.writeFile(SOAK_JSON, JSON.stringify(result, null, 2) + '\n');
    await fs.writeFile(SOAK_SVG, renderSoakChart(result));
    process.stdout.write(
      `${report(result)}\ntotal time ${((performance.now() - t0) / 1000).toFixed(0)} s\n`,
    );
    if (!verdict.pass) process.exitCode = 1;
  } finally {
    churn?.close();
    await server?.stop();
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rm(rulesDir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
