/**
 * The stats sinks against real receivers: statsd into prom/statsd_exporter with a mapping in
 * Envoy Gateway's style (the counters the reference produces for the same calls), DogStatsD tags
 * read from the UDP payloads, and Prometheus on PROMETHEUS_ADDR against the HTTP port's /metrics.
 */
import dgram from 'node:dgram';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, type App, type AppAddresses } from '../../src/app.js';
import { createLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
import { LOOPBACK_LISTENERS, capturingLogger, ruleDir } from '../helpers/app.js';
import {
  REPO_ROOT,
  freePort,
  serverUnderTest,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { redisBackendEnv, startRedis } from '../helpers/redis.js';
import { parseSamples, requireTelemetryBinary, startStatsdExporter } from '../helpers/telemetry.js';

const MAPPING = path.join(REPO_ROOT, 'test', 'fixtures', 'statsd', 'mapping.yaml');

const RULES = `domain: telemetry
descriptors:
  - key: api_key
    rate_limit: { unit: hour, requests_per_unit: 3 }
  - key: path
    descriptors:
      - key: method
        rate_limit: { unit: hour, requests_per_unit: 10 }
  - key: user
    detailed_metric: true
    rate_limit: { unit: hour, requests_per_unit: 100 }
`;

/** Five calls of two descriptors (the third limit of 3 reached on the fourth), one invalid. */
const CALLS = [
  ...Array.from({ length: 5 }, () =>
    rlsRequest('telemetry', [{ api_key: 'k1' }, { path: '/a', method: 'GET' }]),
  ),
  rlsRequest('', []),
];

/**
 * What statsd_exporter showed for CALLS sent to the reference (envoyproxy/ratelimit master, Redis
 * backend, USE_STATSD=true over TCP, this mapping), recorded 2026-11-24; the timing samples of
 * the response-time histogram are left out (they depend on the machine), its count is kept.
 */
const REFERENCE_FIGURES: Record<string, number> = {
  ratelimit_service_config_load_success: 1,
  'ratelimit_service_rate_limit_near_limit{domain="telemetry",key1="api_key"}': 1,
  'ratelimit_service_rate_limit_over_limit{domain="telemetry",key1="api_key"}': 2,
  'ratelimit_service_rate_limit_total_hits{domain="telemetry",key1="api_key"}': 5,
  'ratelimit_service_rate_limit_total_hits{domain="telemetry",key1="path",key2="method"}': 5,
  'ratelimit_service_rate_limit_within_limit{domain="telemetry",key1="api_key"}': 3,
  'ratelimit_service_rate_limit_within_limit{domain="telemetry",key1="path",key2="method"}': 5,
  'ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"}': 6,
  'ratelimit_service_should_rate_limit_error{err_type="service_error"}': 1,
  'ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}': 6,
};

/** The samples the comparison reads: everything but the timing-dependent histogram parts. */
function comparable(samples: Map<string, number>): Record<string, number> {
  return Object.fromEntries(
    [...samples].filter(
      ([name]) =>
        !name.startsWith('ratelimit_service_response_time_seconds_bucket') &&
        !name.startsWith('ratelimit_service_response_time_seconds_sum'),
    ),
  );
}

const silent = () => createLogger({ level: 'fatal', format: 'json' });

const running: App[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((app) => app.close()));
});

/** Start sluice on free loopback ports with `env`, serving RULES. */
async function start(
  env: Record<string, string>,
  logger = silent(),
): Promise<{ app: App } & AppAddresses> {
  const dir = await ruleDir({ 'telemetry.yaml': RULES });
  const settings = loadSettings(
    {
      ...LOOPBACK_LISTENERS,
      DEFAULT_ALGORITHM: 'fixed_window',
      ...serverUnderTest(),
      ...env,
    },
    { config: [dir] },
  );
  const app = await createApp({ settings, logger, watch: false });
  running.push(app);
  return { app, ...(await app.start()) };
}

async function sendCalls(grpcAddress: string): Promise<void> {
  const client = createEnvoyRlsClient(grpcAddress);
  try {
    for (const request of CALLS) await client.shouldRateLimit(request).catch(() => undefined);
  } finally {
    client.close();
  }
}

const REFERENCE_BIN = [
  // As the differential tier finds it: the variable, the master build, the pinned install.
  process.env['SLUICE_REFERENCE_BIN'],
  path.join(REPO_ROOT, '.cache', 'reference', 'service_cmd'),
  path.join(REPO_ROOT, '.cache', 'go-bin', 'service_cmd'),
].find((p): p is string => p !== undefined && existsSync(p));

const exporterNeed = requireTelemetryBinary('telemetry-metrics (statsd)', 'statsd_exporter');

describe.skipIf(exporterNeed.skip)('statsd into a real statsd_exporter', () => {
  const group = useProcessGroup();

  it("shows the reference's counter values for the same calls (USE_STATSD over TCP)", async () => {
    const exporter = await startStatsdExporter(group, MAPPING);
    const { app, grpcPort } = await start({
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(exporter.statsdPort),
      STATS_FLUSH_INTERVAL: '1h',
    });
    await sendCalls(`127.0.0.1:${grpcPort}`);
    // Closing flushes the last time; nothing was sent before (the interval is an hour).
    await app.close();
    let seen: Record<string, number> = {};
    await waitFor(
      'the counters in statsd_exporter',
      async () => {
        seen = comparable(await exporter.samples());
        // The exporter takes the lines in more than one read: wait for every series, then
        // compare every value.
        return Object.keys(REFERENCE_FIGURES).every((series) => series in seen);
      },
      { timeoutMs: 10_000, onTimeout: () => JSON.stringify(seen, null, 2) },
    );
    expect(seen).toEqual(REFERENCE_FIGURES);
  });

  it('keeps what it could not send while statsd was down, and sends it once statsd answers', async () => {
    const statsdPort = await freePort();
    const { logger, lines } = capturingLogger();
    const { grpcPort } = await start(
      {
        USE_STATSD: 'true',
        STATSD_HOST: '127.0.0.1',
        STATSD_PORT: String(statsdPort),
        STATS_FLUSH_INTERVAL: '100ms',
      },
      logger,
    );
    await sendCalls(`127.0.0.1:${grpcPort}`);
    await waitFor(
      'the unreachable warning',
      () => lines.some((l) => String(l['msg']).startsWith('statsd is unreachable')),
      { timeoutMs: 5_000 },
    );
    const exporter = await startStatsdExporter(group, MAPPING, statsdPort);
    let seen: Record<string, number> = {};
    await waitFor(
      'the counters in statsd_exporter after it started',
      async () => {
        seen = comparable(await exporter.samples());
        return seen['ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}'] === 6;
      },
      { timeoutMs: 10_000, onTimeout: () => JSON.stringify(seen, null, 2) },
    );
    expect(seen['ratelimit_service_rate_limit_total_hits{domain="telemetry",key1="api_key"}']).toBe(
      5,
    );
    // Warned once, however many flushes failed; and said when it came back.
    expect(lines.filter((l) => String(l['msg']).startsWith('statsd is unreachable'))).toHaveLength(
      1,
    );
    expect(lines.some((l) => l['msg'] === 'statsd reachable again')).toBe(true);
  });

  it('lets no request value add a line, a series or a tag (issue 31, item 2)', async () => {
    const exporter = await startStatsdExporter(group, MAPPING);
    const { app, grpcPort } = await start({
      USE_STATSD: 'true',
      STATSD_HOST: '127.0.0.1',
      STATSD_PORT: String(exporter.statsdPort),
      STATS_FLUSH_INTERVAL: '1h',
    });
    // detailed_metric puts the value in the statsd name. The first would start a line naming a
    // series of the caller's choice; the others carry tag syntax statsd_exporter reads (Librato
    // `#`, InfluxDB `,`, SignalFx `[...]`, DogStatsD `|#`) or gostats' `.__k=v`; each stays within
    // three name parts once made safe, so the mapping counts it under domain "telemetry".
    const injected = 'a\nratelimit.service.rate_limit.evil.x';
    const values = [
      'b#domain=evil',
      'c,domain=evil',
      'd[domain=evil]',
      'e|#domain:evil',
      'f.__domain=evil',
      'g@0.01',
    ];
    const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
    try {
      for (const value of [injected, ...values]) {
        await client.shouldRateLimit(rlsRequest('telemetry', [{ user: value }]));
      }
    } finally {
      client.close();
    }
    await app.close();
    let samples = new Map<string, number>();
    const userHits = () =>
      [...samples]
        .filter(([name]) =>
          name.startsWith('ratelimit_service_rate_limit_total_hits{domain="telemetry",key1="user_'),
        )
        .reduce((sum, [, value]) => sum + value, 0);
    await waitFor(
      'the per-user counters in statsd_exporter',
      async () => {
        samples = await exporter.samples();
        return userHits() >= values.length;
      },
      { timeoutMs: 10_000, onTimeout: () => JSON.stringify(Object.fromEntries(samples), null, 2) },
    );
    const names = [...samples.keys()];
    expect(names.filter((n) => n.includes('evil') && !n.includes('domain="telemetry"'))).toEqual(
      [],
    );
    expect(names.filter((n) => /domain="(?!telemetry")/.test(n))).toEqual([]);
    expect(userHits()).toBe(values.length);
  });

  it.skipIf(REFERENCE_BIN === undefined)(
    'the reference itself, fed to a second exporter, still shows those figures',
    async () => {
      const exporter = await startStatsdExporter(group, MAPPING);
      const redis = await startRedis(group);
      const root = await ruleDir({});
      const { mkdir, writeFile } = await import('node:fs/promises');
      await mkdir(path.join(root, 'app', 'config'), { recursive: true });
      await writeFile(path.join(root, 'app', 'config', 'telemetry.yaml'), RULES);
      const grpcPort = await freePort();
      const ref = group.spawn('reference', REFERENCE_BIN!, [], {
        env: {
          PATH: process.env['PATH'] ?? '',
          ...redisBackendEnv(redis.address),
          USE_STATSD: 'true',
          STATSD_HOST: '127.0.0.1',
          STATSD_PORT: String(exporter.statsdPort),
          STATS_FLUSH_INTERVAL: '200ms',
          RUNTIME_ROOT: root,
          RUNTIME_SUBDIRECTORY: 'app',
          RUNTIME_WATCH_ROOT: 'false',
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(grpcPort),
          HOST: '127.0.0.1',
          PORT: String(await freePort()),
          DEBUG_HOST: '127.0.0.1',
          DEBUG_PORT: String(await freePort()),
          LOG_LEVEL: 'warn',
        },
      });
      const { canConnect } = await import('../helpers/processes.js');
      await waitFor('the reference', () => canConnect('127.0.0.1', grpcPort), {
        timeoutMs: 15_000,
        onTimeout: () => ref.output(),
      });
      await sendCalls(`127.0.0.1:${grpcPort}`);
      let seen: Record<string, number> = {};
      await waitFor(
        "the reference's counters in statsd_exporter",
        async () => {
          seen = comparable(await exporter.samples());
          return seen['ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}'] === 6;
        },
        { timeoutMs: 10_000, onTimeout: () => JSON.stringify(seen, null, 2) },
      );
      expect(seen).toEqual(REFERENCE_FIGURES);
    },
  );
});

describe('DogStatsD over UDP', () => {
  it('sends tags from EXTRA_TAGS and the mogrifier rules in the payloads', async () => {
    const socket = dgram.createSocket('udp4');
    const payloads: string[] = [];
    socket.on('message', (message) => payloads.push(message.toString('utf8')));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    try {
      const { app, grpcPort } = await start({
        USE_STATSD: 'false',
        USE_DOG_STATSD: 'true',
        STATSD_HOST: '127.0.0.1',
        STATSD_PORT: String(socket.address().port),
        STATS_FLUSH_INTERVAL: '1h',
        EXTRA_TAGS: 'env:test,zone:eu.1',
        USE_DOG_STATSD_MOGRIFIERS: 'RL',
        DOG_STATSD_MOGRIFIER_RL_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.([^.]+)\.(.+)\.([^.]+)$`,
        DOG_STATSD_MOGRIFIER_RL_NAME: 'ratelimit.service.rate_limit.$3',
        DOG_STATSD_MOGRIFIER_RL_TAGS: 'domain:$1,descriptor:$2',
      });
      await sendCalls(`127.0.0.1:${grpcPort}`);
      await app.close();
      await waitFor(
        'the DogStatsD payload',
        () => payloads.join('').includes('ratelimit_server.ShouldRateLimit.total_requests'),
        { timeoutMs: 5_000, onTimeout: () => payloads.join('') },
      );
      const lines = payloads.join('').split('\n');
      expect(lines).toContain(
        'ratelimit.service.rate_limit.over_limit:2|c|#env:test,zone:eu_1,domain:telemetry,descriptor:api_key',
      );
      expect(lines).toContain(
        'ratelimit.service.rate_limit.within_limit:5|c|#env:test,zone:eu_1,domain:telemetry,descriptor:path.method',
      );
      expect(lines).toContain(
        'ratelimit_server.ShouldRateLimit.total_requests:6|c|#env:test,zone:eu_1',
      );
      expect(lines).toContain(
        'ratelimit.service.call.should_rate_limit.service_error:1|c|#env:test,zone:eu_1',
      );
      const timings = lines.filter((l) =>
        l.startsWith('ratelimit_server.ShouldRateLimit.response_time:'),
      );
      expect(timings).toHaveLength(6);
      for (const line of timings) expect(line).toMatch(/^[^:]+:[\d.]+\|ms\|#env:test,zone:eu_1$/);
    } finally {
      socket.close();
    }
  });
});

describe('Prometheus on PROMETHEUS_ADDR', () => {
  it('serves the same values as the HTTP port, at PROMETHEUS_PATH only', async () => {
    const { grpcPort, httpPort, prometheusPort } = await start({
      USE_STATSD: 'false',
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: '127.0.0.1:0',
      PROMETHEUS_PATH: '/prom',
    });
    expect(prometheusPort).toBeGreaterThan(0);
    await sendCalls(`127.0.0.1:${grpcPort}`);
    const scrape = async (url: string) => {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      return parseSamples(await res.text(), 'ratelimit_');
    };
    const own = await scrape(`http://127.0.0.1:${prometheusPort}/prom`);
    const http = await scrape(`http://127.0.0.1:${httpPort}/metrics`);
    expect(
      own.get(
        'ratelimit_service_rate_limit_over_limit{domain="telemetry",key1="api_key",key2=""}',
      ) ?? own.get('ratelimit_service_rate_limit_over_limit{domain="telemetry",key1="api_key"}'),
    ).toBe(2);
    expect(own.get('ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}')).toBe(6);
    expect(own).toEqual(http);
    expect((await fetch(`http://127.0.0.1:${prometheusPort}/metrics`)).status).toBe(404);
  });

  it('renders the latency histogram in ms with PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS', async () => {
    const { grpcPort, prometheusPort } = await start({
      USE_STATSD: 'false',
      USE_PROMETHEUS: 'true',
      PROMETHEUS_ADDR: '127.0.0.1:0',
      PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS: 'true',
    });
    await sendCalls(`127.0.0.1:${grpcPort}`);
    const text = await (await fetch(`http://127.0.0.1:${prometheusPort}/metrics`)).text();
    // The 0.1 s bound reads 100 (ms); the count is unchanged.
    expect(text).toContain(
      'ratelimit_service_response_time_seconds_bucket{grpc_method="ShouldRateLimit",le="100"} 6',
    );
  });
});
