/**
 * Time source passed into the core so tests can drive it by hand.
 */

/** Returns the current time in milliseconds since the Unix epoch (may be fractional). */
export type Clock = () => number;

/** The real wall clock. */
export const systemClock: Clock = () => Date.now();

/** A clock that only moves when told to; for tests and benchmarks. */
export interface ManualClock {
  /** Read the time (ms). */
  readonly now: Clock;
  /** Move the time forward by `ms` milliseconds. */
  advance(ms: number): void;
  /** Set the time to `ms`. */
  set(ms: number): void;
}

/** Create a manual clock starting at `startMs` (default: 1_700_000_000_000). */
export function createManualClock(startMs = 1_700_000_000_000): ManualClock {
  let nowMs = startMs;
  return {
    now: () => nowMs,
    advance(ms) {
      nowMs += ms;
    },
    set(ms) {
      nowMs = ms;
    },
  };
}
