/**
 * Bounded logging of what clients cause: at most a few lines per cause and interval, and any
 * client-supplied text cut short, so no stream of bad requests can flood the log.
 */

/** Options for {@link createLogLimiter}. */
export interface LogLimiterOptions {
  /** Lines allowed per cause in each interval (default 5). */
  readonly lines?: number;
  /** The interval, ms (default 60 s). */
  readonly intervalMs?: number;
  /** Monotonic clock, ms (default `performance.now`). */
  readonly now?: () => number;
}

/**
 * Decides, per cause, whether a line may be written now. Returns `undefined` when the cause has
 * used its lines in the current interval, else how many lines of that cause were dropped since
 * the last one written (to put in the line, so the log says that more happened).
 */
export type LogLimiter = (cause: string) => number | undefined;

/** A {@link LogLimiter}; causes must be a small fixed set (they are kept). */
export function createLogLimiter(options: LogLimiterOptions = {}): LogLimiter {
  const lines = options.lines ?? 5;
  const intervalMs = options.intervalMs ?? 60_000;
  const now = options.now ?? (() => performance.now());
  const state = new Map<string, { start: number; written: number; dropped: number }>();
  return (cause) => {
    const t = now();
    let entry = state.get(cause);
    if (entry === undefined || t - entry.start >= intervalMs) {
      entry = { start: t, written: 0, dropped: entry?.dropped ?? 0 };
      state.set(cause, entry);
    }
    if (entry.written >= lines) {
      entry.dropped++;
      return undefined;
    }
    entry.written++;
    const dropped = entry.dropped;
    entry.dropped = 0;
    return dropped;
  };
}

/** Longest client-supplied text quoted in a log line or an error message, characters. */
const MAX_QUOTED_CHARS = 64;

/**
 * `text` cut to `max` characters, with how long it was when cut (`abc... (4096 chars)`), so a
 * value a client chose can be named in a log line without being copied into it at length.
 */
export function truncateForLog(text: string, max = MAX_QUOTED_CHARS): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}... (${text.length} chars)`;
}
