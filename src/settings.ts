/**
 * Settings: environment variables (the reference's names and defaults where it has them) and
 * command-line flags, turned into one frozen, typed object. Every problem is reported at once.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SluiceError } from './errors.js';

/** Log levels accepted in `LOG_LEVEL` (the reference's logrus names, case-insensitive). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

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
  /** Rule files (from `--config`, `RUNTIME_*`, or the bundled demo). */
  readonly config: ConfigSource;
  /** `MERGE_DOMAIN_CONFIG`: merge files that declare the same domain instead of failing. */
  readonly mergeDomainConfigs: boolean;
  /** `BACKEND_TYPE`: only `memory` exists so far. */
  readonly backendType: 'memory';
  /** `MEMORY_MAX_KEYS`: cap on live counters in the memory store (default 1,000,000). */
  readonly memoryMaxKeys: number;
  /** `SHADOW_MODE`: answer OK overall while statuses keep their real codes. */
  readonly shadowMode: boolean;
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
  /** HTTP listen address for /healthcheck, /json and /metrics (`HOST`, default `0.0.0.0`). */
  readonly httpHost: string;
  /** HTTP listen port (`PORT`, default 8080; 0 picks a free port). */
  readonly httpPort: number;
  /** Debug listen address (`DEBUG_HOST`, default `127.0.0.1`: loopback unless set). */
  readonly debugHost: string;
  /** Debug listen port (`DEBUG_PORT`, default 6070; 0 picks a free port). */
  readonly debugPort: number;
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

/** Go's strconv.ParseBool, which the reference uses for its boolean variables. */
const TRUE_WORDS = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE_WORDS = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** Collects problems while reading settings, so all are reported together. */
class Reader {
  readonly problems: string[] = [];

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value;
  }

  string(name: string, fallback: string, flag?: string): string {
    return flag ?? this.raw(name) ?? fallback;
  }

  int(name: string, fallback: number, min: number, max: number, flag?: string): number {
    const text = flag ?? this.raw(name);
    if (text === undefined) return fallback;
    const value = Number(text.trim());
    if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < min || value > max) {
      this.problems.push(
        `${name}=${JSON.stringify(text)}: expected an integer from ${min} to ${max}`,
      );
      return fallback;
    }
    return value;
  }

  ratio(name: string, fallback: number): number {
    const text = this.raw(name);
    if (text === undefined) return fallback;
    const value = Number(text.trim());
    if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > 1) {
      this.problems.push(`${name}=${JSON.stringify(text)}: expected a number from 0 to 1`);
      return fallback;
    }
    return value;
  }

  bool(name: string, fallback: boolean, flag?: boolean): boolean {
    if (flag !== undefined) return flag;
    const text = this.raw(name);
    if (text === undefined) return fallback;
    if (TRUE_WORDS.has(text)) return true;
    if (FALSE_WORDS.has(text)) return false;
    this.problems.push(`${name}=${JSON.stringify(text)}: expected true or false`);
    return fallback;
  }
}

/**
 * Read settings from `env` and `flags` (flags win). Throws one SluiceError INVALID_SETTINGS whose
 * message lists every problem, one per line.
 */
export function loadSettings(env: NodeJS.ProcessEnv, flags: SettingFlags = {}): Settings {
  const r = new Reader(env);

  const levelText = r.string('LOG_LEVEL', 'warn', flags.logLevel);
  const logLevel = LOG_LEVELS[levelText.toLowerCase()];
  if (logLevel === undefined) {
    r.problems.push(
      `LOG_LEVEL=${JSON.stringify(levelText)}: expected one of trace, debug, info, warn, error, fatal`,
    );
  }
  const formatText = r.string('LOG_FORMAT', 'json', flags.logFormat).toLowerCase();
  if (formatText !== 'json' && formatText !== 'text') {
    r.problems.push(`LOG_FORMAT=${JSON.stringify(formatText)}: expected json or text`);
  }
  const backendText = r.string('BACKEND_TYPE', 'memory', flags.backendType).toLowerCase();
  if (backendText !== 'memory') {
    r.problems.push(
      `BACKEND_TYPE=${JSON.stringify(backendText)}: only "memory" is available in this version ` +
        '(the Redis store is not implemented yet); unset BACKEND_TYPE or set it to memory',
    );
  }

  const settings: Settings = {
    grpcHost: r.string('GRPC_HOST', '0.0.0.0', flags.grpcHost),
    grpcPort: r.int('GRPC_PORT', 8081, 0, 65535, flags.grpcPort),
    grpcServer: grpcServerKind(r),
    logLevel: logLevel ?? 'warn',
    logFormat: formatText === 'text' ? 'text' : 'json',
    config: configSource(r, flags.config),
    mergeDomainConfigs: r.bool('MERGE_DOMAIN_CONFIG', false),
    backendType: 'memory',
    memoryMaxKeys: r.int('MEMORY_MAX_KEYS', 1_000_000, 1, 1_000_000_000),
    shadowMode: r.bool('SHADOW_MODE', false, flags.shadowMode),
    maxDescriptorsPerRequest: r.int('MAX_DESCRIPTORS_PER_REQUEST', 64, 1, 100_000),
    maxEntriesPerDescriptor: r.int('MAX_ENTRIES_PER_DESCRIPTOR', 32, 1, 100_000),
    maxEntryLength: r.int('MAX_ENTRY_LENGTH', 4096, 1, 1_048_576),
    grpcMaxReceiveMessageBytes: r.int(
      'GRPC_MAX_RECEIVE_MESSAGE_LENGTH',
      1_048_576,
      1024,
      64 * 1_048_576,
    ),
    shutdownGraceMs: r.int('SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    httpHost: r.string('HOST', '0.0.0.0'),
    httpPort: r.int('PORT', 8080, 0, 65535),
    debugHost: r.string('DEBUG_HOST', '127.0.0.1'),
    debugPort: r.int('DEBUG_PORT', 6070, 0, 65535),
    nearLimitRatio: r.ratio('NEAR_LIMIT_RATIO', 0.8),
    responseHeadersEnabled: r.bool('LIMIT_RESPONSE_HEADERS_ENABLED', false),
    responseHeadersFormat: headersFormat(r),
    limitHeader: r.string('LIMIT_LIMIT_HEADER', 'RateLimit-Limit'),
    remainingHeader: r.string('LIMIT_REMAINING_HEADER', 'RateLimit-Remaining'),
    resetHeader: r.string('LIMIT_RESET_HEADER', 'RateLimit-Reset'),
    problemJsonEnabled: r.bool('LIMIT_PROBLEM_JSON_ENABLED', false),
    shutdownDelayMs: r.int('SHUTDOWN_DELAY_MS', 0, 0, 600_000),
  };

  // A batch larger than the cap could evict its own counters while they are being charged.
  if (settings.memoryMaxKeys < settings.maxDescriptorsPerRequest) {
    r.problems.push(
      `MEMORY_MAX_KEYS=${settings.memoryMaxKeys}: must be at least MAX_DESCRIPTORS_PER_REQUEST ` +
        `(${settings.maxDescriptorsPerRequest}), or one request could evict its own counters`,
    );
  }

  throwIfProblems(r);
  return Object.freeze(settings);
}

/** What `sluice check` needs: only `MERGE_DOMAIN_CONFIG`, so unrelated settings cannot fail it. */
export function loadCheckSettings(env: NodeJS.ProcessEnv): {
  readonly mergeDomainConfigs: boolean;
} {
  const r = new Reader(env);
  const mergeDomainConfigs = r.bool('MERGE_DOMAIN_CONFIG', false);
  throwIfProblems(r);
  return { mergeDomainConfigs };
}

/** `GRPC_SERVER`: `lean` (default) or `grpc-js`, case-insensitive. */
function grpcServerKind(r: Reader): 'lean' | 'grpc-js' {
  const text = r.string('GRPC_SERVER', 'lean').toLowerCase();
  if (text === 'lean' || text === 'grpc-js') return text;
  r.problems.push(`GRPC_SERVER=${JSON.stringify(text)}: expected lean or grpc-js`);
  return 'lean';
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
    throw new SluiceError(
      'INVALID_SETTINGS',
      `invalid settings:\n${r.problems.map((p) => `  - ${p}`).join('\n')}`,
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
