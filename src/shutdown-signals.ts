/**
 * SIGTERM and SIGINT, the signals that start a drain. A second signal ends the process at once,
 * but one Ctrl-C can arrive twice: the terminal sends SIGINT to the whole foreground process
 * group, and `npm start` (npm's run-script) forwards the SIGINT it got itself to its child. So
 * the same signal again within {@link REPEAT_WINDOW_MS} of the first is the same request, and
 * only a later one (or another signal) is a second.
 */
import { systemClock, type Clock } from './clock.js';

/** How long after the first signal the same signal again is taken as the same request, ms. */
export const REPEAT_WINDOW_MS = 1_000;

/** The log line of an ignored repeat: what happened, and how to exit at once anyway. */
export const REPEATED_SIGNAL =
  'the same signal again at once (Ctrl-C under npm start arrives twice): still draining; ' +
  'send it once more to exit now';

/** What to do with a signal: the first, a repeat of it to ignore, or a second (exit now). */
export type SignalKind = 'first' | 'repeat' | 'second';

/**
 * A classifier of shutdown signals in arrival order, on the clock `now` (ms). Only the first
 * signal opens the window: a repeat of it within {@link REPEAT_WINDOW_MS} is `repeat`, anything
 * after (or any other signal) is `second`.
 */
export function createSignalClassifier(now: Clock): (signal: NodeJS.Signals) => SignalKind {
  let first: { signal: NodeJS.Signals; atMs: number } | undefined;
  let repeated = false;
  return (signal) => {
    if (first === undefined) {
      first = { signal, atMs: now() };
      return 'first';
    }
    // One repeat at most: npm forwards once; a third press is the user's.
    if (!repeated && signal === first.signal && now() - first.atMs < REPEAT_WINDOW_MS) {
      repeated = true;
      return 'repeat';
    }
    return 'second';
  };
}

/**
 * Call `handler` on SIGTERM and SIGINT with the signal and its {@link SignalKind}; the handler
 * decides what a repeat does (log it, nothing else).
 */
export function onShutdownSignals(
  handler: (signal: NodeJS.Signals, kind: SignalKind) => void,
  now: Clock = systemClock,
): void {
  const classify = createSignalClassifier(now);
  const listener = (signal: NodeJS.Signals): void => handler(signal, classify(signal));
  process.on('SIGTERM', listener);
  process.on('SIGINT', listener);
}
