/**
 * Settings: environment variables (the reference's names and defaults where it has them) and
 * command-line flags, turned into one frozen, typed object. Every problem is reported at once.
 */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SluiceError } from './errors.js';
import { ALGORITHMS, DEFAULT_ALGORITHM, type Algorithm } from './algorithms/index.js';
import type { LogLevel } from './logging/logger.js';
import {
  grpcBudgets,
  grpcConnectionSettings,
  grpcServerKind,
  grpcTlsSettings,
} from './settings-grpc.js';
import { Reader } from './settings-reader.js';
import { redisSettings } from './settings-redis.js';
import { statsSettings, tracingSettings, type StatsSettings } from './settings-telemetry.js';
import { configTypeSetting, xdsSettingsChecked } from './settings-xds.js';
import type { AlgorithmRefusal } from './config/validate.js';
import { CACHED_MODE_ALGORITHMS } from './stores/cached/cached-store.js';
import type { RedisStoreOptions, StoreOptions } from './stores/index.js';
import type { StoreFailureMode } from './stores/failure-policy.js';
import type { TracingSettings } from './tracing/tracing.js';
import type { GrpcConnectionSettings, GrpcLimits } from './transport/limits.js';
import type { GrpcTlsSettings } from './transport/tls.js';
import type { XdsOptions } from './transport/xds/options.js';

/** Where the rate limit rules come from, and why. */
export interface ConfigSource {
  /** Files or directories to read rules from (every `*.yaml`/`*.yml`). */
  readonly paths: readonly string[];
  /** `flags` (`--config`), `runtime` (`RUNTIME_*` variables) or `bundled` (the demo rules). */
  readonly origin: 'flags' | 'runtime' | 'bundled';
}

/** Everything sluice reads from its environment, validated. */
export interface Settings {
  /** gRPC listen address (`GRPC_HOST`, default `0.0.0.0`). */
  readonly grpcHost: string;
  /** gRPC listen port (`GRPC_PORT`, default 8081; 0 picks a free port). */
  readonly grpcPort: number;
  /**
   * `GRPC_SERVER`: which gRPC server implementation serves the port: `lean` (default, on
   * `node:http2` with a hand-written codec) or `grpc-js` (@grpc/grpc-js). Both answer the same.
   */
  readonly grpcServer: 'lean' | 'grpc-js';
  /** `LOG_LEVEL` (default `warn`, as the reference). */
  readonly logLevel: LogLevel;
  /** `LOG_FORMAT`: `json` (default) or `text`. */
  readonly logFormat: 'json' | 'text';
  /** Rule files (from `--config`, `RUNTIME_*`, or the bundled demo); read when `configType` is `FILE`. */
  readonly config: ConfigSource;
  /**
   * `CONFIG_TYPE`: where the rules come from: `FILE` (default: the files of `config`) or
   * `GRPC_XDS_SOTW` (an xDS management server, `xds`).
   */
  readonly configType: 'FILE' | 'GRPC_XDS_SOTW';
  /** The xDS client's settings; `undefined` unless `configType` is `GRPC_XDS_SOTW`. */
  readonly xds: XdsOptions | undefined;
  /**
   * `FORCE_START_WITHOUT_INITIAL_CONFIG`: with an xDS source, open the ports before the first rule
   * set arrives (calls fail with `no rate limit configuration loaded` until then). Without it,
   * start-up waits for the first update, as the reference does.
   */
  readonly forceStartWithoutInitialConfig: boolean;
  /**
   * `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: health fails while the serving rules have no
   * domain (none received yet, or an empty rule set).
   */
  readonly healthyWithAtLeastOneConfigLoaded: boolean;
  /** Settings that were read but change nothing, one sentence each; logged as warnings at start-up. */
  readonly notices: readonly string[];
  /** `MERGE_DOMAIN_CONFIG`: merge files that declare the same domain instead of failing. */
  readonly mergeDomainConfigs: boolean;
  /**
   * `BACKEND_TYPE`: `memory` (default) or `redis`. Unset with `REDIS_URL` set means `redis`, as a
   * reference deployment expects (`backendTypeInferred` is then true and the start-up log says so).
   */
  readonly backendType: 'memory' | 'redis';
  /** `BACKEND_TYPE` was unset and `redis` was chosen because `REDIS_URL` is set. */
  readonly backendTypeInferred: boolean;
  /** The Redis store's settings; `undefined` unless `backendType` is `redis`. */
  readonly redis: RedisStoreOptions | undefined;
  /**
   * `STORE_FAILURE_MODE` (sluice-only): what a call answers when the Redis store fails: `error`
   * (default: gRPC UNAVAILABLE), `allow` (OK) or `memory` (decide in memory until Redis is back).
   */
  readonly storeFailureMode: StoreFailureMode;
  /**
   * The algorithms the store cannot count, refused at every rule load: those `REDIS_MODE=cached`
   * cannot count (docs/cached-mode.md); `undefined` otherwise.
   */
  readonly algorithmRefusal: AlgorithmRefusal | undefined;
  /** `MEMORY_MAX_KEYS`: cap on live counters in the memory store (default 1,000,000). */
  readonly memoryMaxKeys: number;
  /**
   * `MEMORY_MAX_BYTES`: cap on the bytes the memory store's counters hold, key text included
   * (at least 1 MiB); `undefined` (unset) means half of V8's old-space limit.
   */
  readonly memoryMaxBytes: number | undefined;
  /**
   * `METRICS_MAX_SERIES_PER_RULE` (default 1000): per-rule series a rule may get from request
   * values (`detailed_metric`, `value_to_metric`, overrides); more go to its overflow series.
   */
  readonly metricsMaxSeriesPerRule: number;
  /** `METRICS_MAX_SERIES` (default 10000): the same over all rules together. */
  readonly metricsMaxSeries: number;
  /** `CONFIG_MAX_RULES_PER_FILE` (default 20000): most descriptor nodes in one rule file. */
  readonly configMaxRulesPerFile: number;
  /** `CONFIG_MAX_RULES` (default 100000): most descriptor nodes over all rule files. */
  readonly configMaxRules: number;
  /** `SHADOW_MODE`: answer OK overall while statuses keep their real codes. */
  readonly shadowMode: boolean;
  /**
   * `DEFAULT_ALGORITHM`: how limits that name no `algorithm` count (default `sliding_window`;
   * `fixed_window` gives the reference's behaviour for every reference file).
   */
  readonly defaultAlgorithm: Algorithm;
  /** `QUOTA_MODE`: every rule not in shadow mode acts as `quota_mode` (never rejects). */
  readonly quotaMode: boolean;
  /** `RESPONSE_DYNAMIC_METADATA`: add the reference's `dynamic_metadata` to every answer. */
  readonly responseDynamicMetadata: boolean;
  /** `MAX_DESCRIPTORS_PER_REQUEST` (default 64): larger requests get INVALID_ARGUMENT. */
  readonly maxDescriptorsPerRequest: number;
  /** `MAX_ENTRIES_PER_DESCRIPTOR` (default 32). */
  readonly maxEntriesPerDescriptor: number;
  /** `MAX_ENTRY_LENGTH` (default 4096): longest key or value, in characters. */
  readonly maxEntryLength: number;
  /** `GRPC_MAX_RECEIVE_MESSAGE_LENGTH` in bytes (default 1 MiB); larger messages are refused. */
  readonly grpcMaxReceiveMessageBytes: number;
  /** `SHUTDOWN_GRACE_MS` (default 10000): how long in-flight calls may take at shutdown. */
  readonly shutdownGraceMs: number;
  /**
   * `WORKERS`: server processes sharing the listening ports (node:cluster). Redis store: default
   * one per core (`os.availableParallelism()`); memory store: 1, the only value it takes (its
   * counters live in one process).
   */
  readonly workers: number;
  /** HTTP listen address for /healthcheck, /json and /metrics (`HOST`, default `0.0.0.0`). */
  readonly httpHost: string;
  /** HTTP listen port (`PORT`, default 8080; 0 picks a free port). */
  readonly httpPort: number;
  /** Debug listen address (`DEBUG_HOST`, default `127.0.0.1`: loopback unless set). */
  readonly debugHost: string;
  /** Debug listen port (`DEBUG_PORT`, default 6070; 0 picks a free port). */
  readonly debugPort: number;
  /**
   * `DEBUG_CONSOLE_RESET_ENABLED` (default false): the debug console may reset a counter
   * (docs/operations-console.md).
   */
  readonly debugConsoleResetEnabled: boolean;
  /**
   * `DEBUG_CONSOLE_RESET_TOKEN`: a console reset must carry it (`Authorization: Bearer`); off
   * loopback, resets are refused without it. `undefined`: unset (docs/operations-console.md).
   */
  readonly debugConsoleResetToken: string | undefined;
  /**
   * `DEBUG_ALLOWED_HOSTS` (comma-separated): names the debug listener is reached by, besides IP
   * addresses, `localhost` and `DEBUG_HOST`; other `Host` headers get 403 (DNS rebinding).
   */
  readonly debugAllowedHosts: readonly string[];
  /**
   * `NEAR_LIMIT_RATIO` (default 0.8): a hit is counted in `near_limit` once the counter passes
   * `floor(requests_per_unit x ratio)` (docs/operations-metrics.md).
   */
  readonly nearLimitRatio: number;
  /** `LIMIT_RESPONSE_HEADERS_ENABLED`: add rate limit headers to every answer with a limit. */
  readonly responseHeadersEnabled: boolean;
  /**
   * `LIMIT_RESPONSE_HEADERS_FORMAT`: `reference` (default: the three `LIMIT_*_HEADER` headers, as
   * envoyproxy/ratelimit) or `ietf` (`RateLimit-Policy` and `RateLimit` structured fields plus
   * `Retry-After` on OVER_LIMIT); docs/operations-headers.md.
   */
  readonly responseHeadersFormat: 'reference' | 'ietf';
  /** `LIMIT_LIMIT_HEADER` (default `RateLimit-Limit`). */
  readonly limitHeader: string;
  /** `LIMIT_REMAINING_HEADER` (default `RateLimit-Remaining`). */
  readonly remainingHeader: string;
  /** `LIMIT_RESET_HEADER` (default `RateLimit-Reset`). */
  readonly resetHeader: string;
  /** `LIMIT_PROBLEM_JSON_ENABLED`: send an RFC 9457 problem+json `raw_body` on OVER_LIMIT. */
  readonly problemJsonEnabled: boolean;
  /**
   * `SHUTDOWN_DELAY_MS` (default 0): after SIGTERM, health turns failing at once and sluice keeps
   * serving this long before it stops accepting calls, so load balancers see the failure first.
   */
  readonly shutdownDelayMs: number;
  /**
   * TLS on the gRPC port (`GRPC_SERVER_USE_TLS=true` and its files, docs/operations-tls.md);
   * `undefined` serves plaintext, as the reference does by default.
   */
  readonly grpcTls: GrpcTlsSettings | undefined;
  /** Connection limits of the gRPC port (docs/grpc-server.md). */
  readonly grpcConnections: GrpcConnectionSettings;
  /** Stats sinks: statsd, DogStatsD, Prometheus on `PROMETHEUS_ADDR` (settings-telemetry.ts). */
  readonly stats: StatsSettings;
  /** OpenTelemetry tracing; `undefined` unless `TRACING_ENABLED=true`. */
  readonly tracing: TracingSettings | undefined;
  /**
   * What clients may hold on the gRPC port (docs/operations.md, "Limits"):
   * `GRPC_MAX_CONNECTIONS` (default 10000), `GRPC_MAX_CONCURRENT_STREAMS` (4096),
   * `GRPC_MAX_CONNECTION_BUFFER_BYTES` (64 MiB, or twice `GRPC_MAX_RECEIVE_MESSAGE_LENGTH` when
   * that is more) and `GRPC_REQUEST_TIMEOUT` (`30s`; `0` = none).
   */
  readonly grpcLimits: GrpcLimits;
  /**
   * `MAX_REQUEST_BUFFER_BYTES` (default 256 MiB, or four times `GRPC_MAX_RECEIVE_MESSAGE_LENGTH`
   * when that is more): bytes unfinished requests of the gRPC port and
   * `/json` may hold together; past it new requests are refused until some finish.
   */
  readonly maxRequestBufferBytes: number;
  /**
   * The Rate Limit Quota Service's bounds (docs/rlqs.md, "Limits"): `RLQS_MAX_STREAMS` (default
   * 1000) report streams open at once, `RLQS_MAX_BUCKETS_PER_STREAM` (1000) buckets one stream
   * may report, `RLQS_MAX_BUCKETS` (100000) stream-bucket records in all.
   */
  readonly rlqs: {
    readonly maxStreams: number;
    readonly maxBucketsPerStream: number;
    readonly maxBuckets: number;
  };
  /**
   * `HTTP_REQUEST_TIMEOUT` (default `30s`): time a request on the HTTP port (`/json` and the
   * others) may take to arrive whole, headers and body; at least 1 s.
   */
  readonly httpRequestTimeoutMs: number;
}

/**
 * The counter store's part of `settings`, for `createStore` (stores/ declares what it reads and
 * never sees the rest).
 */
export function storeOptions(settings: Settings): StoreOptions {
  return {
    backendType: settings.backendType,
    backendTypeInferred: settings.backendTypeInferred,
    memoryMaxKeys: settings.memoryMaxKeys,
    memoryMaxBytes: settings.memoryMaxBytes,
    storeFailureMode: settings.storeFailureMode,
    redis: settings.redis,
  };
}

/** The rule directory shipped with sluice (`envoy/ratelimit/`), used when nothing else is set. */
export const BUNDLED_CONFIG_DIR = fileURLToPath(new URL('../envoy/ratelimit/', import.meta.url));

/** The reference's default `RUNTIME_ROOT`. */
export const DEFAULT_RUNTIME_ROOT = '/srv/runtime_data/current';

/** Command-line flags that override environment variables (all optional). */
export interface SettingFlags {
  /** `--config PATH`, repeatable. */
  readonly config?: readonly string[];
  /** `--grpc-host`. */
  readonly grpcHost?: string;
  /** `--grpc-port`. */
  readonly grpcPort?: string;
  /** `--host` (`HOST`). */
  readonly httpHost?: string;
  /** `--port` (`PORT`). */
  readonly httpPort?: string;
  /** `--debug-host` (`DEBUG_HOST`). */
  readonly debugHost?: string;
  /** `--debug-port` (`DEBUG_PORT`). */
  readonly debugPort?: string;
  /** `--log-level`. */
  readonly logLevel?: string;
  /** `--log-format`. */
  readonly logFormat?: string;
  /** `--backend-type`. */
  readonly backendType?: string;
  /** `--shadow-mode` (a boolean flag). */
  readonly shadowMode?: boolean;
}

const LOG_LEVELS: Readonly<Record<string, LogLevel>> = {
  trace: 'trace',
  debug: 'debug',
  info: 'info',
  warn: 'warn',
  warning: 'warn',
  error: 'error',
  fatal: 'fatal',
  panic: 'fatal',
};

/**
 * Read settings from `env` and `flags` (flags win). Throws one SluiceError INVALID_SETTINGS whose
 * message lists every problem, one per line.
 */
export function loadSettings(env: NodeJS.ProcessEnv, flags: SettingFlags = {}): Settings {
  const r = new Reader(env);

  const { logLevel, logFormat } = logSettings(r, flags);
  const backendSet = flags.backendType ?? r.raw('BACKEND_TYPE');
  const backendTypeInferred = backendSet === undefined && r.raw('REDIS_URL') !== undefined;
  const backendText = (backendSet ?? (backendTypeInferred ? 'redis' : 'memory')).toLowerCase();
  if (backendText !== 'memory' && backendText !== 'redis') {
    r.problems.push(
      `${r.label('BACKEND_TYPE', backendText, flags.backendType !== undefined)}: expected memory or redis`,
    );
  }
  const backendType = backendText === 'redis' ? 'redis' : 'memory';
  // Read (and checked) whatever the backend, so a typo fails this start, not the day the backend
  // changes; only the Redis store requires its address.
  const redisOptions = redisSettings(r, backendType === 'redis');
  const failureText = r.string('STORE_FAILURE_MODE', 'error').toLowerCase();
  if (failureText !== 'error' && failureText !== 'allow' && failureText !== 'memory') {
    r.problems.push(
      `STORE_FAILURE_MODE=${JSON.stringify(failureText)}: expected error, allow or memory`,
    );
  }

  // The byte budgets' defaults grow with it, so raising it alone never fails the start.
  const maxMessageBytes = r.int('GRPC_MAX_RECEIVE_MESSAGE_LENGTH', 1_048_576, 1024, 64 * 1_048_576);
  const configType = configTypeSetting(r);
  const settings: Settings = {
    grpcHost: r.string('GRPC_HOST', '0.0.0.0', flags.grpcHost),
    grpcPort: r.int('GRPC_PORT', 8081, 0, 65535, flags.grpcPort),
    grpcServer: grpcServerKind(r),
    logLevel,
    logFormat,
    config: configSource(r, flags.config),
    configType,
    xds: xdsSettingsChecked(r, configType, flags.config),
    forceStartWithoutInitialConfig: r.bool('FORCE_START_WITHOUT_INITIAL_CONFIG', false),
    healthyWithAtLeastOneConfigLoaded: r.bool('HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED', false),
    notices: notices(r),
    mergeDomainConfigs: r.bool('MERGE_DOMAIN_CONFIG', false),
    backendType,
    backendTypeInferred,
    redis: backendType === 'redis' ? redisOptions : undefined,
    storeFailureMode: failureText === 'allow' || failureText === 'memory' ? failureText : 'error',
    algorithmRefusal:
      backendType === 'redis' && redisOptions.mode === 'cached' ? CACHED_MODE_REFUSAL : undefined,
    memoryMaxKeys: r.int('MEMORY_MAX_KEYS', 1_000_000, 1, 1_000_000_000),
    // Unset, the store derives it from the old-space limit of the process it runs in.
    memoryMaxBytes:
      r.raw('MEMORY_MAX_BYTES') === undefined
        ? undefined
        : r.int('MEMORY_MAX_BYTES', 0, 1_048_576, 2 ** 50),
    metricsMaxSeriesPerRule: r.int('METRICS_MAX_SERIES_PER_RULE', 1_000, 0, 1_000_000),
    metricsMaxSeries: r.int('METRICS_MAX_SERIES', 10_000, 0, 1_000_000),
    ...configLimits(r),
    shadowMode: r.bool('SHADOW_MODE', false, flags.shadowMode),
    defaultAlgorithm: defaultAlgorithm(r),
    quotaMode: r.bool('QUOTA_MODE', false),
    responseDynamicMetadata: r.bool('RESPONSE_DYNAMIC_METADATA', false),
    maxDescriptorsPerRequest: r.int('MAX_DESCRIPTORS_PER_REQUEST', 64, 1, 100_000),
    maxEntriesPerDescriptor: r.int('MAX_ENTRIES_PER_DESCRIPTOR', 32, 1, 100_000),
    maxEntryLength: r.int('MAX_ENTRY_LENGTH', 4096, 1, 1_048_576),
    grpcMaxReceiveMessageBytes: maxMessageBytes,
    shutdownGraceMs: r.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    workers: workersSetting(r, backendType),
    httpHost: r.string('HOST', '0.0.0.0', flags.httpHost),
    httpPort: r.int('PORT', 8080, 0, 65535, flags.httpPort),
    debugHost: r.string('DEBUG_HOST', '127.0.0.1', flags.debugHost),
    debugPort: r.int('DEBUG_PORT', 6070, 0, 65535, flags.debugPort),
    debugConsoleResetEnabled: r.bool('DEBUG_CONSOLE_RESET_ENABLED', false),
    debugConsoleResetToken: r.raw('DEBUG_CONSOLE_RESET_TOKEN'),
    debugAllowedHosts: (r.raw('DEBUG_ALLOWED_HOSTS') ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter((name) => name !== ''),
    nearLimitRatio: r.ratio('NEAR_LIMIT_RATIO', 0.8),
    responseHeadersEnabled: r.bool('LIMIT_RESPONSE_HEADERS_ENABLED', false),
    responseHeadersFormat: headersFormat(r),
    limitHeader: r.string('LIMIT_LIMIT_HEADER', 'RateLimit-Limit'),
    remainingHeader: r.string('LIMIT_REMAINING_HEADER', 'RateLimit-Remaining'),
    resetHeader: r.string('LIMIT_RESET_HEADER', 'RateLimit-Reset'),
    problemJsonEnabled: r.bool('LIMIT_PROBLEM_JSON_ENABLED', false),
    shutdownDelayMs: r.int('SHUTDOWN_DELAY_MS', 0, 0, 600_000),
    grpcTls: grpcTlsSettings(r),
    grpcConnections: grpcConnectionSettings(r),
    stats: statsSettings(r),
    tracing: tracingSettings(r),
    ...grpcBudgets(r, maxMessageBytes),
    rlqs: {
      maxStreams: r.int('RLQS_MAX_STREAMS', 1_000, 1, 1_000_000),
      maxBucketsPerStream: r.int('RLQS_MAX_BUCKETS_PER_STREAM', 1_000, 1, 1_000_000),
      maxBuckets: r.int('RLQS_MAX_BUCKETS', 100_000, 1, 10_000_000),
    },
    httpRequestTimeoutMs: r.duration('HTTP_REQUEST_TIMEOUT', 30_000),
  };

  crossChecks(r, settings);
  throwIfProblems(r);
  return Object.freeze(settings);
}

/** `LOG_LEVEL` and `LOG_FORMAT` (flags win). */
function logSettings(
  r: Reader,
  flags: SettingFlags,
): { logLevel: LogLevel; logFormat: 'json' | 'text' } {
  const levelText = r.string('LOG_LEVEL', 'warn', flags.logLevel);
  const logLevel = LOG_LEVELS[levelText.toLowerCase()];
  if (logLevel === undefined) {
    r.problems.push(
      `${r.label('LOG_LEVEL', levelText, flags.logLevel !== undefined)}: expected one of trace, debug, info, warn, error, fatal`,
    );
  }
  const formatText = r.string('LOG_FORMAT', 'json', flags.logFormat).toLowerCase();
  if (formatText !== 'json' && formatText !== 'text') {
    r.problems.push(
      `${r.label('LOG_FORMAT', formatText, flags.logFormat !== undefined)}: expected json or text`,
    );
  }
  return { logLevel: logLevel ?? 'warn', logFormat: formatText === 'text' ? 'text' : 'json' };
}

/** What `REDIS_MODE=cached` refuses in the rules (docs/cached-mode.md, "Algorithms"). */
const CACHED_MODE_REFUSAL: AlgorithmRefusal = Object.freeze({
  algorithms: ALGORITHMS.filter((name) => !CACHED_MODE_ALGORITHMS.includes(name)),
  setting: 'REDIS_MODE=cached',
  reason: 'a periodically synced count cannot keep its exactness (see docs/cached-mode.md)',
  otherwise: 'set REDIS_MODE=exact',
});

/** Problems no single setting shows: bounds that depend on each other. */
function crossChecks(r: Reader, settings: Settings): void {
  const refusal = settings.algorithmRefusal;
  if (refusal?.algorithms.includes(settings.defaultAlgorithm) === true) {
    r.problems.push(
      `DEFAULT_ALGORITHM=${settings.defaultAlgorithm}: ${refusal.setting} cannot count it ` +
        `(${refusal.reason}); set DEFAULT_ALGORITHM to one of ${CACHED_MODE_ALGORITHMS.join(', ')}, ` +
        'or REDIS_MODE=exact',
    );
  }
  if (settings.httpRequestTimeoutMs < 1_000) {
    r.problems.push(
      `HTTP_REQUEST_TIMEOUT=${JSON.stringify(r.raw('HTTP_REQUEST_TIMEOUT'))}: expected at least 1s (requests need time to arrive)`,
    );
  }
  // A budget smaller than one message would refuse every large request.
  for (const name of ['GRPC_MAX_CONNECTION_BUFFER_BYTES', 'MAX_REQUEST_BUFFER_BYTES'] as const) {
    const value =
      name === 'MAX_REQUEST_BUFFER_BYTES'
        ? settings.maxRequestBufferBytes
        : settings.grpcLimits.maxConnectionBufferBytes;
    if (value < settings.grpcMaxReceiveMessageBytes + 65_536) {
      r.problems.push(
        `${name}=${value}: must be at least GRPC_MAX_RECEIVE_MESSAGE_LENGTH + 64 KiB (${settings.grpcMaxReceiveMessageBytes + 65_536}), or a request of the largest size could never be received`,
      );
    }
  }

  // A batch larger than the cap could evict its own counters while they are being charged.
  if (settings.memoryMaxKeys < settings.maxDescriptorsPerRequest) {
    r.problems.push(
      `MEMORY_MAX_KEYS=${settings.memoryMaxKeys}: must be at least MAX_DESCRIPTORS_PER_REQUEST ` +
        `(${settings.maxDescriptorsPerRequest}), or one request could evict its own counters`,
    );
  }
}

/**
 * What `sluice check` needs: only the settings that change how rules validate, so unrelated
 * settings cannot fail it. `REDIS_MODE=cached` refuses the algorithms that mode cannot count, as
 * the server would (whatever `BACKEND_TYPE`: the check has no store).
 */
export function loadCheckSettings(env: NodeJS.ProcessEnv): {
  readonly mergeDomainConfigs: boolean;
  readonly defaultAlgorithm: Algorithm;
  readonly configMaxRulesPerFile: number;
  readonly configMaxRules: number;
  readonly algorithmRefusal: AlgorithmRefusal | undefined;
} {
  const r = new Reader(env);
  const mergeDomainConfigs = r.bool('MERGE_DOMAIN_CONFIG', false);
  const algorithm = defaultAlgorithm(r);
  const limits = configLimits(r);
  const cached = r.string('REDIS_MODE', 'exact').toLowerCase() === 'cached';
  throwIfProblems(r);
  return {
    mergeDomainConfigs,
    defaultAlgorithm: algorithm,
    ...limits,
    algorithmRefusal: cached ? CACHED_MODE_REFUSAL : undefined,
  };
}

/** `CONFIG_MAX_RULES_PER_FILE` and `CONFIG_MAX_RULES` (docs/operations.md, "Rule file bounds"). */
function configLimits(r: Reader): { configMaxRulesPerFile: number; configMaxRules: number } {
  return {
    configMaxRulesPerFile: r.int('CONFIG_MAX_RULES_PER_FILE', 20_000, 1, 1_000_000),
    configMaxRules: r.int('CONFIG_MAX_RULES', 100_000, 1, 10_000_000),
  };
}

/** `DEFAULT_ALGORITHM`: one of ALGORITHMS, case-insensitive; default the registry's default. */
function defaultAlgorithm(r: Reader): Algorithm {
  const text = r.string('DEFAULT_ALGORITHM', DEFAULT_ALGORITHM);
  const algorithm = ALGORITHMS.find((name) => name === text.toLowerCase());
  if (algorithm === undefined) {
    r.problems.push(
      `DEFAULT_ALGORITHM=${JSON.stringify(text)}: expected one of ${ALGORITHMS.join(', ')}`,
    );
    return DEFAULT_ALGORITHM;
  }
  return algorithm;
}

/**
 * `WORKERS`: 1 to 256 server processes; default one per core with the Redis store, 1 with the
 * memory store, which refuses more (each process would count on its own).
 */
function workersSetting(r: Reader, backendType: 'memory' | 'redis'): number {
  if (backendType === 'memory') {
    const workers = r.int('WORKERS', 1, 1, 256);
    if (workers > 1) {
      r.problems.push(
        `WORKERS=${workers}: the memory store keeps its counters in one process; use WORKERS=1 ` +
          '(or leave it unset), or BACKEND_TYPE=redis to serve from several processes',
      );
    }
    return 1;
  }
  return r.int('WORKERS', Math.min(256, os.availableParallelism()), 1, 256);
}

/**
 * Reference settings read only to be checked, and the notices they give. `RUNTIME_IGNOREDOTFILES`
 * and `RUNTIME_WATCH_ROOT` are booleans the reference refuses to start with when malformed; sluice
 * checks them the same way and then needs neither (docs/compatibility.md). Envoy Gateway sets
 * `GRPC_SERVER_TLS_CA_CERT`, a name the reference never reads: its gRPC port then asks for no
 * client certificate, and neither does sluice's (docs/envoy-gateway.md).
 */
function notices(r: Reader): string[] {
  r.bool('RUNTIME_IGNOREDOTFILES', false);
  r.bool('RUNTIME_WATCH_ROOT', true);
  const out: string[] = [];
  const caCert = r.raw('GRPC_SERVER_TLS_CA_CERT');
  if (caCert !== undefined) {
    out.push(
      `GRPC_SERVER_TLS_CA_CERT=${JSON.stringify(caCert)} is not read (nor by the reference): client certificates on the gRPC port are verified only with GRPC_CLIENT_TLS_CACERT`,
    );
  }
  return out;
}

/** `LIMIT_RESPONSE_HEADERS_FORMAT`: `reference` (default) or `ietf`, case-insensitive. */
function headersFormat(r: Reader): 'reference' | 'ietf' {
  const text = r.string('LIMIT_RESPONSE_HEADERS_FORMAT', 'reference').toLowerCase();
  if (text === 'reference' || text === 'ietf') return text;
  r.problems.push(
    `LIMIT_RESPONSE_HEADERS_FORMAT=${JSON.stringify(text)}: expected reference or ietf`,
  );
  return 'reference';
}

function throwIfProblems(r: Reader): void {
  if (r.problems.length > 0) {
    // A variable read twice (the Redis TLS files serve both connections) is named once.
    const unique = [...new Set(r.problems)];
    throw new SluiceError(
      'INVALID_SETTINGS',
      `invalid settings:\n${unique.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
}

/**
 * `--config` wins; else the reference's layout when any `RUNTIME_*` location variable is set:
 * `$RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY`; else the bundled demo rules.
 */
function configSource(r: Reader, flagPaths: readonly string[] | undefined): ConfigSource {
  if (flagPaths !== undefined && flagPaths.length > 0) {
    return { paths: [...flagPaths], origin: 'flags' };
  }
  const root = r.raw('RUNTIME_ROOT');
  const sub = r.raw('RUNTIME_SUBDIRECTORY');
  const app = r.raw('RUNTIME_APPDIRECTORY');
  if (root !== undefined || sub !== undefined || app !== undefined) {
    return {
      paths: [path.join(root ?? DEFAULT_RUNTIME_ROOT, sub ?? '', app ?? 'config')],
      origin: 'runtime',
    };
  }
  return { paths: [BUNDLED_CONFIG_DIR], origin: 'bundled' };
}
