/**
 * The statsd and DogStatsD sinks (`USE_STATSD`, `USE_DOG_STATSD`): every `STATS_FLUSH_INTERVAL`
 * the counters' growth since the last flush and a bounded sample of latencies go out in a few
 * packets, under the reference's statsd names (docs/operations-metrics.md). Nothing is sent per
 * call: the hot path only adds to the plain numbers of metrics.ts and writes one latency into a
 * fixed-size reservoir.
 *
 * The line protocol is written here (statsd-format.ts) rather than through a client library: the
 * names must carry `EXTRA_TAGS` the way lyft/gostats does (`name.__key=value`), the counters are
 * already aggregated in process, and growth that could not be sent is kept for the next flush,
 * which a per-call client API does not offer.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import type { Logger } from '../logging/logger.js';
import type { Metrics } from './metrics.js';
import { RULE_SERIES, type RuleStats } from './rule-series.js';
import { RLQS_STATSD } from './rlqs-metrics.js';
import { formatLine, safeStatsKey, tagSuffix, type Mogrifier, type Tag } from './statsd-format.js';

/** Latencies of one flush interval, at most `capacity` of them, chosen uniformly (Algorithm R). */
export interface LatencyReservoir {
  /** Record one latency, seconds. Constant time, no allocation. */
  add(seconds: number): void;
  /**
   * The kept latencies (seconds) and the share of all latencies they represent (1 when every one
   * was kept), then start a new interval.
   */
  drain(): { samples: Float64Array; rate: number };
}

/** A reservoir of `capacity` latencies per interval (default 1000). */
export function createLatencyReservoir(capacity = 1000): LatencyReservoir {
  const kept = new Float64Array(capacity);
  let seen = 0;
  return {
    add(seconds) {
      if (seen < capacity) kept[seen] = seconds;
      else {
        const j = Math.floor(Math.random() * (seen + 1));
        if (j < capacity) kept[j] = seconds;
      }
      seen++;
    },
    drain() {
      const n = Math.min(seen, capacity);
      const rate = seen <= capacity ? 1 : capacity / seen;
      const samples = kept.slice(0, n);
      seen = 0;
      return { samples, rate };
    },
  };
}

/** Options for {@link createStatsdSink}. */
export interface StatsdSinkOptions {
  /** The counters to push. */
  readonly metrics: Metrics;
  /** The latencies the metrics hand over (`MetricsOptions.latencyTap`). */
  readonly latencies: LatencyReservoir;
  /** `STATSD_HOST`. */
  readonly host: string;
  /** `STATSD_PORT`. */
  readonly port: number;
  /** `STATSD_PROTOCOL`: `tcp` (the reference's) or `udp`. */
  readonly protocol: 'tcp' | 'udp';
  /** `STATS_FLUSH_INTERVAL`, ms. */
  readonly flushIntervalMs: number;
  /** `EXTRA_TAGS`. */
  readonly extraTags: readonly Tag[];
  /** DogStatsD format with these mogrifiers; `undefined`: plain statsd. */
  readonly dogstatsd?: { readonly mogrifiers: readonly Mogrifier[] } | undefined;
  /** Module logger: one line per change of reachability, never per flush. */
  readonly logger: Logger;
}

/** A running sink. */
export interface StatsdSink {
  /** Push what grew since the last flush now (the timer calls it every interval). */
  flush(): void;
  /** Stop the timer, push a last time, close the socket. */
  close(): Promise<void>;
}

/** Longest wait for the TCP connection to close at shutdown, ms. */
const CLOSE_TIMEOUT_MS = 1_000;

/** Unsent TCP bytes above which a flush waits for the peer to read (growth is kept). */
const TCP_BACKLOG_BYTES = 4 * 1024 * 1024;

/** A datagram holds whole lines up to this many bytes (gostats' size, no IP fragmentation). */
const UDP_PAYLOAD_BYTES = 1432;

/**
 * The reference's service-wide statsd names (gostats scopes `ratelimit.service` and
 * `ratelimit_server`) with how each is read from sluice's counters.
 */
const SERVICE_STATS: readonly (readonly [string, (m: Metrics) => number])[] = [
  ['ratelimit.service.config_load_success', (m) => m.service.configLoadSuccess],
  ['ratelimit.service.config_load_error', (m) => m.service.configLoadError],
  ['ratelimit.service.global_shadow_mode', (m) => m.service.globalShadowMode],
  ['ratelimit.service.call.should_rate_limit.redis_error', (m) => m.service.storeErrors],
  ['ratelimit.service.call.should_rate_limit.service_error', (m) => m.service.serviceErrors],
  [
    'ratelimit_server.ShouldRateLimit.total_requests',
    (m) =>
      m.service.callsOk +
      m.service.callsOverLimit +
      m.service.serviceErrors +
      m.service.storeErrors +
      m.service.internalErrors,
  ],
];

/** The timer the reference's gRPC interceptor feeds, in ms. */
const RESPONSE_TIME = 'ratelimit_server.ShouldRateLimit.response_time';

/**
 * The lines of one flush: counters that grew since `sent` (updated only through `commit`), then
 * the sampled latencies. Exported for tests.
 */
export function collectLines(
  metrics: Metrics,
  sent: Map<string, number>,
  latencies: { samples: Float64Array; rate: number },
  suffix: string,
  dog: { readonly mogrifiers: readonly Mogrifier[] } | undefined,
): { lines: string[]; commit: () => void } {
  const lines: string[] = [];
  const updates: [string, number][] = [];
  // `sent` is keyed by the unsanitised name: two keys that sanitise alike still count apart.
  const counter = (id: string, name: string, value: number): void => {
    const delta = value - (sent.get(id) ?? 0);
    if (delta <= 0) return;
    lines.push(formatLine(name + suffix, delta, 'c', 1, dog));
    updates.push([id, value]);
  };
  const rules: Iterable<RuleStats> = metrics.rules();
  for (const stats of rules) {
    // Request values are in the key: made safe for the line format once per key and flush, and
    // only for keys that grew.
    let safeKey: string | undefined;
    for (const [stat, field] of RULE_SERIES) {
      const id = `${stats.key}\n${stat}`;
      if (stats[field] <= (sent.get(id) ?? 0)) continue;
      safeKey ??= safeStatsKey(stats.key);
      counter(id, `ratelimit.service.rate_limit.${safeKey}.${stat}`, stats[field]);
    }
  }
  for (const [name, read] of SERVICE_STATS) counter(name, name, read(metrics));
  for (const [name, read] of RLQS_STATSD) counter(name, name, read(metrics.rlqs));
  const rate = latencies.rate;
  for (const seconds of latencies.samples) {
    const ms = Number((seconds * 1000).toFixed(3));
    lines.push(formatLine(RESPONSE_TIME + suffix, ms, 'ms', Number(rate.toPrecision(6)), dog));
  }
  return {
    lines,
    commit() {
      for (const [name, value] of updates) sent.set(name, value);
    },
  };
}

/** Start pushing `options.metrics` to statsd (or DogStatsD) every flush interval. */
export function createStatsdSink(options: StatsdSinkOptions): StatsdSink {
  const { metrics, latencies, host, port, protocol, logger } = options;
  const suffix = tagSuffix(options.extraTags);
  const sent = new Map<string, number>();
  let reachable = true;
  const unreachable = (err: Error): void => {
    if (!reachable) return;
    reachable = false;
    logger.warn(
      { err: err.message, host, port, protocol },
      'statsd is unreachable; counts are kept and sent once it answers ' +
        '(USE_STATSD is on by default, as in the reference; USE_STATSD=false turns it off)',
    );
  };
  const reached = (): void => {
    if (reachable) return;
    reachable = true;
    logger.info({ host, port, protocol }, 'statsd reachable again');
  };

  let udp: dgram.Socket | undefined;
  // Datagrams handed to the socket and not yet sent; close waits for them.
  let udpSending = 0;
  const udpIdle: (() => void)[] = [];
  let tcp: net.Socket | undefined;
  let tcpReady = false;
  const connectTcp = (): void => {
    if (tcp !== undefined) return;
    const socket = net.connect({ host, port });
    tcp = socket;
    socket.setNoDelay(true);
    socket.on('connect', () => {
      tcpReady = true;
      reached();
    });
    socket.on('error', unreachable);
    socket.on('close', () => {
      tcpReady = false;
      if (tcp === socket) tcp = undefined;
    });
    socket.unref();
  };
  if (protocol === 'udp') {
    udp = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    udp.on('error', unreachable);
    udp.unref();
  } else connectTcp();

  const send = (lines: string[]): boolean => {
    if (udp !== undefined) {
      let packet = '';
      let bytes = 0;
      const out = (text: string): void => {
        udpSending++;
        udp.send(text, port, host, (err) => {
          udpSending--;
          if (err) unreachable(err);
          else reached();
          if (udpSending === 0) for (const done of udpIdle.splice(0)) done();
        });
      };
      for (const line of lines) {
        const size = Buffer.byteLength(line) + 1;
        if (bytes > 0 && bytes + size > UDP_PAYLOAD_BYTES) {
          out(packet);
          packet = '';
          bytes = 0;
        }
        packet += `${line}\n`;
        bytes += size;
      }
      if (packet.length > 0) out(packet);
      return true;
    }
    if (!tcpReady || tcp === undefined) {
      connectTcp();
      return false;
    }
    // A peer that stopped reading: keep the growth for later rather than buffer without bound.
    if (tcp.writableLength > TCP_BACKLOG_BYTES) return false;
    tcp.write(lines.join('\n') + '\n');
    return true;
  };

  const flush = (): void => {
    const batch = collectLines(metrics, sent, latencies.drain(), suffix, options.dogstatsd);
    if (batch.lines.length === 0) return;
    if (send(batch.lines)) batch.commit();
  };
  const timer = setInterval(flush, options.flushIntervalMs);
  timer.unref();

  return {
    flush,
    async close() {
      clearInterval(timer);
      flush();
      if (udp !== undefined) {
        const socket = udp;
        if (udpSending > 0) await new Promise<void>((resolve) => udpIdle.push(resolve));
        await new Promise<void>((resolve) => socket.close(() => resolve()));
      }
      if (tcp !== undefined) {
        const socket = tcp;
        // Bounded: a peer that never acknowledges must not hold the shutdown.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            socket.destroy();
            resolve();
          }, CLOSE_TIMEOUT_MS);
          timer.unref();
          socket.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
          socket.end();
        });
      }
    },
  };
}
