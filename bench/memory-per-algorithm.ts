/**
 * Heap bytes per counter key in the memory store, for each counting algorithm, after a full GC
 * (the figures in docs/algorithms.md, "Memory per key").
 *
 * Usage: `npm run bench:memory-algorithms [-- KEYS]` (default 100000 keys per row; the
 * 100-entry sliding log row uses a tenth of them). Runs node with `--expose-gc`.
 *
 * Each row fills a fresh store (manual clock, no background sweep, cap above the key count) with
 * distinct keys shaped like real counter keys, then divides the heap growth by the key count. The
 * bytes include the key string, the Map slot and the counter entry. A `Map<string, number>` with
 * the same keys is measured as a baseline.
 */
import { pathToFileURL } from 'node:url';
import type { Algorithm } from '../src/algorithms/index.js';
import { createManualClock } from '../src/clock.js';
import type { CounterSpec } from '../src/stores/counter-store.js';
import { createMemoryStore } from '../src/stores/memory/memory-store.js';

const WINDOW_MS = 60_000;
/** One sliding-window sub-bucket of a minute window (SUB_BUCKETS = 20). */
const BUCKET_MS = WINDOW_MS / 20;
/** A minute boundary, so the fixed window and the sub-buckets start cleanly. */
const START_MS = 1_700_000_040_000;

/** One measured configuration. */
export interface MemoryCase {
  /** Row label. */
  readonly name: string;
  readonly algorithm: Algorithm;
  /** Hits per key, each at its own time. */
  readonly rounds: number;
  /** Time between rounds, ms (each round lands in its own sub-bucket / log entry). */
  readonly stepMs: number;
  /** Fraction of the run's key count this row uses. */
  readonly keyShare: number;
}

/** The rows of the table in docs/algorithms.md. */
export const CASES: readonly MemoryCase[] = [
  {
    name: 'sliding_window, quiet (1 sub-bucket)',
    algorithm: 'sliding_window',
    rounds: 1,
    stepMs: BUCKET_MS,
    keyShare: 1,
  },
  {
    name: 'sliding_window, busy (21 sub-buckets)',
    algorithm: 'sliding_window',
    rounds: 21,
    stepMs: BUCKET_MS,
    keyShare: 1,
  },
  { name: 'fixed_window', algorithm: 'fixed_window', rounds: 1, stepMs: 1, keyShare: 1 },
  { name: 'token_bucket', algorithm: 'token_bucket', rounds: 1, stepMs: 1, keyShare: 1 },
  { name: 'sliding_log, 1 entry', algorithm: 'sliding_log', rounds: 1, stepMs: 1, keyShare: 1 },
  {
    name: 'sliding_log, 100 entries',
    algorithm: 'sliding_log',
    rounds: 100,
    stepMs: 100,
    keyShare: 0.1,
  },
];

/**
 * Memory in use after collecting everything collectable: the JavaScript heap plus typed-array
 * backing stores (where the memory store keeps its counter columns).
 */
function heapAfterGc(): number {
  const gc = globalThis.gc;
  if (gc === undefined)
    throw new Error('run node with --expose-gc (npm run bench:memory-algorithms does)');
  for (let i = 0; i < 3; i++) gc();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.arrayBuffers;
}

/** A counter-key-shaped key for key number `i` (distinct per algorithm, as real keys are). */
function keyFor(algorithm: Algorithm, i: number): string {
  return `${algorithm}|${WINDOW_MS}|bench|remote_address=10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/** Bytes per key for one case over `n` keys. */
export function bytesPerKey(c: MemoryCase, n: number): number {
  const clock = createManualClock(START_MS);
  const store = createMemoryStore({ clock: clock.now, maxKeys: n * 2, sweepIntervalMs: 0 });
  const spec: CounterSpec = {
    key: '',
    algorithm: c.algorithm,
    limit: 1_000_000,
    windowMs: WINDOW_MS,
    burst: 1_000_000,
    hits: 1,
    mode: 'enforced',
  };
  const batch = [spec];
  const before = heapAfterGc();
  for (let r = 0; r < c.rounds; r++) {
    clock.set(START_MS + r * c.stepMs);
    for (let i = 0; i < n; i++) {
      spec.key = keyFor(c.algorithm, i);
      // The memory store decides synchronously; the promise only carries the answer.
      void store.apply(batch);
    }
  }
  const after = heapAfterGc();
  const size = store.size();
  void store.close();
  if (size !== n) throw new Error(`store holds ${size} counters, expected ${n}`);
  return (after - before) / n;
}

/** Bytes per key of a `Map<string, number>` holding the same keys. */
export function mapBytesPerKey(n: number): number {
  const before = heapAfterGc();
  const map = new Map<string, number>();
  for (let i = 0; i < n; i++) {
    const key = keyFor('sliding_window', i);
    // Flatten the concatenated key, as the store does before keeping one.
    key.charCodeAt(0);
    map.set(key, 1);
  }
  const after = heapAfterGc();
  if (map.size !== n) throw new Error('baseline map lost keys');
  return (after - before) / n;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const n = Number(process.argv[2] ?? 100_000);
  if (!Number.isInteger(n) || n < 100)
    throw new Error(`KEYS must be an integer >= 100, got ${process.argv[2]}`);
  console.log(`node ${process.version}, ${n} keys per row, minute window`);
  const baseline = mapBytesPerKey(n);
  console.log(`${'Map<string, number> baseline'.padEnd(40)} ${Math.round(baseline)} B/key`);
  for (const c of CASES) {
    const keys = Math.round(n * c.keyShare);
    const bytes = bytesPerKey(c, keys);
    console.log(`${c.name.padEnd(40)} ${Math.round(bytes)} B/key (${keys} keys)`);
  }
}
