import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { goDurationMs } from '../../src/settings-reader.js';
import {
  BUNDLED_CONFIG_DIR,
  loadCheckSettings,
  loadSettings,
  storeOptions,
} from '../../src/settings.js';

describe('loadSettings', () => {
  it("uses the reference's defaults, the memory store and the bundled rules when nothing is set", () => {
    const s = loadSettings({});
    expect(s).toMatchObject({
      grpcHost: '0.0.0.0',
      grpcPort: 8081,
      logLevel: 'warn',
      logFormat: 'json',
      backendType: 'memory',
      shadowMode: false,
      mergeDomainConfigs: false,
      config: { paths: [BUNDLED_CONFIG_DIR], origin: 'bundled' },
    });
    expect(Object.isFrozen(s)).toBe(true);
    expect(BUNDLED_CONFIG_DIR.endsWith(`${path.sep}envoy${path.sep}ratelimit${path.sep}`)).toBe(
      true,
    );
  });

  it('reads the reference layout RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY', () => {
    expect(
      loadSettings({ RUNTIME_ROOT: '/data', RUNTIME_SUBDIRECTORY: 'ratelimit' }).config,
    ).toEqual({
      paths: ['/data/ratelimit/config'],
      origin: 'runtime',
    });
    expect(
      loadSettings({
        RUNTIME_ROOT: '/data',
        RUNTIME_SUBDIRECTORY: 'rl',
        RUNTIME_APPDIRECTORY: 'rules',
      }).config.paths,
    ).toEqual(['/data/rl/rules']);
    expect(loadSettings({ RUNTIME_SUBDIRECTORY: 'ratelimit' }).config.paths).toEqual([
      '/srv/runtime_data/current/ratelimit/config',
    ]);
  });

  it('lets --config flags win over RUNTIME_* variables, and flags over env in general', () => {
    const s = loadSettings(
      { RUNTIME_ROOT: '/data', GRPC_PORT: '9000', LOG_LEVEL: 'error' },
      { config: ['a.yaml', 'dir'], grpcPort: '9100', logLevel: 'debug', shadowMode: true },
    );
    expect(s.config).toEqual({ paths: ['a.yaml', 'dir'], origin: 'flags' });
    expect(s.grpcPort).toBe(9100);
    expect(s.logLevel).toBe('debug');
    expect(s.shadowMode).toBe(true);
  });

  it("parses booleans and log levels the way the reference's Go code does", () => {
    for (const t of ['1', 't', 'T', 'TRUE', 'true', 'True'])
      expect(loadSettings({ SHADOW_MODE: t }).shadowMode).toBe(true);
    for (const f of ['0', 'f', 'F', 'FALSE', 'false', 'False'])
      expect(loadSettings({ SHADOW_MODE: f }).shadowMode).toBe(false);
    expect(loadSettings({ LOG_LEVEL: 'WARNING' }).logLevel).toBe('warn');
    expect(loadSettings({ LOG_LEVEL: 'Debug' }).logLevel).toBe('debug');
  });

  it('reports every invalid setting in one error', () => {
    let error: unknown;
    try {
      loadSettings({
        GRPC_PORT: '70000',
        LOG_LEVEL: 'chatty',
        LOG_FORMAT: 'xml',
        SHADOW_MODE: 'yes',
        MEMORY_MAX_KEYS: '-5',
        BACKEND_TYPE: 'redis',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(SluiceError);
    const e = error as SluiceError;
    expect(e.code).toBe('INVALID_SETTINGS');
    const lines = e.message.split('\n');
    expect(lines[0]).toBe('invalid settings:');
    expect(lines.slice(1)).toHaveLength(6);
    expect(e.message).toMatch(/GRPC_PORT="70000": expected an integer from 0 to 65535/);
    expect(e.message).toMatch(/LOG_LEVEL="chatty"/);
    expect(e.message).toMatch(/LOG_FORMAT="xml"/);
    expect(e.message).toMatch(/SHADOW_MODE="yes"/);
    expect(e.message).toMatch(/MEMORY_MAX_KEYS="-5"/);
    expect(e.message).toMatch(/REDIS_URL must be set when BACKEND_TYPE=redis/);
  });

  it('reads GRPC_SERVER: lean by default, grpc-js on request, anything else refused', () => {
    expect(loadSettings({}).grpcServer).toBe('lean');
    expect(loadSettings({ GRPC_SERVER: 'grpc-js' }).grpcServer).toBe('grpc-js');
    expect(loadSettings({ GRPC_SERVER: 'LEAN' }).grpcServer).toBe('lean');
    expect(() => loadSettings({ GRPC_SERVER: 'netty' })).toThrow(
      /GRPC_SERVER="netty": expected lean or grpc-js/,
    );
  });

  it('refuses a MEMORY_MAX_KEYS below MAX_DESCRIPTORS_PER_REQUEST', () => {
    expect(() => loadSettings({ MEMORY_MAX_KEYS: '10' })).toThrow(
      /MEMORY_MAX_KEYS=10: must be at least MAX_DESCRIPTORS_PER_REQUEST \(64\)/,
    );
    expect(
      loadSettings({ MEMORY_MAX_KEYS: '10', MAX_DESCRIPTORS_PER_REQUEST: '10' }).memoryMaxKeys,
    ).toBe(10);
  });

  it('reads MEMORY_MAX_BYTES: unset leaves it to the store (half the old space), 1 MiB at least', () => {
    expect(loadSettings({}).memoryMaxBytes).toBeUndefined();
    expect(loadSettings({ MEMORY_MAX_BYTES: '268435456' }).memoryMaxBytes).toBe(268_435_456);
    expect(storeOptions(loadSettings({ MEMORY_MAX_BYTES: '1048576' })).memoryMaxBytes).toBe(
      1_048_576,
    );
    for (const bad of ['1000', '256MB', '-1']) {
      expect(() => loadSettings({ MEMORY_MAX_BYTES: bad })).toThrow(
        `MEMORY_MAX_BYTES=${JSON.stringify(bad)}: expected an integer from 1048576 to`,
      );
    }
  });

  it('reads only MERGE_DOMAIN_CONFIG, DEFAULT_ALGORITHM and the rule bounds for `sluice check`', () => {
    const unrelated = { BACKEND_TYPE: 'redis', GRPC_PORT: 'x', LOG_LEVEL: 'chatty' };
    expect(loadCheckSettings(unrelated)).toEqual({
      mergeDomainConfigs: false,
      defaultAlgorithm: 'sliding_window',
      configMaxRulesPerFile: 20_000,
      configMaxRules: 100_000,
    });
    expect(
      loadCheckSettings({
        ...unrelated,
        MERGE_DOMAIN_CONFIG: 'true',
        DEFAULT_ALGORITHM: 'Fixed_Window',
        CONFIG_MAX_RULES_PER_FILE: '10',
        CONFIG_MAX_RULES: '20',
      }),
    ).toEqual({
      mergeDomainConfigs: true,
      defaultAlgorithm: 'fixed_window',
      configMaxRulesPerFile: 10,
      configMaxRules: 20,
    });
    expect(() => loadCheckSettings({ CONFIG_MAX_RULES: '0' })).toThrow(/CONFIG_MAX_RULES/);
    expect(() => loadCheckSettings({ DEFAULT_ALGORITHM: 'leaky_bucket' })).toThrow(
      /DEFAULT_ALGORITHM="leaky_bucket": expected one of sliding_window, fixed_window, token_bucket, sliding_log/,
    );
    expect(() => loadCheckSettings({ MERGE_DOMAIN_CONFIG: 'maybe' })).toThrow(
      /MERGE_DOMAIN_CONFIG="maybe": expected true or false/,
    );
  });

  it('reads DEFAULT_ALGORITHM, QUOTA_MODE and RESPONSE_DYNAMIC_METADATA', () => {
    const defaults = loadSettings({});
    expect(defaults.defaultAlgorithm).toBe('sliding_window');
    expect(defaults.quotaMode).toBe(false);
    expect(defaults.responseDynamicMetadata).toBe(false);
    const set = loadSettings({
      DEFAULT_ALGORITHM: 'token_bucket',
      QUOTA_MODE: 'true',
      RESPONSE_DYNAMIC_METADATA: '1',
    });
    expect(set.defaultAlgorithm).toBe('token_bucket');
    expect(set.quotaMode).toBe(true);
    expect(set.responseDynamicMetadata).toBe(true);
    expect(() => loadSettings({ DEFAULT_ALGORITHM: 'gcra' })).toThrow(/DEFAULT_ALGORITHM="gcra"/);
  });
});

describe('loadSettings: the Redis store', () => {
  it('memory by default; REDIS_URL alone means redis (inferred), BACKEND_TYPE wins', () => {
    const none = loadSettings({});
    expect(none.backendType).toBe('memory');
    expect(none.redis).toBeUndefined();
    const inferred = loadSettings({ REDIS_URL: 'localhost:6379' });
    expect(inferred.backendType).toBe('redis');
    expect(inferred.backendTypeInferred).toBe(true);
    expect(inferred.redis?.main).toMatchObject({
      url: 'localhost:6379',
      type: 'single',
      socketType: 'tcp',
      timeoutMs: 10_000,
      poolSize: 10,
    });
    const explicit = loadSettings({ REDIS_URL: 'localhost:6379', BACKEND_TYPE: 'memory' });
    expect(explicit.backendType).toBe('memory');
    expect(explicit.backendTypeInferred).toBe(false);
  });

  it("reads the reference's names and formats", () => {
    const s = loadSettings({
      BACKEND_TYPE: 'redis',
      REDIS_TYPE: 'SENTINEL',
      REDIS_URL: 'mymaster,10.0.0.1:26379,10.0.0.2:26379',
      REDIS_AUTH: 'user:pw',
      REDIS_SENTINEL_AUTH: 'spw',
      REDIS_TLS: 'true',
      REDIS_TLS_CACERT: '/ca.pem',
      REDIS_POOL_SIZE: '4',
      REDIS_TIMEOUT: '1m30s',
      CACHE_KEY_PREFIX: 'rl_',
      LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
      REDIS_PERSECOND: 'true',
      REDIS_PERSECOND_URL: 'redis://persec:6380/2',
      REDIS_PERSECOND_TIMEOUT: '200ms',
      STORE_FAILURE_MODE: 'Memory',
    });
    expect(s.redis?.main).toMatchObject({
      type: 'sentinel',
      auth: 'user:pw',
      sentinelAuth: 'spw',
      tls: true,
      tlsCaCert: '/ca.pem',
      poolSize: 4,
      timeoutMs: 90_000,
    });
    expect(s.redis?.perSecond).toMatchObject({
      url: 'redis://persec:6380/2',
      type: 'single',
      timeoutMs: 200,
      tlsCaCert: '/ca.pem',
    });
    expect(s.redis?.keyPrefix).toBe('rl_');
    expect(s.redis?.localCacheBytes).toBe(1_048_576);
    expect(s.storeFailureMode).toBe('memory');
    expect(loadSettings({ REDIS_URL: '/var/run/redis.sock' }).redis?.main.socketType).toBe('unix');
  });

  it('parses Go durations', () => {
    expect(goDurationMs('10s')).toBe(10_000);
    expect(goDurationMs('200ms')).toBe(200);
    expect(goDurationMs('1.5s')).toBe(1_500);
    expect(goDurationMs('1h2m3s')).toBe(3_723_000);
    expect(goDurationMs('500us')).toBe(1);
    expect(goDurationMs('0')).toBe(0);
    for (const bad of ['10', 's', '10 s', '-1s', '1d', ''])
      expect(goDurationMs(bad)).toBeUndefined();
  });

  it('lists every invalid Redis setting at once', () => {
    let message = '';
    try {
      loadSettings({
        BACKEND_TYPE: 'redis',
        REDIS_URL: 'no-port',
        REDIS_TYPE: 'ring',
        REDIS_SOCKET_TYPE: 'udp',
        REDIS_TIMEOUT: '10',
        REDIS_POOL_SIZE: '0',
        LOCAL_CACHE_SIZE_IN_BYTES: 'lots',
        STORE_FAILURE_MODE: 'panic',
        REDIS_PERSECOND: 'true',
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/REDIS_TYPE="ring": expected single, sentinel or cluster/);
    expect(message).toMatch(/REDIS_SOCKET_TYPE="udp": expected tcp or unix/);
    expect(message).toMatch(/REDIS_URL="no-port": expected host:port/);
    expect(message).toMatch(/REDIS_TIMEOUT="10": expected a positive duration/);
    expect(message).toMatch(/REDIS_POOL_SIZE="0"/);
    expect(message).toMatch(/LOCAL_CACHE_SIZE_IN_BYTES="lots"/);
    expect(message).toMatch(/STORE_FAILURE_MODE="panic": expected error, allow or memory/);
    expect(message).toMatch(/REDIS_PERSECOND_URL must be set/);
    expect(() => loadSettings({ REDIS_TYPE: 'sentinel', REDIS_URL: '10.0.0.1:26379' })).toThrow(
      /expected the master name and the sentinels/,
    );
    expect(() => loadSettings({ BACKEND_TYPE: 'memcache' })).toThrow(
      /BACKEND_TYPE="memcache": expected memory or redis/,
    );
  });
});
