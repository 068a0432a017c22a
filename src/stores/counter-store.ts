/**
 * The counter store: where hits are counted. The limiter turns one request into one call of
 * `apply()`; the store makes the all-or-nothing decision atomically (docs/semantics.md §3).
 */
import type { Algorithm, AlgorithmResult } from '../algorithms/index.js';

/**
 * How a counter takes part in admission (docs/semantics.md §3):
 * - `enforced`: lacking room rejects the whole request;
 * - `shadow` (`shadow_mode`): never rejects; charged on admission even when over;
 * - `quota` (`quota_mode`): rejects the whole request only when every quota group of the batch
 *   (see `CounterSpec.quotaGroup`) has a counter without room; charged on admission only when it
 *   has room.
 */
export type CounterMode = 'enforced' | 'shadow' | 'quota';

/** What one counter of a batch must check and charge. */
export interface CounterSpec {
  /** Unique counter key (domain, entries, algorithm and window, escaped); see limiter/keys.ts. */
  key: string;
  /** How to count. */
  algorithm: Algorithm;
  /** Hits admitted per window (token bucket: tokens refilled per window). */
  limit: number;
  /** Window length in ms (unit x unit_multiplier). */
  windowMs: number;
  /** Token bucket capacity; ignored by the other algorithms (set it to `limit`). */
  burst: number;
  /** Hits this request adds (0 = check without charging). */
  hits: number;
  /** How this counter takes part in admission. */
  mode: CounterMode;
  /**
   * For a `quota` spec whose request quota mode can reject: the index of its request descriptor
   * (the counters of one descriptor form one group). The batch is then rejected when every group
   * has a spec without room. `undefined` (on every spec of a batch) when quota never rejects: a
   * quota descriptor of the request always passes (no rule, shadow mode), as the reference counts
   * it among the quota descriptors that are not over.
   */
  quotaGroup?: number | undefined;
}

/** The store's answer for one counter. */
export interface CounterResult extends AlgorithmResult {
  /**
   * True when a local over-limit cache answered without asking the shared store (the
   * reference's `over_limit_with_local_cache`); absent otherwise.
   */
  fromLocalCache?: boolean;
}

/** The store's answer for a whole batch. */
export interface BatchResult {
  /** Every enforced counter had room and the quota rule admitted, so the batch was charged. */
  admitted: boolean;
  /** One result per spec, in order. */
  results: CounterResult[];
}

/** One counter as the debug endpoint `/counters` shows it. */
export interface CounterSnapshot {
  /** The counter key. */
  readonly key: string;
  /** Hits counted now (window algorithms); for a token bucket, the state's fractional part. */
  readonly count: number;
  /** The limit of the last charge on this counter. */
  readonly limit: number;
  /** Milliseconds until the counter holds nothing (0 when already empty). */
  readonly expiresInMs: number;
}

/** A place to count hits. Implementations: stores/memory (default), stores/redis. */
export interface CounterStore {
  /**
   * Check every spec and, if every `enforced` one has room for its hits and the quota rule does
   * not reject (the batch rule, stores/batch.ts), charge every spec with hits > 0 except `quota` specs that
   * lack room; otherwise charge none. Atomic with respect to
   * concurrent calls. Specs sharing a key are checked cumulatively, in order. Rejects only on a
   * store failure (SluiceError STORE_UNAVAILABLE), never for a decision.
   */
  apply(specs: readonly CounterSpec[]): Promise<BatchResult>;
  /**
   * Optional: `apply()` decided synchronously, for a store that needs no I/O (the memory store).
   * The same decision and effects; throws where `apply()` would reject. The limiter uses it to
   * answer without a promise hop.
   */
  applyNow?(specs: readonly CounterSpec[]): BatchResult;
  /**
   * Optional: `apply()` as a dry run, for the console's "try it" (never the serving path): the
   * decision and results `apply()` would give now, from the same batch rule and algorithm steps,
   * changing nothing (no charge, no expiry, no bookkeeping). A store without it is dry-run by
   * `checkBatch` (stores/batch.ts), which peeks with 0 hits and decides in process.
   */
  check?(specs: readonly CounterSpec[]): Promise<BatchResult>;
  /** Number of counters held (for metrics and the debug endpoint); may include expired ones not yet reclaimed. */
  size(): number;
  /** Whether the store can answer now (false while a remote store is unreachable). */
  healthy(): boolean;
  /** Release timers and connections. */
  close(): Promise<void>;
  /**
   * Optional (for the debug endpoint): the `n` counters with the most hits, busiest first. A store
   * without it shows no live counters. May scan every counter; never call it on the hot path.
   */
  top?(n: number): CounterSnapshot[];
  /**
   * Optional (for the debug console's reset, off unless `DEBUG_CONSOLE_RESET_ENABLED`): forget the
   * counter `key`, so its next request starts from empty. Resolves to whether it existed.
   */
  reset?(key: string): Promise<boolean>;
}
