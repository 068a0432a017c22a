/**
 * The pino root logger. Modules take a child (`logger.child({ module: 'grpc' })`) passed in by
 * the composition root; nothing in the core imports a global logger.
 */
import { Writable } from 'node:stream';
import { pino, type Logger, type DestinationStream } from 'pino';
import { REDACTED, redactUrl, scrubSecrets } from './redact.js';

export type { Logger } from 'pino';

/** Log levels (`LOG_LEVEL` takes the reference's logrus names, case-insensitive). */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal';

/** Options for {@link createLogger}. */
export interface LoggerOptions {
  /** Lowest level written. */
  readonly level: LogLevel;
  /** `json` (one JSON object per line) or `text` (one readable line per event). */
  readonly format: 'json' | 'text';
  /** Where lines go; default stdout. */
  readonly destination?: DestinationStream;
  /**
   * Secret values (see `secretsFromEnv`) removed from every line before it is written, whatever
   * field or message they are in; default none.
   */
  readonly secrets?: readonly string[];
}

/** Paths whose values never reach the logs. */
const REDACT = [
  'password',
  'auth',
  '*.password',
  '*.auth',
  'redisAuth',
  '*.redisAuth',
  'REDIS_AUTH',
  '*.REDIS_AUTH',
];

/** Paths holding URLs: logged with their credentials replaced (`redactUrl`). */
const REDACT_URLS = ['redisUrl', '*.redisUrl', 'REDIS_URL', '*.REDIS_URL', 'url', '*.url'];
const URL_KEYS = new Set(['redisUrl', 'REDIS_URL', 'url']);

/** Create the root logger. */
export function createLogger(options: LoggerOptions): Logger {
  const base = {
    level: options.level,
    base: { service: 'sluice' },
    redact: {
      paths: [...REDACT, ...REDACT_URLS],
      censor: (value: unknown, path: readonly unknown[]): unknown => {
        const last = path[path.length - 1];
        const isUrl = typeof last === 'string' && URL_KEYS.has(last);
        return isUrl && typeof value === 'string' ? redactUrl(value) : REDACTED;
      },
    },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  let destination: DestinationStream =
    options.destination ?? pino.destination({ fd: 1, sync: false });
  const secrets = options.secrets ?? [];
  if (secrets.length > 0) destination = scrubbing(destination, secrets);
  return pino(base, options.format === 'text' ? textStream(destination) : destination);
}

/** Write each line to `out` with every secret value removed (logging is off the hot path). */
function scrubbing(out: DestinationStream, secrets: readonly string[]): DestinationStream {
  return {
    write(line: string) {
      out.write(scrubSecrets(line, secrets));
    },
  };
}

/** A logger that discards everything; for tests and benchmarks. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}

/**
 * Rewrites pino's JSON lines as `time LEVEL msg key=value ...`. Logging is off the hot path, so
 * re-parsing each line is acceptable and saves a dependency.
 */
function textStream(out: DestinationStream): Writable {
  const names: Record<number, string> = {
    10: 'TRACE',
    20: 'DEBUG',
    30: 'INFO',
    40: 'WARN',
    50: 'ERROR',
    60: 'FATAL',
  };
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      try {
        const {
          time,
          level,
          msg,
          service: _service,
          ...rest
        } = JSON.parse(chunk.toString()) as {
          time?: string;
          level?: number;
          msg?: string;
          service?: string;
          [field: string]: unknown;
        };
        const fields = Object.entries(rest)
          .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
          .join(' ');
        out.write(
          `${time ?? ''} ${names[level ?? 30] ?? 'INFO'} ${msg ?? ''} ${fields}`.trimEnd() + '\n',
        );
      } catch {
        out.write(chunk.toString());
      }
      done();
    },
  });
}
