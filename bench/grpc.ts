/**
 * Row 2: end-to-end ShouldRateLimit over loopback. The server runs in a child process (the real
 * CLI, `node dist/main.js serve`, with its default gRPC server, lean; bench/noop-server.ts for
 * the baseline), so client
 * and server do not share an event loop. This process is the client: @grpc/grpc-js, a fixed
 * number of calls in flight over a few connections (closed loop: each completed call issues the
 * next), requests serialized once up front and responses left undecoded, to keep the client's
 * share of the CPU small.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { RateLimitRequest } from '../src/model.js';
import type { Sluice } from './dist.js';
import { ms, percentile, ratio, si, type Row } from './report.js';
import { cpuMs, startNoop, startSluice, type BenchServer } from './servers.js';
import { fourRequest, ipRequest, toWire } from './workloads.js';

/** Bounds and shape of the load. */
export interface GrpcBounds {
  /** Client channels per server, each its own HTTP/2 connection. */
  readonly connections: number;
  /** Calls in flight at any time, spread evenly over the connections. */
  readonly inFlight: number;
  /** Load on each fresh server before any measurement (JIT, counters created), ms. */
  readonly warmupMs: number;
  /** Load before each measurement window, not measured (back to a steady flow), ms. */
  readonly leadMs: number;
  /** One measurement window, ms. */
  readonly measureMs: number;
  /** Most calls measured in one window (the window ends early when reached). */
  readonly maxCalls: number;
  /** Distinct requests (client addresses) cycled through. */
  readonly keys: number;
  /**
   * Measurement windows per server and shape, alternating no-op and sluice (both servers stay up,
   * only one is loaded at a time) so drift hits both alike. Figures pool all windows' calls.
   */
  readonly rounds: number;
}

/** Rows for the table and context lines printed under it. */
export interface GrpcResult {
  readonly rows: Row[];
  readonly notes: string[];
}

const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
/** How long a server may take to start, and calls to drain after a window, ms. */
const SETTLE_MS = 10_000;

interface Shape {
  readonly id: string;
  readonly label: string;
  readonly build: (i: number) => RateLimitRequest;
}

const SHAPES: readonly Shape[] = [
  { id: '2a', label: '1 descriptor', build: ipRequest },
  { id: '2b', label: '4 descriptors', build: fourRequest },
];

/** What one measurement window saw. */
interface Run {
  /** Latency of every call completed in the window, ms. */
  readonly latencies: Float64Array;
  /** Length of the window, ms. */
  readonly windowMs: number;
  /** Server process CPU (user + system, all threads) in the window, ms; NaN if unreadable. */
  readonly serverCpuMs: number;
  /** This (client) process's CPU in the window, ms. */
  readonly clientCpuMs: number;
  /** Sum of the encoded response sizes in the window, bytes. */
  readonly responseBytes: number;
}

/** The windows of one server on one shape, pooled. */
interface Pooled {
  readonly callsPerSec: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  /** Server CPU per call, µs. */
  readonly serverCpuUsPerCall: number;
  /** Server CPU as a share of one core, %. */
  readonly serverCpuPct: number;
  /** Client CPU as a share of one core, %. */
  readonly clientCpuPct: number;
  /** Mean encoded response size, bytes. */
  readonly responseBytes: number;
}

function pool(runs: readonly Run[]): Pooled {
  let calls = 0;
  let windowMs = 0;
  let serverCpuMs = 0;
  let clientCpuMs = 0;
  let responseBytes = 0;
  for (const run of runs) {
    calls += run.latencies.length;
    windowMs += run.windowMs;
    serverCpuMs += run.serverCpuMs;
    clientCpuMs += run.clientCpuMs;
    responseBytes += run.responseBytes;
  }
  const sorted = new Float64Array(calls);
  let at = 0;
  for (const run of runs) {
    sorted.set(run.latencies, at);
    at += run.latencies.length;
  }
  sorted.sort();
  return {
    callsPerSec: calls / (windowMs / 1000),
    p50: percentile(sorted, calls, 50),
    p90: percentile(sorted, calls, 90),
    p99: percentile(sorted, calls, 99),
    serverCpuUsPerCall: (serverCpuMs * 1000) / calls,
    serverCpuPct: (serverCpuMs / windowMs) * 100,
    clientCpuPct: (clientCpuMs / windowMs) * 100,
    responseBytes: responseBytes / Math.max(1, calls),
  };
}

/** A running server, the client channels connected to it, and what to send. */
interface Target {
  readonly server: BenchServer;
  readonly clients: readonly grpc.Client[];
  readonly requests: readonly Buffer[];
  /** Calls to keep in flight, spread over `clients`. */
  readonly inFlight: number;
  /** Throws when a (decoded) response is not what the shape must get. */
  readonly check: (response: Buffer) => void;
}

/**
 * `BENCH_TRACING=1` adds a third server per shape: sluice (lean) with `TRACING_ENABLED=true` at
 * sampling rate 1, exporting over OTLP/HTTP to a local sink that accepts every batch, and a row
 * comparing its calls/s with tracing off.
 */
const TRACING = process.env.BENCH_TRACING === '1';

/** An OTLP/HTTP endpoint in this process that reads each export and answers 200. */
async function startOtlpSink(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Measure both shapes against both servers. */
export async function benchGrpc(
  sluice: Sluice,
  rulesDir: string,
  bounds: GrpcBounds,
): Promise<GrpcResult> {
  const definition = sluice.proto.rlsServiceDefinition(sluice.proto.loadRlsPackage());
  const method = definition.ShouldRateLimit!;

  // The no-op server answers what sluice answers for the same request (same encoded size).
  const settings = sluice.settings.loadSettings({ USE_STATSD: 'false' }, { config: [rulesDir] });
  const app = await sluice.app.createApp({
    settings,
    logger: sluice.logger.silentLogger(),
    watch: false,
  });
  const fixed: Record<string, unknown> = {};
  for (const shape of SHAPES) {
    const req = shape.build(0);
    fixed[req.descriptors.length] = sluice.mapping.responseToWire(
      await app.service.shouldRateLimit(req),
    );
  }
  await app.close();

  const rows: Row[] = [];
  const notes: string[] = [];
  for (const shape of SHAPES) {
    const requests: Buffer[] = [];
    for (let i = 0; i < bounds.keys; i++) {
      requests.push(method.requestSerialize(toWire(shape.build(i))));
    }
    const expected = shape.build(0).descriptors.length;
    const check = (bytes: Buffer): void => {
      const res = method.responseDeserialize(bytes) as { overall_code?: string; statuses?: [] };
      if (res.overall_code !== 'OK' || res.statuses?.length !== expected) {
        throw new Error(`${shape.id}: unexpected response ${JSON.stringify(res)}`);
      }
    };

    const servers: BenchServer[] = [];
    const clients: grpc.Client[] = [];
    const target = async (server: BenchServer): Promise<Target> => {
      servers.push(server);
      const own = await connect(server.port, bounds.connections);
      clients.push(...own);
      return { server, clients: own, requests, inFlight: bounds.inFlight, check };
    };
    const noopRuns: Run[] = [];
    const sluiceRuns: Run[] = [];
    const tracedRuns: Run[] = [];
    const sink = TRACING ? await startOtlpSink() : undefined;
    try {
      const noop = await target(await startNoop(fixed));
      const real = await target(await startSluice('lean', rulesDir));
      const traced =
        sink === undefined
          ? undefined
          : await target(
              await startSluice('lean', rulesDir, {
                env: {
                  TRACING_ENABLED: 'true',
                  TRACING_SAMPLING_RATE: '1',
                  OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
                },
              }),
            );
      await load(noop, bounds.warmupMs, 0, bounds.maxCalls);
      await load(real, bounds.warmupMs, 0, bounds.maxCalls);
      if (traced !== undefined) await load(traced, bounds.warmupMs, 0, bounds.maxCalls);
      for (let r = 0; r < bounds.rounds; r++) {
        noopRuns.push(await load(noop, bounds.leadMs, bounds.measureMs, bounds.maxCalls));
        sluiceRuns.push(await load(real, bounds.leadMs, bounds.measureMs, bounds.maxCalls));
        if (traced !== undefined) {
          tracedRuns.push(await load(traced, bounds.leadMs, bounds.measureMs, bounds.maxCalls));
        }
      }
    } finally {
      for (const client of clients) client.close();
      await Promise.all(servers.map((s) => s.stop()));
      await sink?.close();
    }

    const noop = pool(noopRuns);
    const real = pool(sluiceRuns);
    const what = `gRPC ShouldRateLimit, ${shape.label}`;
    rows.push(
      {
        id: shape.id,
        what: `${what}: calls/s`,
        sluice: `${si(real.callsPerSec)}/s`,
        baseline: `${si(noop.callsPerSec)}/s`,
        ratio: ratio(real.callsPerSec, noop.callsPerSec),
      },
      {
        id: shape.id,
        what: `${what}: latency p50 / p90 / p99, ms`,
        sluice: `${ms(real.p50)} / ${ms(real.p90)} / ${ms(real.p99)}`,
        baseline: `${ms(noop.p50)} / ${ms(noop.p90)} / ${ms(noop.p99)}`,
        ratio: `${ratio(real.p50, noop.p50)} / ${ratio(real.p90, noop.p90)} / ${ratio(real.p99, noop.p99)}`,
      },
      {
        id: shape.id,
        what: `${what}: server CPU per call, µs (core use)`,
        sluice: cpuCell(real),
        baseline: cpuCell(noop),
        ratio: ratio(real.serverCpuUsPerCall, noop.serverCpuUsPerCall),
      },
    );
    if (tracedRuns.length > 0) {
      const traced = pool(tracedRuns);
      rows.push({
        id: shape.id,
        what: `${what}: calls/s with tracing on (sampling 1) vs off`,
        sluice: `${si(traced.callsPerSec)}/s`,
        baseline: `${si(real.callsPerSec)}/s`,
        ratio: ratio(traced.callsPerSec, real.callsPerSec),
      });
    }
    notes.push(
      `${shape.id}: request ${requests[0]!.length} B; response ${real.responseBytes.toFixed(0)} B ` +
        `(sluice) vs ${noop.responseBytes.toFixed(0)} B (no-op); client process CPU ` +
        `${real.clientCpuPct.toFixed(0)}% (vs sluice) and ${noop.clientCpuPct.toFixed(0)}% ` +
        `(vs no-op) of one core`,
    );
  }
  return { rows, notes };
}

function cpuCell(r: Pooled): string {
  if (!Number.isFinite(r.serverCpuUsPerCall)) return 'n/a';
  return `${r.serverCpuUsPerCall.toFixed(1)} (${r.serverCpuPct.toFixed(0)}%)`;
}

/** `connections` ready client channels to 127.0.0.1:`port`, each with its own connection. */
async function connect(port: number, connections: number): Promise<grpc.Client[]> {
  const clients: grpc.Client[] = [];
  try {
    for (let c = 0; c < connections; c++) {
      // A local subchannel pool keeps channels from sharing one connection.
      const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
        'grpc.use_local_subchannel_pool': 1,
      });
      clients.push(client);
      await new Promise<void>((resolve, reject) =>
        client.waitForReady(Date.now() + SETTLE_MS, (err) => (err ? reject(err) : resolve())),
      );
    }
    return clients;
  } catch (error) {
    for (const client of clients) client.close();
    throw error;
  }
}

/**
 * Keep `inFlight` calls going against `target` (closed loop, requests round-robin) for `leadMs`,
 * then measure for `measureMs` (or until `maxCalls` calls), then let the calls in flight finish.
 * With `measureMs` 0 it only loads the server (warm-up) and returns an empty run.
 */
function load(target: Target, leadMs: number, measureMs: number, maxCalls: number): Promise<Run> {
  const { server, clients, requests, check } = target;
  const identity = (b: Buffer): Buffer => b;
  const latencies = new Float64Array(measureMs > 0 ? maxCalls : 0);
  let measured = 0;
  let measuring = false;
  let stopping = false;
  let inFlight = 0;
  let next = 0;
  let responseBytes = 0;
  let failure: Error | undefined;
  let checked = false;
  let windowStart = 0;
  let windowEnd = 0;
  let clientCpu = process.cpuUsage();
  let serverCpu = NaN;
  let clientCpuMs = 0;
  let serverCpuMs = NaN;
  let leadTimer: NodeJS.Timeout | undefined;
  let endTimer: NodeJS.Timeout | undefined;
  let drainTimer: NodeJS.Timeout | undefined;

  return new Promise<Run>((resolve, reject) => {
    const finish = (error?: Error): void => {
      clearTimeout(leadTimer);
      clearTimeout(endTimer);
      clearTimeout(drainTimer);
      const err = error ?? failure;
      if (err !== undefined) {
        reject(err);
        return;
      }
      resolve({
        latencies: latencies.slice(0, measured),
        windowMs: windowEnd - windowStart,
        serverCpuMs,
        clientCpuMs,
        responseBytes,
      });
    };

    /** Stop issuing calls; fail if the ones in flight do not come back in time. */
    const beginStop = (): void => {
      if (stopping) return;
      stopping = true;
      drainTimer = setTimeout(
        () => finish(new Error(`${inFlight} calls still in flight ${SETTLE_MS} ms after the end`)),
        SETTLE_MS,
      );
    };

    const startWindow = (): void => {
      if (stopping) return;
      if (measureMs <= 0) {
        beginStop();
        return;
      }
      measuring = true;
      windowStart = performance.now();
      clientCpu = process.cpuUsage();
      serverCpu = cpuMs(server.pids);
      endTimer = setTimeout(endWindow, measureMs);
    };

    const endWindow = (): void => {
      if (!measuring) return;
      measuring = false;
      windowEnd = performance.now();
      const cpu = process.cpuUsage(clientCpu);
      clientCpuMs = (cpu.user + cpu.system) / 1000;
      serverCpuMs = cpuMs(server.pids) - serverCpu;
      beginStop();
    };

    const issue = (client: grpc.Client): void => {
      if (stopping) {
        inFlight--;
        if (inFlight === 0) finish();
        return;
      }
      const request = requests[next]!;
      next = next + 1 === requests.length ? 0 : next + 1;
      const started = performance.now();
      client.makeUnaryRequest(METHOD, identity, identity, request, (err, response) => {
        const took = performance.now() - started;
        if (err) {
          failure ??= new Error(`ShouldRateLimit failed: ${err.message}`);
          beginStop();
        } else if (response !== undefined) {
          if (!checked) {
            checked = true;
            try {
              check(response);
            } catch (error) {
              failure ??= error instanceof Error ? error : new Error(String(error));
              beginStop();
            }
          }
          if (measuring) {
            latencies[measured++] = took;
            responseBytes += response.length;
            if (measured === maxCalls) endWindow();
          }
        }
        issue(client);
      });
    };

    for (let k = 0; k < target.inFlight; k++) {
      inFlight++;
      issue(clients[k % clients.length]!);
    }
    leadTimer = setTimeout(startWindow, leadMs);
  });
}
