/**
 * One Ctrl-C under `npm start` delivers SIGINT twice (the terminal's, and npm's forwarded copy);
 * the second must not cut the drain short (issue 32, item 5). A later signal still does.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { createSignalClassifier, REPEAT_WINDOW_MS } from '../../src/shutdown-signals.js';

describe('shutdown signal classifier', () => {
  it('takes the same signal again within the window as a repeat, once', () => {
    const clock = createManualClock();
    const classify = createSignalClassifier(() => clock.now());
    expect(classify('SIGINT')).toBe('first');
    clock.advance(REPEAT_WINDOW_MS - 1);
    expect(classify('SIGINT')).toBe('repeat');
    // A third press, however soon, is the user's: exit now.
    expect(classify('SIGINT')).toBe('second');
  });

  it('takes the same signal after the window as a second', () => {
    const clock = createManualClock();
    const classify = createSignalClassifier(() => clock.now());
    expect(classify('SIGINT')).toBe('first');
    clock.advance(REPEAT_WINDOW_MS);
    expect(classify('SIGINT')).toBe('second');
  });

  it('takes another signal as a second, however soon', () => {
    const clock = createManualClock();
    const classify = createSignalClassifier(() => clock.now());
    expect(classify('SIGINT')).toBe('first');
    expect(classify('SIGTERM')).toBe('second');
  });
});
