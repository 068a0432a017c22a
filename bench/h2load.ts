/**
 * Rows 5-6: end-to-end ShouldRateLimit driven by h2load (nghttp2), a load generator in C that is
 * not the bottleneck, sending one prepared gRPC frame (one descriptor, the same bytes for every
 * server) to: sluice with the lean server, sluice with the grpc-js server, the no-op grpc-js
 * handler, and envoyproxy/ratelimit on Redis. Per server and shape (connections x streams):
 * calls/s at saturation and server CPU per call (/proc); then a sweep at fixed offered rates
 * (h2load --rps) as fractions of each server's own 4x32 maximum, with p50 / p99 / p99.9 latency
 * from h2load's per-request log. Servers alternate within each round, so drift hits all alike.
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs/promises';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import type { Sluice } from './dist.js';
import { percentile, ratio, si } from './report.js';
import {
  cpuMs,
  referenceUnavailable,
  startNoop,
  startReference,
  startSluice,
  type BenchServer,
} from './servers.js';
import { ipRequest, toWire } from './workloads.js';

/** One load shape: h2load clients (connections) x max concurrent streams per connection. */
export interface Shape {
  readonly connections: number;
  readonly streams: number;
}

/** Bounds of the h2load rows. */
export interface H2loadBounds {
  /** Shapes at saturation; the one equal to {@link latencyShape} is the headline. */
  readonly shapes: readonly Shape[];
  /** Shape of the fixed-rate sweep. */
  readonly latencyShape: Shape;
  /** Load on each fresh server before anything is measured, s. */
  readonly warmupS: number;
  /** One saturation window, s. */
  readonly durationS: number;
  /** Saturation windows per server and shape (servers alternate within a round). */
  readonly rounds: number;
  /** Offered rates of the sweep, as fractions of each server's own maximum at latencyShape. */
  readonly sweep: readonly number[];
  /** One sweep window, s. */
  readonly sweepDurationS: number;
}

/** One server's figures at one shape, pooled over the rounds. */
export interface Saturation {
  readonly callsPerSec: number;
  /** Server CPU per call, µs (the reference: its process plus Redis). */
  readonly cpuUsPerCall: number;
  /** Server CPU as a share of one core, %. */
  readonly cpuPct: number;
  /** Calls h2load did not count as succeeded. */
  readonly failed: number;
}

/** One fixed-rate point. */
export interface SweepPoint {
  /** Fraction of the server's own maximum. */
  readonly fraction: number;
  /** Offered calls/s (h2load --rps x connections). */
  readonly offered: number;
  /** Completed calls/s. */
  readonly achieved: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly cpuUsPerCall: number;
}

/** Everything measured for one server. */
export interface ServerFigures {
  readonly name: string;
  /** Keyed by `CxS`, e.g. `4x32`. */
  readonly saturation: Record<string, Saturation>;
  readonly sweep: SweepPoint[];
}

/** The h2load results (also written as JSON for the chart). */
export interface H2loadResult {
  readonly servers: ServerFigures[];
  /** Why the reference has no figures, when it has none. */
  readonly referenceSkipped: string | undefined;
  readonly requestBytes: number;
  readonly bounds: H2loadBounds;
}

const PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** `4x32` */
function shapeKey(shape: Shape): string {
  return `${shape.connections}x${shape.streams}`;
}

/** Why h2load cannot run here, or `undefined`. */
export function h2loadUnavailable(): string | undefined {
  return spawnSync('h2load', ['--version']).status === 0
    ? undefined
    : 'skipped: no h2load (Debian: apt-get install nghttp2-client)';
}

interface H2loadRun {
  readonly done: number;
  readonly succeeded: number;
  readonly seconds: number;
  readonly cpuMs: number;
  /** Per-call latencies, ms, sorted (only with a log file). */
  readonly latencies: Float64Array | undefined;
}

/** Run h2load once against `server`; CPU is read around the run. */
export async function h2load(
  server: BenchServer,
  frameFile: string,
  shape: Shape,
  seconds: number,
  options: { rps?: number; logFile?: string } = {},
): Promise<H2loadRun> {
  const args = [
    '-c',
    String(shape.connections),
    '-m',
    String(shape.streams),
    '-t',
    '1',
    '-D',
    String(seconds),
    '-d',
    frameFile,
    '-H',
    'content-type: application/grpc',
    '-H',
    'te: trailers',
  ];
  if (options.rps !== undefined) args.push('--rps', String(Math.max(1, Math.round(options.rps))));
  if (options.logFile !== undefined) args.push('--log-file', options.logFile);
  args.push(`http://127.0.0.1:${server.port}${PATH}`);
  const before = cpuMs(server.pids);
  const started = performance.now();
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('h2load', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    child.stdout.on('data', (c: Buffer) => (text += c.toString()));
    child.stderr.on('data', (c: Buffer) => (text += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(text);
      else reject(new Error(`h2load exited with ${code}:\n${text}`));
    });
  });
  const wallS = (performance.now() - started) / 1000;
  const after = cpuMs(server.pids);
  const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded/.exec(out);
  const finished = /finished in ([\d.]+)(m?s)/.exec(out);
  if (requests === null || finished === null) throw new Error(`unexpected h2load output:\n${out}`);
  const runSeconds = Number(finished[1]) / (finished[2] === 'ms' ? 1000 : 1);
  let latencies: Float64Array | undefined;
  if (options.logFile !== undefined) {
    const lines = (await fs.readFile(options.logFile, 'utf8')).split('\n');
    const values: number[] = [];
    for (const line of lines) {
      const cols = line.split('\t');
      if (cols.length >= 3 && cols[1] === '200') values.push(Number(cols[2]) / 1000);
    }
    latencies = Float64Array.from(values).sort();
  }
  return {
    done: Number(requests[3]),
    succeeded: Number(requests[4]),
    // h2load's own duration excludes connection set-up; CPU is read around the whole process,
    // so CPU per call uses calls over the whole run (set-up is a few ms of `wallS`).
    seconds: Math.min(runSeconds, wallS),
    cpuMs: after - before,
    latencies,
  };
}

/** One call over raw HTTP/2 with the prepared frame; throws unless OK with `statuses` statuses. */
export async function checkServer(
  server: BenchServer,
  frame: Buffer,
  sluice: Sluice,
  statuses = 1,
): Promise<void> {
  const method = sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage()).ShouldRateLimit!;
  const session = http2.connect(`http://127.0.0.1:${server.port}`);
  session.on('error', () => {});
  try {
    const { status, body } = await new Promise<{ status: string; body: Buffer }>(
      (resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': PATH,
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        const chunks: Buffer[] = [];
        let status = '';
        const timer = setTimeout(() => reject(new Error(`${server.name}: no answer`)), 10_000);
        stream.on('response', (h) => (status = String(h['grpc-status'] ?? status)));
        stream.on('trailers', (t: http2.IncomingHttpHeaders) => {
          status = String(t['grpc-status'] ?? status);
        });
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('error', reject);
        stream.on('close', () => {
          clearTimeout(timer);
          resolve({ status, body: Buffer.concat(chunks) });
        });
        stream.end(frame);
      },
    );
    const r =
      status === '0'
        ? (method.responseDeserialize(body.subarray(5)) as {
            overall_code?: string;
            statuses?: unknown[];
          })
        : undefined;
    if (r?.overall_code !== 'OK' || r.statuses?.length !== statuses) {
      throw new Error(`${server.name}: grpc-status ${status}, response ${JSON.stringify(r)}`);
    }
  } finally {
    session.destroy();
  }
}

/** Run every h2load measurement. `progress` reports each step. */
export async function benchH2load(
  sluice: Sluice,
  rulesDir: string,
  bounds: H2loadBounds,
  progress: (message: string) => void,
): Promise<H2loadResult> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-h2load-'));
  const method = sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage()).ShouldRateLimit!;
  const message = method.requestSerialize(toWire(ipRequest(0)));
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  const frameFile = path.join(dir, 'request.bin');
  await fs.writeFile(frameFile, frame);

  // The no-op server answers what sluice answers for this request.
  const app = await sluice.app.createApp({
    settings: sluice.settings.loadSettings({ USE_STATSD: 'false' }, { config: [rulesDir] }),
    logger: sluice.logger.silentLogger(),
    watch: false,
  });
  const fixed: Record<string, unknown> = {
    1: sluice.mapping.responseToWire(await app.service.shouldRateLimit(ipRequest(0))) as unknown,
  };
  await app.close();

  const referenceSkipped = referenceUnavailable();
  const servers: BenchServer[] = [];
  try {
    progress('h2load: starting servers');
    servers.push(await startSluice('lean', rulesDir));
    servers.push(await startSluice('grpc-js', rulesDir));
    servers.push(await startNoop(fixed));
    if (referenceSkipped === undefined) servers.push(await startReference());
    for (const server of servers) {
      await checkServer(server, frame, sluice);
      await h2load(server, frameFile, bounds.latencyShape, bounds.warmupS);
    }

    const figures = new Map<string, ServerFigures>(
      servers.map((s) => [s.name, { name: s.name, saturation: {}, sweep: [] }]),
    );
    for (const shape of bounds.shapes) {
      progress(`h2load: saturation at ${shapeKey(shape)}`);
      const pooled = new Map<string, { done: number; ok: number; s: number; cpu: number }>();
      for (let round = 0; round < bounds.rounds; round++) {
        for (const server of servers) {
          const run = await h2load(server, frameFile, shape, bounds.durationS);
          const p = pooled.get(server.name) ?? { done: 0, ok: 0, s: 0, cpu: 0 };
          p.done += run.done;
          p.ok += run.succeeded;
          p.s += run.seconds;
          p.cpu += run.cpuMs;
          pooled.set(server.name, p);
        }
      }
      for (const server of servers) {
        const p = pooled.get(server.name)!;
        figures.get(server.name)!.saturation[shapeKey(shape)] = {
          callsPerSec: p.done / p.s,
          cpuUsPerCall: (p.cpu * 1000) / p.done,
          cpuPct: (p.cpu / (p.s * 1000)) * 100,
          failed: p.done - p.ok,
        };
      }
    }

    const key = shapeKey(bounds.latencyShape);
    for (const fraction of bounds.sweep) {
      progress(`h2load: fixed rate at ${Math.round(fraction * 100)}% of each maximum (${key})`);
      for (const server of servers) {
        const f = figures.get(server.name)!;
        const max = f.saturation[key]?.callsPerSec ?? 0;
        const offered = max * fraction;
        const logFile = path.join(dir, `log-${servers.indexOf(server)}-${fraction}.tsv`);
        const run = await h2load(server, frameFile, bounds.latencyShape, bounds.sweepDurationS, {
          rps: offered / bounds.latencyShape.connections,
          logFile,
        });
        const lat = run.latencies!;
        f.sweep.push({
          fraction,
          offered,
          achieved: run.done / run.seconds,
          p50Ms: percentile(lat, lat.length, 50),
          p99Ms: percentile(lat, lat.length, 99),
          p999Ms: percentile(lat, lat.length, 99.9),
          cpuUsPerCall: (run.cpuMs * 1000) / run.done,
        });
        await fs.rm(logFile, { force: true });
      }
    }
    return {
      servers: [...figures.values()],
      referenceSkipped,
      requestBytes: message.length,
      bounds,
    };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** Pad cells into an aligned Markdown table. */
export function grid(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    '| ' + cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  return [
    line(header),
    '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|',
    ...rows.map(line),
  ].join('\n');
}

/** The h2load tables: saturation per shape, and latency at fixed offered rates. */
export function formatH2load(result: H2loadResult): string {
  const names = result.servers.map((s) => s.name);
  const lean = result.servers.find((s) => s.name === 'sluice lean');
  const ref = result.servers.find((s) => s.name === 'reference');
  const noop = result.servers.find((s) => s.name === 'no-op grpc-js');
  const rows: string[][] = [];
  for (const shape of result.bounds.shapes) {
    const key = shapeKey(shape);
    const sat = (s: ServerFigures | undefined): Saturation | undefined => s?.saturation[key];
    rows.push([
      `${key} calls/s`,
      ...result.servers.map((s) => `${si(sat(s)!.callsPerSec)}/s`),
      ref ? ratio(sat(lean)!.callsPerSec, sat(ref)!.callsPerSec) : 'n/a',
      noop ? ratio(sat(lean)!.callsPerSec, sat(noop)!.callsPerSec) : 'n/a',
    ]);
    rows.push([
      `${key} server CPU/call, µs (core use)`,
      ...result.servers.map(
        (s) => `${sat(s)!.cpuUsPerCall.toFixed(1)} (${sat(s)!.cpuPct.toFixed(0)}%)`,
      ),
      ref ? ratio(sat(lean)!.cpuUsPerCall, sat(ref)!.cpuUsPerCall) : 'n/a',
      noop ? ratio(sat(lean)!.cpuUsPerCall, sat(noop)!.cpuUsPerCall) : 'n/a',
    ]);
    const failed = result.servers.filter((s) => sat(s)!.failed > 0);
    if (failed.length > 0) {
      rows.push([
        `${key} calls not succeeded`,
        ...result.servers.map((s) => String(sat(s)!.failed)),
        '',
        '',
      ]);
    }
  }
  const saturation = grid(['h2load, 1 descriptor', ...names, 'lean/reference', 'lean/no-op'], rows);
  const sweepRows: string[][] = [];
  const fractions = result.bounds.sweep;
  for (const fraction of fractions) {
    sweepRows.push([
      `${Math.round(fraction * 100)}% of own max`,
      ...result.servers.map((s) => {
        const p = s.sweep.find((q) => q.fraction === fraction);
        return p === undefined
          ? 'n/a'
          : `${si(p.achieved)}/s: ${p.p50Ms.toFixed(2)} / ${p.p99Ms.toFixed(2)} / ${p.p999Ms.toFixed(2)}`;
      }),
    ]);
  }
  const sweep = grid(
    [
      `fixed rate, ${shapeKey(result.bounds.latencyShape)}: calls/s: p50 / p99 / p99.9 ms`,
      ...names,
    ],
    sweepRows,
  );
  return `${saturation}\n\n${sweep}`;
}
