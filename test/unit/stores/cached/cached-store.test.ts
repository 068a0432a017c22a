/**
 * Cached mode's store (docs/cached-mode.md): local decisions by the batch rule, the sync, window
 * changes, failures and the failure policy. The shared store is a real memory store on the same
 * manual clock (what Redis does for a shadow spec: charge whatever the count, report the room),
 * reached through a wrapper that can hold, fail or report itself down; nothing here sleeps.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createManualClock, type ManualClock } from '../../../../src/clock.js';
import { SluiceError } from '../../../../src/errors.js';
import type { Logger } from '../../../../src/logging/logger.js';
import type { StoreMetricsSink } from '../../../../src/metrics/metrics.js';
import {
  createCachedStore,
  type CachedStore,
  type CachedStoreOptions,
} from '../../../../src/stores/cached/cached-store.js';
import type {
  BatchResult,
  CounterSpec,
  CounterStore,
} from '../../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../../src/stores/memory/memory-store.js';

/** Start of a minute, so fixed windows of a minute start here. */
const T0 = 1_700_000_040_000;

/** A shared store that can fail, or say it is down, on demand. */
class SharedStore implements CounterStore {
  failing = false;
  down = false;
  calls = 0;
  constructor(readonly inner: CounterStore) {}
  apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    this.calls++;
    if (this.failing) {
      return Promise.reject(new SluiceError('STORE_UNAVAILABLE', 'redis: connection refused'));
    }
    return this.inner.apply(specs);
  }
  size(): number {
    return this.inner.size();
  }
  healthy(): boolean {
    return !this.down;
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

function spec(overrides: Partial<CounterSpec> = {}): CounterSpec {
  return {
    key: 'k',
    algorithm: 'fixed_window',
    limit: 10,
    windowMs: 60_000,
    burst: 10,
    hits: 1,
    mode: 'enforced',
    ...overrides,
  };
}

/** The count the shared store holds for `key`. */
function sharedCount(shared: SharedStore, key = 'k'): number {
  return shared.inner.top!(100).find((counter) => counter.key === key)?.count ?? 0;
}

interface Rig {
  clock: ManualClock;
  shared: SharedStore;
  replica: (options?: Partial<CachedStoreOptions>) => CachedStore;
}

function rig(): Rig {
  const clock = createManualClock(T0);
  const shared = new SharedStore(createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 }));
  return {
    clock,
    shared,
    replica: (options = {}) =>
      createCachedStore({
        remote: shared,
        syncIntervalMs: 100,
        maxCounters: 1000,
        failureMode: 'memory',
        clock: clock.now,
        timer: false,
        ...options,
      }),
  };
}

/** A metrics sink that records what cached mode reports. */
function recordingSink(): StoreMetricsSink & {
  syncs: { ok: boolean; counters: number; pending: number }[];
  dropped: number;
  fallbacks: string[];
  evictions: string[];
  syncTimes: number[];
  droppedCalls: number[];
} {
  const sink = {
    syncs: [] as { ok: boolean; counters: number; pending: number }[],
    dropped: 0,
    fallbacks: [] as string[],
    evictions: [] as string[],
    syncTimes: [] as number[],
    droppedCalls: [] as number[],
    evicted: (reason: string, count: number) => void sink.evictions.push(`${reason}:${count}`),
    storeError: () => undefined,
    localCacheOverLimit: () => undefined,
    fallback: (policy: string) => void sink.fallbacks.push(policy),
    cachedSync: (ok: boolean, counters: number, pending: number, atMs: number) => {
      sink.syncs.push({ ok, counters, pending });
      sink.syncTimes.push(atMs);
    },
    cachedDroppedHits: (hits: number) => {
      sink.droppedCalls.push(hits);
      sink.dropped += hits;
    },
  };
  return sink;
}

describe('cached store: local decisions', () => {
  it('decides a counter never synced as empty, and the sync tells it what others counted', async () => {
    const { shared, replica } = rig();
    const a = replica();
    const b = replica();
    for (let i = 0; i < 6; i++) expect(a.applyNow([spec()]).admitted).toBe(true);
    // b knows nothing yet: it decides from 0 (the over-admission docs/cached-mode.md bounds).
    expect(b.applyNow([spec({ hits: 10 })]).admitted).toBe(true);
    await a.sync();
    await b.sync();
    expect(sharedCount(shared)).toBe(16);
    // b's sync read 16; a's read only its own 6 and still admits until its next sync.
    expect(b.applyNow([spec()]).admitted).toBe(false);
    expect(a.applyNow([spec()]).admitted).toBe(true);
    await a.sync();
    expect(a.applyNow([spec()]).admitted).toBe(false);
    expect(sharedCount(shared)).toBe(17);
  });

  it('admits exactly the limit on one replica, and reports the room left', async () => {
    const { shared, replica } = rig();
    const a = replica();
    const admitted: number[] = [];
    for (let i = 0; i < 14; i++) {
      const result = a.applyNow([spec()]);
      if (result.admitted) admitted.push(result.results[0]!.remaining);
      if (i % 3 === 0) await a.sync();
    }
    expect(admitted).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    await a.sync();
    expect(sharedCount(shared)).toBe(10);
  });

  it('charges nothing for a rejected batch, and keeps the batch rule (all or nothing, shadow, quota)', async () => {
    const { shared, replica } = rig();
    const a = replica();
    // b over (limit 1, 2 hits) rejects the whole batch: a is not charged either.
    const rejected = a.applyNow([spec({ key: 'a' }), spec({ key: 'b', limit: 1, hits: 2 })]);
    expect(rejected.admitted).toBe(false);
    expect(rejected.results.map((r) => r.overLimit)).toEqual([false, true]);
    expect(a.pendingHits()).toBe(0);
    // A shadow counter over its limit never rejects and is charged.
    const shadow = a.applyNow([
      spec({ key: 'a' }),
      spec({ key: 's', limit: 1, hits: 3, mode: 'shadow' }),
    ]);
    expect(shadow.admitted).toBe(true);
    // A quota counter without room is not charged; with one group over and no other, rejected.
    const quota = a.applyNow([spec({ key: 'q', limit: 1, hits: 2, mode: 'quota', quotaGroup: 0 })]);
    expect(quota.admitted).toBe(false);
    await a.sync();
    expect(sharedCount(shared, 'a')).toBe(1);
    expect(sharedCount(shared, 's')).toBe(3);
    expect(sharedCount(shared, 'q')).toBe(0);
    expect(sharedCount(shared, 'b')).toBe(0);
  });

  it('keeps a counter charged past its limit over after a sync, for a check of 0 hits too', async () => {
    const { replica } = rig();
    const a = replica();
    // Shadow charges 12 of 10; Redis then reports no room, not the count.
    expect(a.applyNow([spec({ hits: 12, mode: 'shadow' })]).admitted).toBe(true);
    await a.sync();
    // The memory store finds 12 > 10 over even for 0 hits; so must the view.
    expect(a.applyNow([spec({ hits: 0 })]).results[0]!.overLimit).toBe(true);
  });

  it('checks specs sharing a key cumulatively', () => {
    const { replica } = rig();
    const a = replica();
    const result = a.applyNow([spec({ hits: 6 }), spec({ hits: 5 })]);
    expect(result.admitted).toBe(false);
    expect(result.results.map((r) => r.overLimit)).toEqual([false, true]);
    expect(a.applyNow([spec({ hits: 6 }), spec({ hits: 4 })]).admitted).toBe(true);
  });

  it('starts a fixed window from zero when it ends, and never sends the hits of an ended window', async () => {
    const { clock, shared, replica } = rig();
    const a = replica();
    const b = replica();
    b.applyNow([spec({ hits: 8 })]);
    await b.sync();
    await a.sync(); // a learns nothing yet: it has no counter
    a.applyNow([spec({ hits: 0 })]);
    await a.sync();
    expect(a.applyNow([spec({ hits: 3 })]).admitted).toBe(false);
    expect(a.applyNow([spec({ hits: 2 })]).admitted).toBe(true);
    clock.advance(60_000);
    // New window: the view of the old one no longer counts, nor do a's unsent hits of it.
    expect(a.applyNow([spec({ hits: 10 })]).admitted).toBe(true);
    expect(a.pendingHits()).toBe(10);
    await a.sync();
    expect(sharedCount(shared)).toBe(10);
  });

  it('keeps a sliding window view until every hit in it has expired (a conservative view)', async () => {
    const { clock, replica } = rig();
    const b = replica();
    const a = replica();
    const sliding = (hits: number): CounterSpec => spec({ algorithm: 'sliding_window', hits });
    b.applyNow([sliding(10)]);
    await b.sync();
    a.applyNow([sliding(0)]);
    await a.sync();
    // Half a window later the shared counter is still full; a minute and a bucket later it is empty.
    clock.advance(30_000);
    expect(a.applyNow([sliding(1)]).admitted).toBe(false);
    clock.advance(30_000 + 3_000);
    expect(a.applyNow([sliding(1)]).admitted).toBe(true);
  });

  it('drops idle counters whose view holds nothing, and counts unsent hits it must evict', async () => {
    const { clock, replica } = rig();
    const sink = recordingSink();
    const a = replica({ maxCounters: 2, metrics: sink });
    a.applyNow([spec({ key: 'x' })]);
    a.applyNow([spec({ key: 'y' })]);
    a.applyNow([spec({ key: 'z', hits: 2 })]);
    expect(a.size()).toBe(2);
    expect(sink.dropped).toBe(1);
    await a.sync();
    clock.advance(60_000);
    await a.sync(); // used since: refreshed
    await a.sync(); // idle, window over, nothing local: dropped
    expect(a.size()).toBe(0);
  });
});

describe('cached store: syncs and failures', () => {
  it('sends one write per counter per sync, however many calls', async () => {
    const { shared, replica } = rig();
    const sink = recordingSink();
    const a = replica({ metrics: sink });
    for (let i = 0; i < 50; i++)
      a.applyNow([spec({ key: 'a', limit: 1000 }), spec({ key: 'b', limit: 1000 })]);
    await a.sync();
    expect(shared.calls).toBe(1);
    expect(sink.syncs).toEqual([{ ok: true, counters: 2, pending: 0 }]);
    expect(sharedCount(shared, 'a')).toBe(50);
  });

  it('splits a sync of many counters into requests of at most 512', async () => {
    const { shared, replica } = rig();
    const a = replica({ maxCounters: 2000 });
    for (let i = 0; i < 1100; i++) a.applyNow([spec({ key: `k${i}` })]);
    await a.sync();
    expect(shared.calls).toBe(3);
    const peek = await shared.inner.apply([spec({ key: 'k1099', hits: 0 })]);
    expect(peek.results[0]!.remaining).toBe(9);
  });

  it('keeps deciding while the shared store fails, keeps the hits, and delivers them when it is back', async () => {
    const { shared, replica } = rig();
    const sink = recordingSink();
    const a = replica({ metrics: sink });
    a.applyNow([spec({ hits: 4 })]);
    shared.failing = true;
    shared.down = true;
    await a.sync();
    expect(sink.syncs.at(-1)).toEqual({ ok: false, counters: 1, pending: 4 });
    expect(a.healthy()).toBe(true);
    expect(a.applyNow([spec({ hits: 6 })]).admitted).toBe(true);
    expect(a.applyNow([spec()]).admitted).toBe(false);
    await a.sync();
    expect(a.pendingHits()).toBe(10);
    shared.failing = false;
    shared.down = false;
    await a.sync();
    expect(sharedCount(shared)).toBe(10);
    expect(a.pendingHits()).toBe(0);
    expect(sink.syncs.at(-1)).toEqual({ ok: true, counters: 1, pending: 0 });
  });

  it('counts hits admitted while a sync is in flight after it, not in it', async () => {
    const { shared, replica } = rig();
    const a = replica();
    a.applyNow([spec({ hits: 3 })]);
    const syncing = a.sync();
    a.applyNow([spec({ hits: 2 })]);
    await syncing;
    // The view holds the 3 sent; the 2 since are local and pending.
    expect(a.applyNow([spec({ hits: 6 })]).admitted).toBe(false);
    expect(a.applyNow([spec({ hits: 5 })]).admitted).toBe(true);
    await a.sync();
    expect(sharedCount(shared)).toBe(10);
  });

  it('with STORE_FAILURE_MODE=error fails calls while Redis is down, and sends the kept hits after', async () => {
    const { shared, replica } = rig();
    const sink = recordingSink();
    const a = replica({ failureMode: 'error', metrics: sink });
    a.applyNow([spec({ hits: 2 })]);
    shared.down = true;
    shared.failing = true;
    expect(a.healthy()).toBe(false);
    expect(() => a.applyNow([spec()])).toThrow(/redis is not reachable/);
    await expect(a.apply([spec()])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
    expect(sink.fallbacks).toEqual(['error', 'error']);
    await a.sync();
    shared.down = false;
    shared.failing = false;
    expect(a.healthy()).toBe(true);
    await a.sync();
    expect(sharedCount(shared)).toBe(2);
  });

  it('sends what is pending when closed', async () => {
    const { replica, shared, clock } = rig();
    const keep = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    const a = replica({
      remote: {
        ...shared,
        apply: (s) => keep.apply(s),
        close: () => Promise.resolve(),
        healthy: () => true,
        size: () => 0,
      },
    });
    a.applyNow([spec({ hits: 7 })]);
    await a.close();
    expect(keep.top!(1)[0]?.count).toBe(7);
  });
});

/** A logger that records the lines cached mode writes (only warn and info are used). */
function recordingLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const write =
    (level: string) =>
    (first: unknown, second?: unknown): void => {
      lines.push(
        typeof first === 'string'
          ? `${level} ${first}`
          : `${level} ${JSON.stringify(first)} ${String(second)}`,
      );
    };
  const logger = { warn: write('warn'), info: write('info') } as unknown as Logger;
  return { logger, lines };
}

describe('cached store: top', () => {
  it('lists counters by count, known plus local, skips empty ones and keeps at most n', async () => {
    const { clock, shared, replica } = rig();
    const a = replica();
    a.applyNow([spec({ key: 'a', hits: 3 })]);
    a.applyNow([spec({ key: 'b', hits: 5, limit: 20 })]);
    a.applyNow([spec({ key: 'c', hits: 0 })]);
    expect(a.top!(10)).toEqual([
      { key: 'b', count: 5, limit: 20, expiresInMs: 60_000 },
      { key: 'a', count: 3, limit: 10, expiresInMs: 60_000 },
    ]);
    expect(a.top!(1).map((c) => c.key)).toEqual(['b']);
    expect(a.top!(0)).toEqual([]);
    expect(a.top!(-1)).toEqual([]);
    // Another replica's hits reach a's view at its sync: known (synced) plus local.
    await shared.inner.apply([spec({ key: 'a', hits: 4, mode: 'shadow' })]);
    await a.sync();
    clock.advance(20_000);
    a.applyNow([spec({ key: 'a', hits: 1 })]);
    expect(a.top!(10)).toEqual([
      { key: 'a', count: 8, limit: 10, expiresInMs: 40_000 },
      { key: 'b', count: 5, limit: 20, expiresInMs: 40_000 },
    ]);
    // Once the window has ended and a sync refreshed the views, nothing is known or local.
    clock.advance(40_000);
    await a.sync();
    expect(a.top!(10)).toEqual([]);
  });
});

describe('cached store: sync bookkeeping', () => {
  it('reports every sync, logs the first failure once and the recovery once', async () => {
    const { clock, shared, replica } = rig();
    const sink = recordingSink();
    const log = recordingLogger();
    const a = replica({ metrics: sink, logger: log.logger });
    a.applyNow([spec({ hits: 2 })]);
    await a.sync();
    expect(log.lines).toEqual([]);
    shared.failing = true;
    a.applyNow([spec({ hits: 1 })]);
    clock.advance(10);
    await a.sync();
    a.applyNow([spec({ key: 'other', hits: 3 })]);
    clock.advance(10);
    await a.sync();
    expect(log.lines).toEqual([
      'warn {"error":"redis: connection refused"} cached mode: sync with redis failed; deciding locally, hits kept for the next sync',
    ]);
    shared.failing = false;
    clock.advance(10);
    await a.sync();
    clock.advance(10);
    await a.sync();
    expect(log.lines.slice(1)).toEqual(['info cached mode: sync with redis succeeded again']);
    expect(sink.syncs).toEqual([
      { ok: true, counters: 1, pending: 0 },
      { ok: false, counters: 1, pending: 1 },
      { ok: false, counters: 2, pending: 4 },
      { ok: true, counters: 2, pending: 0 },
      { ok: true, counters: 0, pending: 0 },
    ]);
    expect(sink.syncTimes).toEqual([T0, T0 + 10, T0 + 20, T0 + 30, T0 + 40]);
    expect(sharedCount(shared)).toBe(3);
    expect(sharedCount(shared, 'other')).toBe(3);
    // A second outage is logged again: the flag went back to false at the recovery.
    shared.failing = true;
    a.applyNow([spec({ hits: 1 })]);
    await a.sync();
    expect(log.lines).toHaveLength(3);
    expect(log.lines[2]).toMatch(/^warn .*sync with redis failed/);
  });

  it('logs a failure that is not an Error by its text', async () => {
    const { clock, replica } = rig();
    const log = recordingLogger();
    const a = replica({
      logger: log.logger,
      remote: {
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the case tested
        apply: () => Promise.reject('socket closed'),
        size: () => 0,
        healthy: () => true,
        close: () => Promise.resolve(),
      },
    });
    a.applyNow([spec()]);
    clock.advance(1);
    await a.sync();
    expect(log.lines).toEqual([
      'warn {"error":"socket closed"} cached mode: sync with redis failed; deciding locally, hits kept for the next sync',
    ]);
  });

  it('sends a chunk of at most 512 counters per call, every counter once', async () => {
    for (const [counters, calls] of [
      [512, [512]],
      [513, [512, 1]],
      [1100, [512, 512, 76]],
    ] as const) {
      const { shared, replica } = rig();
      const sizes: number[] = [];
      const sink = recordingSink();
      const a = replica({
        maxCounters: 2000,
        metrics: sink,
        remote: {
          apply: (specs) => {
            sizes.push(specs.length);
            return shared.apply(specs);
          },
          size: () => 0,
          healthy: () => true,
          close: () => Promise.resolve(),
        },
      });
      for (let i = 0; i < counters; i++) a.applyNow([spec({ key: `k${i}`, hits: 1 + (i % 3) })]);
      await a.sync();
      expect(sizes).toEqual(calls);
      expect(sink.syncs).toEqual([{ ok: true, counters, pending: 0 }]);
      // Each counter took the view of its own result: k_i holds 1 + i % 3 hits.
      for (const i of [0, 511, 512, counters - 1]) {
        if (i >= counters) continue;
        const left = a.applyNow([spec({ key: `k${i}`, hits: 0 })]).results[0]!.remaining;
        expect(left).toBe(10 - (1 + (i % 3)));
      }
    }
  });

  it('drops idle counters with nothing known or local and counts them as expired', async () => {
    const { clock, replica } = rig();
    const sink = recordingSink();
    const a = replica({ metrics: sink });
    a.applyNow([spec({ key: 'f' })]);
    a.applyNow([spec({ key: 's', algorithm: 'sliding_window' })]);
    await a.sync();
    // Idle but the view still counts: kept, nothing evicted.
    await a.sync();
    expect(a.size()).toBe(2);
    expect(sink.evictions).toEqual([]);
    clock.advance(60_000);
    // The fixed window ended; the sliding one's hits still count for a bucket more.
    await a.sync();
    expect(a.size()).toBe(1);
    expect(sink.evictions).toEqual(['expired:1']);
    clock.advance(3_000);
    await a.sync();
    expect(a.size()).toBe(0);
    expect(sink.evictions).toEqual(['expired:1', 'expired:1']);
    expect(sink.syncs.map((s) => s.counters)).toEqual([2, 0, 0, 0]);
  });

  it('does not resend sliding window hits a failed sync kept once they have expired', async () => {
    const { clock, shared, replica } = rig();
    const sink = recordingSink();
    const a = replica({ metrics: sink });
    const sliding = (hits: number): CounterSpec => spec({ algorithm: 'sliding_window', hits });
    a.applyNow([sliding(1)]);
    // The sync fails: the hit stays pending and local, the view knows nothing.
    shared.failing = true;
    await a.sync();
    shared.failing = false;
    clock.advance(63_000);
    // Pending hits whose window and bucket have passed are not sent.
    await a.sync();
    expect(sharedCount(shared)).toBe(0);
    expect(a.pendingHits()).toBe(0);
  });

  it('does not send the pending hits of a fixed window that ended before the sync', async () => {
    const { clock, shared, replica } = rig();
    const a = replica();
    a.applyNow([spec({ hits: 4 })]);
    clock.advance(60_000);
    await a.sync();
    expect(a.pendingHits()).toBe(0);
    expect(sharedCount(shared)).toBe(0);
    // Within the window they are sent.
    a.applyNow([spec({ hits: 4 })]);
    clock.advance(59_999);
    await a.sync();
    expect(sharedCount(shared)).toBe(4);
  });

  it('sends sliding window hits until a window and a bucket have passed since the newest', async () => {
    for (const [after, sent] of [
      [62_999, 4],
      [63_000, 0],
    ] as const) {
      const { clock, shared, replica } = rig();
      const a = replica();
      a.applyNow([spec({ algorithm: 'sliding_window', hits: 4, limit: 100 })]);
      clock.advance(after);
      await a.sync();
      const peek = await shared.inner.apply([
        spec({ algorithm: 'sliding_window', hits: 0, limit: 100 }),
      ]);
      expect(100 - peek.results[0]!.remaining).toBe(sent);
      expect(a.pendingHits()).toBe(0);
    }
  });

  it('keeps only the current fixed window hits pending when a new window starts', () => {
    const { clock, replica } = rig();
    const a = replica();
    a.applyNow([spec({ hits: 4 })]);
    clock.advance(60_000);
    a.applyNow([spec({ hits: 2 })]);
    a.applyNow([spec({ hits: 1 })]);
    expect(a.pendingHits()).toBe(3);
  });
});

describe('cached store: LRU cap', () => {
  it('evicts the least recently used counter, counting only the pending hits it loses', async () => {
    const { replica } = rig();
    const sink = recordingSink();
    const a = replica({ maxCounters: 2, metrics: sink });
    a.applyNow([spec({ key: 'x', hits: 2 })]);
    a.applyNow([spec({ key: 'y', hits: 3 })]);
    await a.sync();
    // x used again moves behind y: y goes first, with nothing pending.
    a.applyNow([spec({ key: 'x' })]);
    a.applyNow([spec({ key: 'z', hits: 4 })]);
    expect(sink.evictions).toEqual(['lru:1']);
    expect(sink.droppedCalls).toEqual([]);
    expect(a.top!(10).map((c) => c.key)).toEqual(['z', 'x']);
    // Now x (1 pending) is the oldest.
    a.applyNow([spec({ key: 'w' })]);
    expect(sink.evictions).toEqual(['lru:1', 'lru:1']);
    expect(sink.droppedCalls).toEqual([1]);
    expect(a.pendingHits()).toBe(5);
  });

  it('still decides with a cap of no counters', () => {
    const { replica } = rig();
    const a = replica({ maxCounters: 0 });
    expect(a.applyNow([spec()]).admitted).toBe(true);
  });
});

describe('cached store: close, empty batches, failure mode', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('syncs on its timer every interval, and close stops the timer', async () => {
    vi.useFakeTimers();
    const { shared, replica } = rig();
    const a = replica({ timer: true, syncIntervalMs: 100 });
    a.applyNow([spec({ hits: 2 })]);
    await vi.advanceTimersByTimeAsync(99);
    expect(shared.calls).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(shared.calls).toBe(1);
    expect(sharedCount(shared)).toBe(2);
    expect(vi.getTimerCount()).toBe(1);
    await a.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('on close waits for the sync in flight, sends what came since, then does nothing more', async () => {
    const { shared, replica } = rig();
    let closed = 0;
    const a = replica({
      remote: {
        apply: (specs) => shared.apply(specs),
        size: () => 0,
        healthy: () => true,
        close: () => {
          closed++;
          return Promise.resolve();
        },
      },
    });
    a.applyNow([spec({ hits: 3 })]);
    const syncing = a.sync();
    a.applyNow([spec({ hits: 2 })]);
    await a.close();
    await syncing;
    expect(sharedCount(shared)).toBe(5);
    expect(closed).toBe(1);
    const calls = shared.calls;
    a.applyNow([spec({ hits: 1 })]);
    await a.sync();
    expect(shared.calls).toBe(calls);
    expect(sharedCount(shared)).toBe(5);
  });

  it('answers an empty batch as admitted with no results', () => {
    const { replica } = rig();
    const a = replica();
    expect(a.applyNow([])).toEqual({ admitted: true, results: [] });
    expect(a.size()).toBe(0);
  });

  it('fails calls only in mode error and only while the shared store is down', () => {
    const { shared, replica } = rig();
    const sink = recordingSink();
    const strict = replica({ failureMode: 'error', metrics: sink });
    expect(strict.applyNow([spec()]).admitted).toBe(true);
    expect(sink.fallbacks).toEqual([]);
    shared.down = true;
    for (const failureMode of ['allow', 'memory'] as const) {
      const lenient = replica({ failureMode, metrics: sink });
      expect(lenient.healthy()).toBe(true);
      expect(lenient.applyNow([spec()]).admitted).toBe(true);
    }
    expect(sink.fallbacks).toEqual([]);
    expect(() => strict.applyNow([])).toThrow(SluiceError);
    expect(sink.fallbacks).toEqual(['error']);
  });
});

describe('cached store: failed syncs with hits in flight, and optional metrics', () => {
  it('counts the hits of a sync in flight as pending, and restores them with those since on failure', async () => {
    const { shared, replica } = rig();
    const a = replica();
    a.applyNow([spec({ hits: 3 })]);
    shared.failing = true;
    const syncing = a.sync();
    a.applyNow([spec({ hits: 2 })]);
    expect(a.pendingHits()).toBe(5);
    await syncing;
    expect(a.pendingHits()).toBe(5);
    shared.failing = false;
    await a.sync();
    expect(sharedCount(shared)).toBe(5);
  });

  it('drops restored fixed window hits whose window ended while the sync was in flight', async () => {
    const { clock, shared, replica } = rig();
    const a = replica();
    a.applyNow([spec({ hits: 3 })]);
    shared.failing = true;
    const syncing = a.sync();
    clock.advance(60_000);
    a.applyNow([spec({ hits: 2 })]);
    await syncing;
    expect(a.pendingHits()).toBe(2);
  });

  it('restores sliding window hits sent earlier next to those admitted since', async () => {
    const { clock, shared, replica } = rig();
    const a = replica();
    const sliding = (hits: number): CounterSpec => spec({ algorithm: 'sliding_window', hits });
    a.applyNow([sliding(3)]);
    shared.failing = true;
    const syncing = a.sync();
    clock.advance(1_000);
    a.applyNow([sliding(2)]);
    await syncing;
    expect(a.pendingHits()).toBe(5);
  });

  it('logs no recovery for a sync with nothing to send after a failed one', async () => {
    const { shared, replica } = rig();
    const log = recordingLogger();
    const sink = recordingSink();
    const a = replica({ logger: log.logger, metrics: sink });
    a.applyNow([spec({ hits: 0 })]);
    shared.failing = true;
    await a.sync();
    shared.failing = false;
    await a.sync();
    expect(log.lines).toHaveLength(1);
    expect(sink.syncs).toEqual([
      { ok: false, counters: 1, pending: 0 },
      { ok: true, counters: 0, pending: 0 },
    ]);
  });

  it('refreshes the view of a counter only checked (0 hits) since the last sync', async () => {
    const { replica } = rig();
    const a = replica();
    const b = replica();
    a.applyNow([spec({ hits: 0 })]);
    await a.sync();
    await a.sync();
    b.applyNow([spec({ hits: 10 })]);
    await b.sync();
    expect(a.applyNow([spec({ hits: 0 })]).admitted).toBe(true);
    await a.sync();
    expect(a.applyNow([spec()]).admitted).toBe(false);
  });

  it('moves a counter in the LRU order once per sync interval, not per call', () => {
    const { replica } = rig();
    const a = replica({ maxCounters: 2 });
    a.applyNow([spec({ key: 'x' })]);
    a.applyNow([spec({ key: 'y' })]);
    a.applyNow([spec({ key: 'x' })]);
    a.applyNow([spec({ key: 'z' })]);
    expect(a.top!(10).map((c) => c.key)).toEqual(['y', 'z']);
  });

  it('works with no metrics sink, and with one that counts no cached mode metrics', async () => {
    const { shared, replica } = rig();
    const minimal: StoreMetricsSink = {
      evicted: () => undefined,
      storeError: () => undefined,
      localCacheOverLimit: () => undefined,
      fallback: () => undefined,
    };
    for (const metrics of [undefined, minimal]) {
      const a = replica({ maxCounters: 1, metrics });
      a.applyNow([spec({ key: 'x', hits: 2 })]);
      a.applyNow([spec({ key: 'y', hits: 1 })]);
      await a.sync();
      await a.sync();
      expect(a.pendingHits()).toBe(0);
    }
    shared.down = true;
    const strict = replica({ failureMode: 'error' });
    expect(() => strict.applyNow([spec()])).toThrow(/redis is not reachable/);
  });

  it('starts no timer when asked not to', () => {
    vi.useFakeTimers();
    try {
      const { replica } = rig();
      replica({ timer: false });
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
