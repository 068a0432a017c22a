import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../../src/settings.js';
import { settingsProblems } from '../../helpers/settings.js';

describe('stats settings', () => {
  it("defaults to the reference's: statsd on, localhost:8125 over TCP, a 10 s flush", () => {
    const { stats, tracing } = loadSettings({});
    expect(stats).toMatchObject({
      sink: 'statsd',
      statsdHost: 'localhost',
      statsdPort: 8125,
      statsdProtocol: 'tcp',
      flushIntervalMs: 10_000,
      extraTags: [],
      prometheusHost: undefined,
      prometheusPort: 9090,
      prometheusPath: '/metrics',
      responseTimeAsMilliseconds: false,
    });
    expect(tracing).toBeUndefined();
  });

  it('refuses two sinks at once, as the reference, and says what to set', () => {
    expect(settingsProblems({ USE_PROMETHEUS: 'true' })).toContain(
      'USE_STATSD=true (default) and USE_PROMETHEUS=true: only one stats sink can be on',
    );
    expect(settingsProblems({ USE_DOG_STATSD: 'true' })).toContain(
      'USE_DOG_STATSD=true and USE_STATSD=true (default)',
    );
    expect(
      settingsProblems({ USE_DOG_STATSD: 'true', USE_STATSD: 'false', USE_PROMETHEUS: 'true' }),
    ).toContain('USE_DOG_STATSD=true and USE_PROMETHEUS=true');
    // DISABLE_STATS wins over everything, as in the reference.
    expect(loadSettings({ DISABLE_STATS: 'true', USE_PROMETHEUS: 'true' }).stats.sink).toBe('none');
    expect(loadSettings({ USE_STATSD: 'false', USE_PROMETHEUS: 'true' }).stats.sink).toBe(
      'prometheus',
    );
    expect(loadSettings({ USE_STATSD: 'false' }).stats.sink).toBe('none');
  });

  it('reads EXTRA_TAGS, PROMETHEUS_ADDR and the flush interval, and names every bad one', () => {
    const { stats } = loadSettings({
      EXTRA_TAGS: 'env:prod,zone:eu-1',
      PROMETHEUS_ADDR: '127.0.0.1:19001',
      STATS_FLUSH_INTERVAL: '500ms',
      STATSD_PROTOCOL: 'UDP',
    });
    expect(stats.extraTags).toEqual([
      { key: 'env', value: 'prod' },
      { key: 'zone', value: 'eu-1' },
    ]);
    expect(stats).toMatchObject({
      prometheusHost: '127.0.0.1',
      prometheusPort: 19001,
      flushIntervalMs: 500,
      statsdProtocol: 'udp',
    });
    const message = settingsProblems({
      EXTRA_TAGS: 'env=prod',
      PROMETHEUS_ADDR: '9090',
      STATS_FLUSH_INTERVAL: '0',
      STATSD_PROTOCOL: 'quic',
      PROMETHEUS_PATH: 'metrics',
    });
    expect(message).toContain('EXTRA_TAGS="env=prod": "env=prod" is not key:value');
    expect(message).toContain('PROMETHEUS_ADDR="9090": expected host:port or :port');
    expect(message).toContain('STATS_FLUSH_INTERVAL="0": expected at least 100ms');
    expect(message).toContain('STATSD_PROTOCOL="quic": expected tcp or udp');
    expect(message).toContain('PROMETHEUS_PATH="metrics"');
  });

  it('refuses a flush interval under 100ms, which would spin while idle (issue 31)', () => {
    for (const text of ['1ns', '1ms', '99ms']) {
      expect(settingsProblems({ STATS_FLUSH_INTERVAL: text })).toContain(
        `STATS_FLUSH_INTERVAL=${JSON.stringify(text)}: expected at least 100ms`,
      );
    }
    expect(loadSettings({ STATS_FLUSH_INTERVAL: '100ms' }).stats.flushIntervalMs).toBe(100);
  });

  it('reads DogStatsD mogrifiers in the order named, and rejects incomplete ones', () => {
    const { stats } = loadSettings({
      USE_STATSD: 'false',
      USE_DOG_STATSD: 'true',
      USE_DOG_STATSD_MOGRIFIERS: 'RL,SRV',
      DOG_STATSD_MOGRIFIER_RL_PATTERN: String.raw`^ratelimit\.service\.rate_limit\.(?P<domain>[^.]+)\.(.*)\.([^.]+)$`,
      DOG_STATSD_MOGRIFIER_RL_NAME: 'ratelimit.service.rate_limit.$3',
      DOG_STATSD_MOGRIFIER_RL_TAGS: 'domain:$1,descriptor:$2',
      DOG_STATSD_MOGRIFIER_SRV_PATTERN: '^ratelimit_server',
      DOG_STATSD_MOGRIFIER_SRV_NAME: 'server',
    });
    expect(stats.sink).toBe('dogstatsd');
    expect(stats.mogrifiers.map((m) => m.label)).toEqual(['RL', 'SRV']);
    expect(stats.mogrifiers[0]!.tags).toEqual([
      { key: 'domain', value: '$1' },
      { key: 'descriptor', value: '$2' },
    ]);
    const message = settingsProblems({
      USE_STATSD: 'false',
      USE_DOG_STATSD: 'true',
      USE_DOG_STATSD_MOGRIFIERS: 'A,B,C',
      DOG_STATSD_MOGRIFIER_A_NAME: 'x',
      DOG_STATSD_MOGRIFIER_B_PATTERN: '(',
      DOG_STATSD_MOGRIFIER_B_NAME: 'x',
      DOG_STATSD_MOGRIFIER_C_PATTERN: 'x',
    });
    expect(message).toContain('DOG_STATSD_MOGRIFIER_A_PATTERN must be set');
    expect(message).toContain('DOG_STATSD_MOGRIFIER_B_PATTERN="(": not a regular expression');
    expect(message).toContain('DOG_STATSD_MOGRIFIER_C_NAME must be set');
  });
});

describe('tracing settings', () => {
  it("reads TRACING_* with the reference's defaults", () => {
    expect(loadSettings({ TRACING_ENABLED: 'true' }).tracing).toEqual({
      protocol: 'http',
      serviceName: 'RateLimit',
      serviceNamespace: '',
      serviceInstanceId: undefined,
      samplingRate: 1,
    });
    expect(
      loadSettings({
        TRACING_ENABLED: 'true',
        TRACING_EXPORTER_PROTOCOL: 'grpc',
        TRACING_SERVICE_NAME: 'envoy-ratelimit',
        TRACING_SERVICE_NAMESPACE: 'envoy-gateway-system',
        TRACING_SERVICE_INSTANCE_ID: 'pod-1',
        TRACING_SAMPLING_RATE: '0.5',
      }).tracing,
    ).toEqual({
      protocol: 'grpc',
      serviceName: 'envoy-ratelimit',
      serviceNamespace: 'envoy-gateway-system',
      serviceInstanceId: 'pod-1',
      samplingRate: 0.5,
    });
    expect(
      loadSettings({ TRACING_ENABLED: 'true', TRACING_SAMPLING_RATE: '7' }).tracing,
    ).toMatchObject({ samplingRate: 1 });
  });

  it('names a bad protocol or rate', () => {
    const message = settingsProblems({
      TRACING_ENABLED: 'true',
      TRACING_EXPORTER_PROTOCOL: 'zipkin',
      TRACING_SAMPLING_RATE: 'half',
    });
    expect(message).toContain('TRACING_EXPORTER_PROTOCOL="zipkin": expected http or grpc');
    expect(message).toContain('TRACING_SAMPLING_RATE="half": expected a number');
  });
});
