/**
 * The telemetry settings: stats sinks (statsd, DogStatsD, Prometheus on its own listener) and
 * OpenTelemetry tracing, under envoyproxy/ratelimit's variable names and defaults
 * (docs/operations-metrics.md, docs/operations-tracing.md).
 */
import { compileGoPattern, type Mogrifier, type Tag } from './metrics/statsd-format.js';
import { atLeast, type Reader } from './settings-reader.js';
import type { TracingSettings } from './tracing/tracing.js';

/** Where stats are pushed or served besides the HTTP port's `/metrics`. */
export type StatsSink = 'statsd' | 'dogstatsd' | 'prometheus' | 'none';

/** The stats settings. */
export interface StatsSettings {
  /**
   * The one sink on: `statsd` (`USE_STATSD`, on by default as in the reference), `dogstatsd`
   * (`USE_DOG_STATSD`), `prometheus` (`USE_PROMETHEUS`), or `none` (`DISABLE_STATS`, or all off).
   * The HTTP port's `/metrics` serves whichever is on.
   */
  readonly sink: StatsSink;
  /** `STATSD_HOST` (default `localhost`). */
  readonly statsdHost: string;
  /** `STATSD_PORT` (default 8125). */
  readonly statsdPort: number;
  /** `STATSD_PROTOCOL` (gostats' variable): `tcp` (default, as the reference) or `udp`; DogStatsD is always UDP. */
  readonly statsdProtocol: 'tcp' | 'udp';
  /** `STATS_FLUSH_INTERVAL` in ms (default `10s`): how often counters are pushed. */
  readonly flushIntervalMs: number;
  /** `EXTRA_TAGS` (`key:value,key:value`): added to every stat. */
  readonly extraTags: readonly Tag[];
  /** `USE_DOG_STATSD_MOGRIFIERS` and their `DOG_STATSD_MOGRIFIER_<NAME>_*` rules, in order. */
  readonly mogrifiers: readonly Mogrifier[];
  /** `PROMETHEUS_ADDR` host (default all interfaces; `undefined`). */
  readonly prometheusHost: string | undefined;
  /** `PROMETHEUS_ADDR` port (default 9090). */
  readonly prometheusPort: number;
  /** `PROMETHEUS_PATH` (default `/metrics`). */
  readonly prometheusPath: string;
  /** `PROMETHEUS_MAPPER_YAML`: accepted, and not applied (a warning at start says so). */
  readonly prometheusMapperYaml: string | undefined;
  /** `PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS`: the latency histogram in ms, not seconds. */
  readonly responseTimeAsMilliseconds: boolean;
}

/** The reference's one-sink rule, with what to change. */
const ONE_SINK =
  'only one stats sink can be on: set one of USE_DOG_STATSD, USE_STATSD, USE_PROMETHEUS ' +
  '(USE_STATSD is true unless set to false), or DISABLE_STATS=true for none';

/** Read the stats settings (problems go to `r`). */
export function statsSettings(r: Reader): StatsSettings {
  const disabled = r.bool('DISABLE_STATS', false);
  const dog = r.bool('USE_DOG_STATSD', false);
  const statsd = r.bool('USE_STATSD', true);
  const prometheus = r.bool('USE_PROMETHEUS', false);
  let sink: StatsSink = 'none';
  if (disabled) sink = 'none';
  else if (dog || statsd || prometheus) {
    const on = [
      ...(dog ? ['USE_DOG_STATSD=true'] : []),
      ...(statsd
        ? [`USE_STATSD=true${r.raw('USE_STATSD') === undefined ? ' (default)' : ''}`]
        : []),
      ...(prometheus ? ['USE_PROMETHEUS=true'] : []),
    ];
    if (on.length > 1) r.problems.push(`${on.join(' and ')}: ${ONE_SINK}`);
    sink = dog ? 'dogstatsd' : statsd ? 'statsd' : 'prometheus';
  }

  const protocolText = r.string('STATSD_PROTOCOL', 'tcp').toLowerCase();
  if (protocolText !== 'tcp' && protocolText !== 'udp') {
    r.problems.push(`STATSD_PROTOCOL=${JSON.stringify(protocolText)}: expected tcp or udp`);
  }
  const flushIntervalMs = atLeast(r, 'STATS_FLUSH_INTERVAL', 10_000);

  const addrText = r.string('PROMETHEUS_ADDR', ':9090');
  const addr = /^(.*):(\d{1,5})$/.exec(addrText);
  let prometheusHost: string | undefined;
  let prometheusPort = 9090;
  if (addr === null || Number(addr[2]) > 65535) {
    r.problems.push(
      `PROMETHEUS_ADDR=${JSON.stringify(addrText)}: expected host:port or :port, such as :9090`,
    );
  } else {
    const host = addr[1]!.replace(/^\[(.*)\]$/, '$1');
    prometheusHost = host === '' ? undefined : host;
    prometheusPort = Number(addr[2]);
  }
  const prometheusPath = r.string('PROMETHEUS_PATH', '/metrics');
  if (!prometheusPath.startsWith('/')) {
    r.problems.push(`PROMETHEUS_PATH=${JSON.stringify(prometheusPath)}: expected a path from /`);
  }

  // Checked whatever the sink; only DogStatsD applies them.
  const rules = mogrifiers(r);

  return {
    sink,
    statsdHost: r.string('STATSD_HOST', 'localhost'),
    statsdPort: r.int('STATSD_PORT', 8125, 1, 65535),
    statsdProtocol: protocolText === 'udp' ? 'udp' : 'tcp',
    flushIntervalMs,
    extraTags: tagMap(r, 'EXTRA_TAGS'),
    mogrifiers: sink === 'dogstatsd' ? rules : [],
    prometheusHost,
    prometheusPort,
    prometheusPath,
    prometheusMapperYaml: r.raw('PROMETHEUS_MAPPER_YAML'),
    responseTimeAsMilliseconds: r.bool('PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS', false),
  };
}

/** A `key:value,key:value` map as the reference's envconfig reads it (exactly one `:` each). */
function tagMap(r: Reader, name: string): Tag[] {
  const text = r.raw(name);
  if (text === undefined || text.trim() === '') return [];
  const tags: Tag[] = [];
  for (const pair of text.split(',')) {
    const parts = pair.split(':');
    if (parts.length !== 2) {
      r.problems.push(
        `${name}=${JSON.stringify(text)}: ${JSON.stringify(pair)} is not key:value (pairs are separated by commas, and neither part may hold a colon)`,
      );
      continue;
    }
    tags.push({ key: parts[0]!, value: parts[1]! });
  }
  return tags;
}

/** `USE_DOG_STATSD_MOGRIFIERS=A,B` and `DOG_STATSD_MOGRIFIER_A_PATTERN/_NAME/_TAGS`, ... */
function mogrifiers(r: Reader): Mogrifier[] {
  const list = r.raw('USE_DOG_STATSD_MOGRIFIERS');
  if (list === undefined || list.trim() === '') return [];
  const rules: Mogrifier[] = [];
  for (const label of list.split(',')) {
    const prefix = `DOG_STATSD_MOGRIFIER_${label}`;
    const patternText = r.raw(`${prefix}_PATTERN`);
    const name = r.raw(`${prefix}_NAME`);
    const tags = tagMap(r, `${prefix}_TAGS`);
    if (patternText === undefined) {
      r.problems.push(`${prefix}_PATTERN must be set (USE_DOG_STATSD_MOGRIFIERS names ${label})`);
      continue;
    }
    if (name === undefined) {
      r.problems.push(`${prefix}_NAME must be set (USE_DOG_STATSD_MOGRIFIERS names ${label})`);
      continue;
    }
    let pattern: RegExp;
    try {
      pattern = compileGoPattern(patternText);
    } catch (err) {
      r.problems.push(
        `${prefix}_PATTERN=${JSON.stringify(patternText)}: not a regular expression (${(err as Error).message})`,
      );
      continue;
    }
    if (tags.some((t) => t.key === '' || t.value === '')) {
      r.problems.push(`${prefix}_TAGS: every tag needs a key and a value`);
      continue;
    }
    rules.push({ label, pattern, name, tags });
  }
  return rules;
}

/**
 * Read the tracing settings; `undefined` unless `TRACING_ENABLED=true`. They are checked either
 * way, so a bad one stops the start before tracing is turned on.
 */
export function tracingSettings(r: Reader): TracingSettings | undefined {
  const enabled = r.bool('TRACING_ENABLED', false);
  const protocolText = r.string('TRACING_EXPORTER_PROTOCOL', 'http');
  if (protocolText !== 'http' && protocolText !== 'grpc') {
    r.problems.push(
      `TRACING_EXPORTER_PROTOCOL=${JSON.stringify(protocolText)}: expected http or grpc`,
    );
  }
  const rateText = r.raw('TRACING_SAMPLING_RATE');
  let samplingRate = 1;
  if (rateText !== undefined) {
    const value = Number(rateText.trim());
    if (rateText.trim() === '' || !Number.isFinite(value)) {
      r.problems.push(
        `TRACING_SAMPLING_RATE=${JSON.stringify(rateText)}: expected a number (0 to 1)`,
      );
    } else samplingRate = Math.min(1, Math.max(0, value));
  }
  if (!enabled) return undefined;
  return {
    protocol: protocolText === 'grpc' ? 'grpc' : 'http',
    serviceName: r.string('TRACING_SERVICE_NAME', 'RateLimit'),
    serviceNamespace: r.string('TRACING_SERVICE_NAMESPACE', ''),
    serviceInstanceId: r.raw('TRACING_SERVICE_INSTANCE_ID'),
    samplingRate,
  };
}
