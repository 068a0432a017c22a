/**
 * The bounded failure log (src/transport/status.ts): one line per cause and state change, one
 * count per interval while failures go on, an end-of-failures line, then a full line again.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../../src/errors.js';
import { logCallFailure, toCallError, GrpcStatus } from '../../../src/transport/status.js';
import { capturingLogger } from '../../helpers/app.js';

describe('logCallFailure', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('logs the first failure per code, counts the rest, summarises per interval, then resets', () => {
    const { logger, lines } = capturingLogger();
    const store = new SluiceError('STORE_UNAVAILABLE', 'redis down');
    const internal = new SluiceError('INTERNAL', 'bug');
    for (let k = 0; k < 1_000; k++) logCallFailure(logger, store, 'call failed', 1_000);
    logCallFailure(logger, internal, 'call failed', 1_000);
    expect(lines.map((l) => [l.level, l.code, l.msg])).toEqual([
      [
        50,
        'STORE_UNAVAILABLE',
        'call failed; further failures of this kind are counted and logged once per 1 s',
      ],
      [
        50,
        'INTERNAL',
        'call failed; further failures of this kind are counted and logged once per 1 s',
      ],
    ]);
    expect(lines[0]!.err).toMatchObject({ message: 'redis down' });
    vi.advanceTimersByTime(1_000);
    expect(lines.slice(2)).toEqual([
      expect.objectContaining({
        level: 50,
        code: 'STORE_UNAVAILABLE',
        failedCalls: 999,
        intervalMs: 1_000,
        msg: 'call failed (repeated)',
      }),
      expect.objectContaining({
        level: 30,
        code: 'INTERNAL',
        msg: 'call failed: no more failures of this kind',
      }),
    ]);
    vi.advanceTimersByTime(1_000);
    expect(lines.slice(4)).toEqual([
      expect.objectContaining({
        level: 30,
        code: 'STORE_UNAVAILABLE',
        msg: 'call failed: no more failures of this kind',
      }),
    ]);
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(10_000);
    expect(lines).toHaveLength(5);
    // A new outage logs in full again.
    logCallFailure(logger, store, 'call failed', 1_000);
    expect(lines).toHaveLength(6);
    expect(lines[5]!.err).toMatchObject({ message: 'redis down' });
    expect(vi.getTimerCount()).toBe(1);
  });

  it('defaults to a one-minute interval; toCallError logs only server-side failures', () => {
    const { logger, lines } = capturingLogger();
    expect(toCallError(new SluiceError('INVALID_REQUEST', 'bad'), logger)).toEqual({
      code: GrpcStatus.INVALID_ARGUMENT,
      details: 'bad',
    });
    expect(lines).toHaveLength(0);
    expect(toCallError(new SluiceError('STORE_UNAVAILABLE', 'down'), logger).code).toBe(
      GrpcStatus.UNAVAILABLE,
    );
    expect(toCallError(new SluiceError('INTERNAL', 'x'), logger).code).toBe(GrpcStatus.INTERNAL);
    expect(lines).toHaveLength(2);
    expect(lines[0]!.msg).toBe(
      'ShouldRateLimit failed; further failures of this kind are counted and logged once per 60 s',
    );
    toCallError(new SluiceError('STORE_UNAVAILABLE', 'down'), logger);
    vi.advanceTimersByTime(59_999);
    expect(lines).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(lines).toHaveLength(4);
  });
});
