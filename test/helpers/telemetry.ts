/**
 * Real telemetry receivers for the telemetry suites: prom/statsd_exporter (statsd and DogStatsD
 * in, Prometheus text out) and Jaeger v2 (OTLP in, its query API out), installed by `.ci/run`
 * into the git-ignored .cache/go-bin. A missing binary skips the suite with a visible reason
 * locally and fails it under CI (see `inCi`).
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, WaitAborted, freePort, waitFor, type ProcessGroup } from './processes.js';
import { fileAt, requireBinaries, type Requirement } from './require-binaries.js';

/** The binaries and how `.ci/run` installs them. */
export const TELEMETRY_BINARIES = {
  statsd_exporter: {
    path:
      process.env['STATSD_EXPORTER_BIN'] ??
      path.join(REPO_ROOT, '.cache', 'go-bin', 'statsd_exporter'),
    install: 'bash scripts/install-telemetry-tools.sh',
  },
  jaeger: {
    path: process.env['JAEGER_BIN'] ?? path.join(REPO_ROOT, '.cache', 'go-bin', 'jaeger'),
    install: 'bash scripts/install-telemetry-tools.sh',
  },
} as const;

/** The telemetry tool `name` at its pinned path, by {@link requireBinaries}. */
export function requireTelemetryBinary(
  suite: string,
  name: keyof typeof TELEMETRY_BINARIES,
): Requirement {
  const binary = TELEMETRY_BINARIES[name];
  return requireBinaries(suite, [
    { name, missing: () => fileAt(binary.path), install: binary.install },
  ]);
}

/** A running statsd_exporter. */
export interface StatsdExporter {
  /** Its statsd port (TCP and UDP) on 127.0.0.1. */
  readonly statsdPort: number;
  /** Its Prometheus text, `ratelimit_*` samples only, as `name{labels}` -> value. */
  samples(): Promise<Map<string, number>>;
}

/** Start statsd_exporter with `mappingFile` on free loopback ports (or on `statsdPort`). */
export async function startStatsdExporter(
  group: ProcessGroup,
  mappingFile: string,
  port?: number,
): Promise<StatsdExporter> {
  const statsdPort = port ?? (await freePort());
  const webPort = await freePort();
  const proc = group.spawn('statsd_exporter', TELEMETRY_BINARIES.statsd_exporter.path, [
    `--statsd.listen-udp=127.0.0.1:${statsdPort}`,
    `--statsd.listen-tcp=127.0.0.1:${statsdPort}`,
    `--web.listen-address=127.0.0.1:${webPort}`,
    `--statsd.mapping-config=${mappingFile}`,
  ]);
  const scrape = async (): Promise<string> => {
    const res = await fetch(`http://127.0.0.1:${webPort}/metrics`);
    return res.text();
  };
  await waitFor(
    'statsd_exporter',
    async () => {
      if (proc.hasExited()) throw new WaitAborted(`statsd_exporter exited:\n${proc.output()}`);
      return (await scrape()).length > 0;
    },
    { timeoutMs: 10_000 },
  );
  return {
    statsdPort,
    async samples() {
      return parseSamples(await scrape(), 'ratelimit_');
    },
  };
}

/** Prometheus text samples whose name starts with `prefix`, as `name{labels}` -> value. */
export function parseSamples(text: string, prefix: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const at = line.lastIndexOf(' ');
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/** A running Jaeger v2 (all in one, in-memory storage). */
export interface Jaeger {
  /** OTLP/HTTP base URL (`http://127.0.0.1:port`). */
  readonly otlpHttp: string;
  /** OTLP/gRPC endpoint (`http://127.0.0.1:port`). */
  readonly otlpGrpc: string;
  /** The spans of one trace from the query API (empty while it is unknown). */
  trace(traceIdHex: string): Promise<JaegerSpan[]>;
}

/** A span as Jaeger's v1 query API returns it (the fields the tests read). */
export interface JaegerSpan {
  readonly traceID: string;
  readonly spanID: string;
  readonly operationName: string;
  readonly references: readonly { refType: string; traceID: string; spanID: string }[];
  readonly tags: readonly { key: string; value: unknown }[];
  readonly processID: string;
}

/** Start Jaeger v2 with OTLP receivers and the query API on free loopback ports. */
export async function startJaeger(group: ProcessGroup): Promise<Jaeger> {
  const [grpcPort, httpPort, queryPort, grpcQueryPort, healthPort, metricsPort] = await Promise.all(
    [freePort(), freePort(), freePort(), freePort(), freePort(), freePort()],
  );
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-jaeger-'));
  const config = path.join(dir, 'config.yaml');
  await fs.writeFile(
    config,
    [
      'service:',
      '  extensions: [jaeger_storage, jaeger_query, healthcheckv2]',
      '  pipelines:',
      '    traces:',
      '      receivers: [otlp]',
      '      processors: [batch]',
      '      exporters: [jaeger_storage_exporter]',
      '  telemetry:',
      '    resource:',
      '      service.name: jaeger',
      '    metrics:',
      '      level: none',
      '    logs:',
      '      level: warn',
      'extensions:',
      '  healthcheckv2:',
      '    use_v2: true',
      '    http:',
      `      endpoint: 127.0.0.1:${healthPort}`,
      '  jaeger_query:',
      '    storage:',
      '      traces: memstore',
      '    http:',
      `      endpoint: 127.0.0.1:${queryPort}`,
      '    grpc:',
      `      endpoint: 127.0.0.1:${grpcQueryPort}`,
      '  jaeger_storage:',
      '    backends:',
      '      memstore:',
      '        memory:',
      '          max_traces: 10000',
      'receivers:',
      '  otlp:',
      '    protocols:',
      '      grpc:',
      `        endpoint: 127.0.0.1:${grpcPort}`,
      '      http:',
      `        endpoint: 127.0.0.1:${httpPort}`,
      'processors:',
      '  batch:',
      '    timeout: 100ms',
      'exporters:',
      '  jaeger_storage_exporter:',
      '    trace_storage: memstore',
      '',
    ].join('\n'),
  );
  void metricsPort;
  const proc = group.spawn('jaeger', TELEMETRY_BINARIES.jaeger.path, ['--config', config]);
  group.onCleanup(() => fs.rm(dir, { recursive: true, force: true }));
  await waitFor(
    'jaeger',
    async () => {
      if (proc.hasExited()) throw new WaitAborted(`jaeger exited:\n${proc.output()}`);
      const res = await fetch(`http://127.0.0.1:${queryPort}/api/services`);
      return res.ok;
    },
    { timeoutMs: 30_000, onTimeout: () => proc.output() },
  );
  return {
    otlpHttp: `http://127.0.0.1:${httpPort}`,
    otlpGrpc: `http://127.0.0.1:${grpcPort}`,
    async trace(traceIdHex) {
      const res = await fetch(`http://127.0.0.1:${queryPort}/api/traces/${traceIdHex}`);
      if (!res.ok) return [];
      const body = (await res.json()) as { data?: { spans: JaegerSpan[] }[] };
      return body.data?.[0]?.spans ?? [];
    },
  };
}
