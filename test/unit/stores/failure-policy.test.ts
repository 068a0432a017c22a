/**
 * The failure policy (`STORE_FAILURE_MODE`, src/stores/failure-policy.ts, docs/configuration.md):
 * what a call answers when the remote store fails. The remote store here is a stand-in that fails
 * on demand (the policy is what is under test, not a store); the `memory` fallback is the real
 * memory store with a manual clock.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { SluiceError } from '../../../src/errors.js';
import type { StoreMetricsSink } from '../../../src/metrics/metrics.js';
import type {
  BatchResult,
  CounterSnapshot,
  CounterSpec,
  CounterStore,
} from '../../../src/stores/counter-store.js';
import { withFailurePolicy } from '../../../src/stores/failure-policy.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import { specBuilder } from '../../helpers/specs.js';

const T0 = 1_700_000_000_000;

const spec = specBuilder({ algorithm: 'fixed_window' });

/** A remote store whose next calls fail with `failure` (or answer `answer`) as the test says. */
class Remote implements CounterStore {
  failure: Error | undefined = undefined;
  up = true;
  closed = 0;
  calls = 0;
  held = 0;
  answer: BatchResult = { admitted: true, results: [] };

  apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    this.calls++;
    if (this.failure !== undefined) return Promise.reject(this.failure);
    return Promise.resolve({
      admitted: this.answer.admitted,
      results: specs.map(() => ({ overLimit: false, remaining: 42, resetMs: 7 })),
    });
  }
  size(): number {
    return this.held;
  }
  healthy(): boolean {
    return this.up;
  }
  close(): Promise<void> {
    this.closed++;
    return Promise.resolve();
  }
}

/** Counts what the policy reports. */
function recordingMetrics(): StoreMetricsSink & { fallbacks: string[] } {
  const fallbacks: string[] = [];
  return {
    fallbacks,
    evicted: () => undefined,
    storeError: () => undefined,
    localCacheOverLimit: () => undefined,
    fallback: (policy) => void fallbacks.push(policy),
  };
}

const down = (): SluiceError => new SluiceError('STORE_UNAVAILABLE', 'redis is not connected');

describe('failure policy: the remote store answers', () => {
  it.each(['error', 'allow', 'memory'] as const)(
    '%s: passes the remote answer through and counts no fallback',
    async (mode) => {
      const remote = new Remote();
      const metrics = recordingMetrics();
      const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
      const store = withFailurePolicy({ store: remote, mode, fallback, metrics });
      await expect(store.apply([spec('a', 1, 5)])).resolves.toEqual({
        admitted: true,
        results: [{ overLimit: false, remaining: 42, resetMs: 7 }],
      });
      expect(remote.calls).toBe(1);
      expect(fallback.size()).toBe(0);
      expect(metrics.fallbacks).toEqual([]);
      await store.close();
    },
  );

  it('rethrows a failure that is not STORE_UNAVAILABLE, as a SluiceError, in every mode', async () => {
    for (const mode of ['error', 'allow', 'memory'] as const) {
      const remote = new Remote();
      remote.failure = new Error('script bug');
      const metrics = recordingMetrics();
      const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
      const store = withFailurePolicy({ store: remote, mode, fallback, metrics });
      const error = await store.apply([spec('a', 1, 5)]).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SluiceError);
      expect(error).toMatchObject({ code: 'INTERNAL', message: 'script bug' });
      expect(metrics.fallbacks).toEqual([]);
      expect(fallback.size()).toBe(0);
    }
  });
});

describe('failure policy: the remote store is unavailable', () => {
  it('error: the call fails with the store error itself, counted as an `error` fallback', async () => {
    const remote = new Remote();
    const failure = down();
    remote.failure = failure;
    const metrics = recordingMetrics();
    const store = withFailurePolicy({ store: remote, mode: 'error', metrics });
    await expect(store.apply([spec('a', 1, 5)])).rejects.toBe(failure);
    expect(metrics.fallbacks).toEqual(['error']);
  });

  it('allow: admitted, every counter with its full limit remaining and no reset', async () => {
    const remote = new Remote();
    remote.failure = down();
    const metrics = recordingMetrics();
    const store = withFailurePolicy({ store: remote, mode: 'allow', metrics });
    await expect(store.apply([spec('a', 9, 5), spec('b', 1, 3)])).resolves.toEqual({
      admitted: true,
      results: [
        { overLimit: false, remaining: 5, resetMs: 0 },
        { overLimit: false, remaining: 3, resetMs: 0 },
      ],
    });
    expect(metrics.fallbacks).toEqual(['allow']);
  });

  it('memory: decided by the fallback store, which counts across calls until the remote is back', async () => {
    const clock = createManualClock(T0);
    const remote = new Remote();
    remote.failure = down();
    const metrics = recordingMetrics();
    const fallback = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const store = withFailurePolicy({ store: remote, mode: 'memory', fallback, metrics });
    const first = await store.apply([spec('a', 1, 2)]);
    expect(first.admitted).toBe(true);
    expect(first.results[0]).toMatchObject({ overLimit: false, remaining: 1 });
    await store.apply([spec('a', 1, 2)]);
    const third = await store.apply([spec('a', 1, 2)]);
    expect(third.admitted).toBe(false);
    expect(third.results[0]!.overLimit).toBe(true);
    expect(metrics.fallbacks).toEqual(['memory', 'memory', 'memory']);
    // The fallback's counters are part of the size; the remote's too.
    remote.held = 10;
    expect(store.size()).toBe(10 + fallback.size());
    expect(fallback.size()).toBe(1);
    // Back: the remote answers again, the fallback is not asked.
    remote.failure = undefined;
    await expect(store.apply([spec('a', 1, 2)])).resolves.toMatchObject({ admitted: true });
    expect(metrics.fallbacks).toHaveLength(3);
  });

  it('works without a metrics sink', async () => {
    const remote = new Remote();
    remote.failure = down();
    for (const mode of ['error', 'allow', 'memory'] as const) {
      const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
      const store = withFailurePolicy({ store: remote, mode, fallback });
      const outcome = await store.apply([spec('a', 1, 5)]).then(
        (batch) => batch.admitted,
        (error: unknown) => (error as SluiceError).code,
      );
      expect(outcome).toBe(mode === 'error' ? 'STORE_UNAVAILABLE' : true);
    }
  });

  it('memory without a fallback store is refused when the policy is built', () => {
    expect(() => withFailurePolicy({ store: new Remote(), mode: 'memory' })).toThrow(
      /STORE_FAILURE_MODE=memory needs a fallback store/,
    );
    // A wiring bug, not a client's or a store's failure: an INTERNAL error.
    expect(() => withFailurePolicy({ store: new Remote(), mode: 'memory' })).toThrow(
      expect.objectContaining({ code: 'INTERNAL' }),
    );
    expect(() => withFailurePolicy({ store: new Remote(), mode: 'allow' })).not.toThrow();
    expect(() => withFailurePolicy({ store: new Remote(), mode: 'error' })).not.toThrow();
  });
});

describe('failure policy: health, size, close and top', () => {
  it('healthy() is the remote health with `error` and always true with `allow` and `memory`', () => {
    const remote = new Remote();
    const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
    const error = withFailurePolicy({ store: remote, mode: 'error' });
    const allow = withFailurePolicy({ store: remote, mode: 'allow' });
    const memory = withFailurePolicy({ store: remote, mode: 'memory', fallback });
    expect([error.healthy(), allow.healthy(), memory.healthy()]).toEqual([true, true, true]);
    remote.up = false;
    expect([error.healthy(), allow.healthy(), memory.healthy()]).toEqual([false, true, true]);
  });

  it('size() without a fallback is the remote size', () => {
    const remote = new Remote();
    remote.held = 4;
    expect(withFailurePolicy({ store: remote, mode: 'allow' }).size()).toBe(4);
  });

  it('close() closes the remote store and the fallback', async () => {
    const remote = new Remote();
    let fallbackClosed = 0;
    const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
    const closing: CounterStore = {
      apply: (specs) => fallback.apply(specs),
      size: () => fallback.size(),
      healthy: () => true,
      close: () => {
        fallbackClosed++;
        return fallback.close();
      },
    };
    await withFailurePolicy({ store: remote, mode: 'memory', fallback: closing }).close();
    expect(remote.closed).toBe(1);
    expect(fallbackClosed).toBe(1);
    const alone = new Remote();
    await withFailurePolicy({ store: alone, mode: 'error' }).close();
    expect(alone.closed).toBe(1);
  });

  it("top() is the fallback's busiest counters, and absent without a fallback that has it", async () => {
    const remote = new Remote();
    remote.failure = down();
    const fallback = createMemoryStore({ clock: createManualClock(T0).now, sweepIntervalMs: 0 });
    const store = withFailurePolicy({ store: remote, mode: 'memory', fallback });
    await store.apply([spec('busy', 3, 10)]);
    await store.apply([spec('calm', 1, 10)]);
    const top: CounterSnapshot[] = store.top!(1);
    expect(top.map((row) => row.key)).toEqual(['busy']);
    expect(top).toEqual(fallback.top!(1));
    expect(withFailurePolicy({ store: remote, mode: 'allow' }).top === undefined).toBe(true);
    const noTop: CounterStore = {
      apply: (specs) => fallback.apply(specs),
      size: () => 0,
      healthy: () => true,
      close: () => Promise.resolve(),
    };
    expect(
      withFailurePolicy({ store: remote, mode: 'memory', fallback: noTop }).top === undefined,
    ).toBe(true);
  });
});
