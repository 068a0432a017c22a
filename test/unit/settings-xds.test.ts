/** CONFIG_TYPE and the xDS client's settings: the reference's names and defaults, clear errors. */
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';
import { silentLogger } from '../../src/logging/logger.js';
import { backoffDelayMs, createXdsSource } from '../../src/transport/xds/source.js';

/** The message loadSettings throws for `env`. */
function problem(env: NodeJS.ProcessEnv): string {
  try {
    loadSettings(env);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('expected loadSettings to throw');
}

describe('CONFIG_TYPE', () => {
  it('defaults to FILE, with no xDS settings', () => {
    const s = loadSettings({});
    expect(s.configType).toBe('FILE');
    expect(s.xds).toBeUndefined();
    expect(s.forceStartWithoutInitialConfig).toBe(false);
    expect(s.healthyWithAtLeastOneConfigLoaded).toBe(false);
  });

  it('takes the reference values in any case', () => {
    expect(loadSettings({ CONFIG_TYPE: 'file' }).configType).toBe('FILE');
    expect(loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' }).configType).toBe('GRPC_XDS_SOTW');
    expect(loadSettings({ CONFIG_TYPE: 'grpc_xds_sotw' }).configType).toBe('GRPC_XDS_SOTW');
  });

  it('stops the start on any other value with one message that names both choices', () => {
    expect(problem({ CONFIG_TYPE: 'GRPC_XDS_DELTA' })).toBe(
      'invalid settings:\n  - CONFIG_TYPE="GRPC_XDS_DELTA": expected FILE (rules from files, the default) or GRPC_XDS_SOTW (rules from an xDS management server)',
    );
  });

  it('refuses --config with GRPC_XDS_SOTW', () => {
    expect(() => loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' }, { config: ['/rules'] })).toThrow(
      /--config reads rule files, but CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from the xDS server/,
    );
  });
});

describe('xDS client settings', () => {
  it('refuses a connect retry interval under 100ms, which would retry in a busy loop (issue 31)', () => {
    for (const text of ['0s', '0', '1ns', '99ms']) {
      expect(
        problem({
          CONFIG_TYPE: 'GRPC_XDS_SOTW',
          CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: text,
        }),
      ).toContain(
        `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL=${JSON.stringify(text)}: expected at least 100ms`,
      );
    }
    const s = loadSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '100ms',
    });
    expect(s.xds?.connectRetryIntervalMs).toBe(100);
  });

  it("has the reference's defaults", () => {
    const s = loadSettings({ CONFIG_TYPE: 'GRPC_XDS_SOTW' });
    expect(s.xds).toEqual({
      serverUrl: 'localhost:18000',
      nodeId: 'default',
      nodeMetadata: {},
      headers: {},
      connectRetryIntervalMs: 3_000,
      backoffInitialMs: 10_000,
      backoffMaxMs: 60_000,
      backoffFactor: 0.5,
      backoffJitter: true,
      maxMessageBytes: undefined,
      tls: undefined,
    });
  });

  it('reads every variable (the environment Envoy Gateway gives the reference, and the rest)', () => {
    const s = loadSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: 'envoy-gateway:18001',
      CONFIG_GRPC_XDS_NODE_ID: 'envoy-ratelimit',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone=z1, team=a=b',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'X-Token:abc,x-tenant: t1',
      CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '500ms',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '1s',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '2m',
      XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '2',
      XDS_CLIENT_BACKOFF_JITTER: 'false',
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '8388608',
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/certs/tls.crt',
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: '/certs/tls.key',
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/certs/ca.crt',
      CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'envoy-gateway',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
    });
    expect(s.forceStartWithoutInitialConfig).toBe(true);
    expect(s.healthyWithAtLeastOneConfigLoaded).toBe(true);
    expect(s.xds).toEqual({
      serverUrl: 'envoy-gateway:18001',
      nodeId: 'envoy-ratelimit',
      // As the reference: split at the first '='.
      nodeMetadata: { zone: 'z1', team: 'a=b' },
      headers: { 'x-token': 'abc', 'x-tenant': 't1' },
      connectRetryIntervalMs: 500,
      backoffInitialMs: 1_000,
      backoffMaxMs: 120_000,
      backoffFactor: 2,
      backoffJitter: false,
      maxMessageBytes: 8_388_608,
      tls: {
        caFile: '/certs/ca.crt',
        certFile: '/certs/tls.crt',
        keyFile: '/certs/tls.key',
        serverSan: 'envoy-gateway',
      },
    });
  });

  it('ignores the TLS files while CONFIG_GRPC_XDS_SERVER_USE_TLS is false, as the reference', () => {
    const s = loadSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/certs/tls.crt',
    });
    expect(s.xds?.tls).toBeUndefined();
  });

  it('reports every problem at once', () => {
    const message = problem({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: 'http://envoy-gateway:18001',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone:z1',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x-token=abc,grpc-timeout:1',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '2m',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '1m',
      XDS_CLIENT_BACKOFF_RANDOM_FACTOR: '-1',
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: 'big',
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'yes please',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'maybe',
    });
    const lines = message.split('\n').slice(1);
    expect(lines).toHaveLength(9);
    expect(message).toContain(
      'CONFIG_GRPC_XDS_SERVER_URL="http://envoy-gateway:18001": expected host:port',
    );
    expect(message).toContain('CONFIG_GRPC_XDS_NODE_METADATA: "zone:z1" is not key=value');
    expect(message).toContain(
      'CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "x-token=abc" is not key:value',
    );
    expect(message).toContain('"grpc-timeout" is not a usable gRPC metadata key');
    expect(message).toContain(
      'XDS_CLIENT_BACKOFF_MAX_INTERVAL (60000 ms) must be at least XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (120000 ms)',
    );
    expect(message).toContain(
      'XDS_CLIENT_BACKOFF_RANDOM_FACTOR="-1": expected a number from 0 to 1000',
    );
    expect(message).toContain('XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES="big"');
    expect(message).toContain(
      'CONFIG_GRPC_XDS_SERVER_USE_TLS="yes please": expected true or false',
    );
    expect(message).toContain('FORCE_START_WITHOUT_INITIAL_CONFIG="maybe": expected true or false');
  });

  it('wants a client certificate and its key together', () => {
    expect(
      problem({
        CONFIG_TYPE: 'GRPC_XDS_SOTW',
        CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
        CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/certs/tls.crt',
      }),
    ).toContain('CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together');
  });

  it('accepts gRPC target names', () => {
    const s = loadSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: 'dns:///envoy-gateway.envoy-gateway-system:18001',
    });
    expect(s.xds?.serverUrl).toBe('dns:///envoy-gateway.envoy-gateway-system:18001');
  });
});

describe('reference settings sluice checks but needs no value of', () => {
  it('RUNTIME_IGNOREDOTFILES and RUNTIME_WATCH_ROOT must be booleans, as in the reference', () => {
    expect(() =>
      loadSettings({ RUNTIME_IGNOREDOTFILES: 'true', RUNTIME_WATCH_ROOT: 'false' }),
    ).not.toThrow();
    const message = problem({ RUNTIME_IGNOREDOTFILES: 'yes', RUNTIME_WATCH_ROOT: 'no' });
    expect(message).toContain('RUNTIME_IGNOREDOTFILES="yes": expected true or false');
    expect(message).toContain('RUNTIME_WATCH_ROOT="no": expected true or false');
  });

  it('GRPC_SERVER_TLS_CA_CERT (set by Envoy Gateway, read by neither) gives a notice', () => {
    expect(loadSettings({}).notices).toEqual([]);
    expect(loadSettings({ GRPC_SERVER_TLS_CA_CERT: '/certs/ca.crt' }).notices).toEqual([
      'GRPC_SERVER_TLS_CA_CERT="/certs/ca.crt" is not read (nor by the reference): client certificates on the gRPC port are verified only with GRPC_CLIENT_TLS_CACERT',
    ]);
  });
});

describe('the xDS client backoff (the reference’s jpillora/backoff arithmetic)', () => {
  const base = { backoffInitialMs: 10_000, backoffMaxMs: 60_000, backoffJitter: false };
  it('with the default factor 0.5, always waits the initial interval', () => {
    const waits = [0, 1, 2, 10].map((n) =>
      backoffDelayMs(n, { ...base, backoffFactor: 0.5, backoffJitter: true }, () => 0.9),
    );
    expect(waits).toEqual([10_000, 10_000, 10_000, 10_000]);
  });
  it('grows by the factor up to the maximum', () => {
    const waits = [0, 1, 2, 3, 50, 5000].map((n) =>
      backoffDelayMs(n, { ...base, backoffFactor: 2 }, () => 0),
    );
    expect(waits).toEqual([10_000, 20_000, 40_000, 60_000, 60_000, 60_000]);
  });
  it('with jitter, picks between the initial wait and the grown one', () => {
    expect(backoffDelayMs(1, { ...base, backoffFactor: 2, backoffJitter: true }, () => 0.5)).toBe(
      15_000,
    );
  });
  it('reads factor 0 as 2, and a maximum under the initial wait as the wait', () => {
    expect(backoffDelayMs(1, { ...base, backoffFactor: 0 }, () => 0)).toBe(20_000);
    expect(backoffDelayMs(0, { ...base, backoffMaxMs: 5_000, backoffFactor: 2 }, () => 0)).toBe(
      5_000,
    );
  });
});

describe('the xDS client TLS files', () => {
  it('names every unreadable file as the gRPC port does, in the order of the settings', async () => {
    const xds = loadSettings({
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: '127.0.0.1:1',
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: '/nonexistent/ca.pem',
      CONFIG_GRPC_XDS_CLIENT_TLS_CERT: '/nonexistent/client.pem',
      CONFIG_GRPC_XDS_CLIENT_TLS_KEY: '/nonexistent/client.key',
    }).xds!;
    // One reader for every TLS file (transport/tls.ts): the same words as GRPC_SERVER_TLS_*.
    await expect(createXdsSource({ xds, logger: silentLogger() })).rejects.toThrow(
      new RegExp(
        '^invalid settings:\n' +
          '  - CONFIG_GRPC_XDS_SERVER_TLS_CACERT="/nonexistent/ca.pem": cannot read the file: ENOENT.*\n' +
          '  - CONFIG_GRPC_XDS_CLIENT_TLS_CERT="/nonexistent/client.pem": cannot read the file: ENOENT.*\n' +
          '  - CONFIG_GRPC_XDS_CLIENT_TLS_KEY="/nonexistent/client.key": cannot read the file: ENOENT.*$',
      ),
    );
  });
});
