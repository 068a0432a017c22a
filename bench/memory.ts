/**
 * Row 3: heap bytes (JavaScript heap plus typed-array backing stores) per live counter in the
 * memory store, after a full GC, for quiet counters
 * (one sub-bucket used) and busy ones (all 21 live sub-buckets used), next to a plain
 * `Map<string, number>` holding the same (flat) key strings.
 */
import type { CounterSpec } from '../src/stores/counter-store.js';
import type { Sluice } from './dist.js';
import { ratio, si, type Row } from './report.js';
import { DOMAIN, ipFor } from './workloads.js';

/** Bounds of the memory measurement. */
export interface MemoryBounds {
  /** Counters in the quiet run. */
  readonly quietKeys: number;
  /** Counters in the busy run. */
  readonly busyKeys: number;
  /** Most time one run may take to fill its counters, ms; past it the row reads n/a. */
  readonly maxMs: number;
}

const WINDOW_MS = 60_000;
/** One sub-bucket of a minute window (SUB_BUCKETS = 20). */
const BUCKET_MS = WINDOW_MS / 20;
/** Sub-buckets live at once: the current one and the 20 before it. */
const LIVE_BUCKETS = 21;
/** A bucket boundary, so every round lands in its own sub-bucket. */
const START_MS = 1_700_000_100_000 - (1_700_000_100_000 % BUCKET_MS);
const KEY_PREFIX = `sw|${WINDOW_MS}|${DOMAIN}|remote_address=`;

/**
 * Memory in use after collecting everything collectable: the JavaScript heap plus the backing
 * stores of typed arrays (the memory store's counter columns live there, outside `heapUsed`).
 */
function heapAfterGc(): number {
  const gc = globalThis.gc;
  if (gc === undefined) throw new Error('run node with --expose-gc (npm run bench does)');
  for (let i = 0; i < 3; i++) gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** Bytes per key held by the memory store after `rounds` sub-buckets of hits on `n` keys. */
function storeBytesPerKey(
  sluice: Sluice,
  n: number,
  rounds: number,
  maxMs: number,
): number | undefined {
  const clock = sluice.clock.createManualClock(START_MS);
  const store = sluice.memoryStore.createMemoryStore({
    clock: clock.now,
    maxKeys: n * 2,
    sweepIntervalMs: 0,
  });
  const spec: CounterSpec = {
    key: '',
    algorithm: 'sliding_window',
    limit: 4_000_000_000,
    windowMs: WINDOW_MS,
    burst: 4_000_000_000,
    hits: 1,
    mode: 'enforced',
  };
  const batch = [spec];
  const before = heapAfterGc();
  const deadline = performance.now() + maxMs;
  let complete = true;
  fill: for (let r = 0; r < rounds; r++) {
    clock.set(START_MS + r * BUCKET_MS);
    for (let i = 0; i < n; i++) {
      // Built by concatenation like limiter/keys.ts builds counter keys.
      spec.key = KEY_PREFIX + ipFor(i);
      void store.apply(batch);
      if ((i & 4095) === 0 && performance.now() > deadline) {
        complete = false;
        break fill;
      }
    }
  }
  const after = heapAfterGc();
  const size = store.size();
  void store.close();
  if (!complete) return undefined;
  if (size !== n) throw new Error(`memory store holds ${size} counters, expected ${n}`);
  return (after - before) / n;
}

/** Bytes per key of a `Map<string, number>` holding the same flat keys. */
function mapBytesPerKey(n: number): number {
  const before = heapAfterGc();
  const map = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const key = KEY_PREFIX + ipFor(i);
    // Flatten the concatenated key, as the store does before keeping one.
    key.charCodeAt(0);
    map.set(key, 1);
  }
  const after = heapAfterGc();
  if (map.size !== n) throw new Error('baseline map lost keys');
  return (after - before) / n;
}

function row(id: string, what: string, store: number | undefined, map: number): Row {
  return {
    id,
    what,
    sluice: store === undefined ? 'n/a (time limit)' : `${Math.round(store)} B`,
    baseline: `${Math.round(map)} B`,
    ratio: store === undefined ? 'n/a' : ratio(store, map),
  };
}

/** Measure quiet and busy counters; two table rows. */
export function benchMemory(sluice: Sluice, bounds: MemoryBounds): Row[] {
  const quiet = storeBytesPerKey(sluice, bounds.quietKeys, 1, bounds.maxMs);
  const quietMap = mapBytesPerKey(bounds.quietKeys);
  const busy = storeBytesPerKey(sluice, bounds.busyKeys, LIVE_BUCKETS, bounds.maxMs);
  const busyMap = mapBytesPerKey(bounds.busyKeys);
  return [
    row(
      '3a',
      `heap per live counter: quiet (1 sub-bucket), ${si(bounds.quietKeys)} keys`,
      quiet,
      quietMap,
    ),
    row(
      '3b',
      `heap per live counter: busy (21 sub-buckets), ${si(bounds.busyKeys)} keys`,
      busy,
      busyMap,
    ),
  ];
}
