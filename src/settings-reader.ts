/**
 * Reading one environment variable (or the flag that overrides it) as a typed value, collecting
 * every problem so that settings.ts and settings-telemetry.ts report them all at once.
 */

/** Go's strconv.ParseBool, which the reference uses for its boolean variables. */
const TRUE_WORDS = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE_WORDS = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** The command-line flag that overrides each variable, so a message names what the user typed. */
const FLAG_NAMES: Readonly<Record<string, string>> = {
  GRPC_HOST: '--grpc-host',
  GRPC_PORT: '--grpc-port',
  HOST: '--host',
  PORT: '--port',
  DEBUG_HOST: '--debug-host',
  DEBUG_PORT: '--debug-port',
  LOG_LEVEL: '--log-level',
  LOG_FORMAT: '--log-format',
  BACKEND_TYPE: '--backend-type',
};

/** Collects problems while reading settings, so all are reported together. */
export class Reader {
  readonly problems: string[] = [];

  constructor(private readonly env: NodeJS.ProcessEnv) {}

  raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value === '' ? undefined : value;
  }

  /** How a problem names a value: `--flag "text"` when the flag gave it, else `NAME="text"`. */
  label(name: string, text: string, fromFlag: boolean): string {
    const flagName = FLAG_NAMES[name];
    return fromFlag && flagName !== undefined
      ? `${flagName} ${JSON.stringify(text)}`
      : `${name}=${JSON.stringify(text)}`;
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
        `${this.label(name, text, flag !== undefined)}: expected an integer from ${min} to ${max}`,
      );
      return fallback;
    }
    return value;
  }

  /** A Go duration (`30s`, `1h`, `0`) in whole ms, at least 0. */
  duration(name: string, fallback: number): number {
    const text = this.raw(name);
    if (text === undefined) return fallback;
    const ms = goDurationMs(text.trim());
    // Node's timers take at most 2^31 - 1 ms (about 24.8 days).
    if (ms === undefined || ms < 0 || ms > 2_147_483_647) {
      this.problems.push(
        `${name}=${JSON.stringify(text)}: expected a duration from 0 to 596h, such as 500ms, 30s, 2h or 1h30m`,
      );
      return fallback;
    }
    return ms;
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
    this.problems.push(
      `${name}=${JSON.stringify(text)}: expected true or false (accepted: ${[...TRUE_WORDS].join(', ')} for true; ${[...FALSE_WORDS].join(', ')} for false)`,
    );
    return fallback;
  }
}

/**
 * Shortest accepted wait between attempts or flushes, ms: below it a loop that waits this long
 * (a reconnect to a server that refuses at once, an idle stats flush) burns a core for nothing.
 */
const MIN_INTERVAL_MS = 100;

/** A duration setting that must be at least {@link MIN_INTERVAL_MS}; a shorter one is a problem. */
export function atLeast(r: Reader, name: string, fallback: number): number {
  const ms = r.duration(name, fallback);
  if (ms >= MIN_INTERVAL_MS) return ms;
  r.problems.push(
    `${name}=${JSON.stringify(r.raw(name))}: expected at least ${MIN_INTERVAL_MS}ms, such as ${fallback / 1000}s (the default); a shorter interval loops without rest`,
  );
  return fallback;
}

const DURATION_UNITS_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * A Go `time.Duration` string (`10s`, `200ms`, `1m30s`, `1.5s`, `0`) in whole ms (a positive
 * duration under 1 ms rounds up to 1); `undefined` when it is not one.
 */
export function goDurationMs(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === '0') return 0;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;
  let total = 0;
  let at = 0;
  while (at < trimmed.length) {
    part.lastIndex = at;
    const match = part.exec(trimmed);
    if (match === null) return undefined;
    total += Number(match[1]) * DURATION_UNITS_MS[match[2]!]!;
    at = part.lastIndex;
  }
  if (at === 0) return undefined;
  return total > 0 ? Math.max(1, Math.ceil(total)) : 0;
}
