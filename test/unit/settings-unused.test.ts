/**
 * Every setting that is set is checked, whatever the backend, rule source or sink it belongs to:
 * a typo in `REDIS_TIMEOUT` stops a memory-store start today, not on the day someone sets
 * `BACKEND_TYPE=redis` (issue 32, item 4). The reference reads its whole environment at start
 * the same way.
 */
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';
import { settingsProblems } from '../helpers/settings.js';

describe('settings of the store that is not chosen', () => {
  it('REDIS_TIMEOUT=banana stops a memory-store start', () => {
    expect(settingsProblems({ REDIS_TIMEOUT: 'banana' })).toBe(
      'invalid settings:\n  - REDIS_TIMEOUT="banana": expected a positive duration such as 200ms, 2s or 1m30s',
    );
  });

  it('names every bad Redis setting with BACKEND_TYPE=memory, each once', () => {
    const message = settingsProblems({
      BACKEND_TYPE: 'memory',
      REDIS_URL: 'no-port',
      REDIS_TYPE: 'ring',
      REDIS_SOCKET_TYPE: 'udp',
      REDIS_POOL_SIZE: '0',
      REDIS_TLS: 'maybe',
      REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: 'perhaps',
      LOCAL_CACHE_SIZE_IN_BYTES: 'lots',
      REDIS_WAIT_AT_START: 'sometimes',
      REDIS_PERSECOND: 'yes please',
      REDIS_PERSECOND_TIMEOUT: 'soon',
    });
    for (const expected of [
      'REDIS_URL="no-port": expected host:port',
      'REDIS_TYPE="ring": expected single, sentinel or cluster',
      'REDIS_SOCKET_TYPE="udp": expected tcp or unix',
      'REDIS_POOL_SIZE="0": expected an integer',
      'REDIS_TLS="maybe": expected true or false',
      'REDIS_TLS_SKIP_HOSTNAME_VERIFICATION="perhaps": expected true or false',
      'LOCAL_CACHE_SIZE_IN_BYTES="lots": expected an integer',
      'REDIS_WAIT_AT_START="sometimes": expected true or false',
      'REDIS_PERSECOND="yes please": expected true or false',
      'REDIS_PERSECOND_TIMEOUT="soon": expected a positive duration',
    ]) {
      expect(message).toContain(expected);
    }
    // The TLS variables are shared by the main and the per-second connection: one line each.
    expect(message.split('REDIS_TLS_SKIP_HOSTNAME_VERIFICATION=')).toHaveLength(2);
  });

  it('asks for no REDIS_URL and builds no Redis options while the memory store is chosen', () => {
    const s = loadSettings({
      BACKEND_TYPE: 'memory',
      REDIS_TIMEOUT: '2s',
      REDIS_PERSECOND: 'true',
      REDIS_TYPE: 'cluster',
    });
    expect(s.backendType).toBe('memory');
    expect(s.redis).toBeUndefined();
  });

  it('still checks the Redis URL with BACKEND_TYPE=memory, never echoing its password', () => {
    const message = settingsProblems({
      BACKEND_TYPE: 'memory',
      REDIS_URL: 'redis://u:hunter2@a,b',
    });
    expect(message).toContain('REDIS_URL=');
    expect(message).not.toContain('hunter2');
  });
});

describe('settings of the rule source that is not chosen', () => {
  it('names bad xDS settings under CONFIG_TYPE=FILE, and keeps no xDS options', () => {
    const message = settingsProblems({
      CONFIG_GRPC_XDS_SERVER_URL: 'not a url',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: 'soon',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'no-colon',
    });
    expect(message).toContain('CONFIG_GRPC_XDS_SERVER_URL="not a url": expected host:port');
    expect(message).toContain('XDS_CLIENT_BACKOFF_INITIAL_INTERVAL="soon": expected a duration');
    expect(message).toContain('CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: "no-colon"');
    const s = loadSettings({ CONFIG_GRPC_XDS_SERVER_URL: 'gateway:18001' }, { config: ['/r'] });
    expect(s.configType).toBe('FILE');
    expect(s.xds).toBeUndefined();
  });
});

describe('settings of the telemetry that is off', () => {
  it('names bad tracing settings while TRACING_ENABLED is false', () => {
    const message = settingsProblems({
      TRACING_EXPORTER_PROTOCOL: 'zipkin',
      TRACING_SAMPLING_RATE: 'half',
    });
    expect(message).toContain('TRACING_EXPORTER_PROTOCOL="zipkin": expected http or grpc');
    expect(message).toContain('TRACING_SAMPLING_RATE="half": expected a number');
    expect(loadSettings({ TRACING_SAMPLING_RATE: '0.5' }).tracing).toBeUndefined();
  });

  it('names a broken DogStatsD mogrifier while statsd is the sink', () => {
    const message = settingsProblems({
      USE_DOG_STATSD_MOGRIFIERS: 'A',
      DOG_STATSD_MOGRIFIER_A_PATTERN: '(',
      DOG_STATSD_MOGRIFIER_A_NAME: 'x',
    });
    expect(message).toContain('DOG_STATSD_MOGRIFIER_A_PATTERN="(": not a regular expression');
    expect(
      loadSettings({
        USE_DOG_STATSD_MOGRIFIERS: 'A',
        DOG_STATSD_MOGRIFIER_A_PATTERN: '^a$',
        DOG_STATSD_MOGRIFIER_A_NAME: 'x',
      }).stats.mogrifiers,
    ).toEqual([]);
  });
});
