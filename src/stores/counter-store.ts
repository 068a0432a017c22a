/**
 * The counter store: where hits are counted. The limiter turns one request into one call of
 * `apply()`; the store makes the all-or-nothing decision atomically (SPEC §3).
 */
import type { Algorithm } from '../config/types.js';

/** What one counter of a batch must check and charge. */
export interface CounterSpec {
  /** Unique counter key (domain, entries and window, escaped); see limiter/keys.ts. */
  key: string;
  /** How to count. */
  algorithm: Algorithm;
  /** Hits admitted per window. */
  limit: number;
  /** Window length in ms. */
  windowMs: number;
  /** Hits this request adds (0 = check without charging). */
  hits: number;
  /** False for shadow-mode rules: counted and reported, but never block the request. */
  enforced: boolean;
}

/** The store's answer for one counter. */
export interface CounterResult {
  /** This counter lacked room for its hits (whether or not it is enforced). */
  overLimit: boolean;
  /** Room left after the request (after charging if the batch was admitted); 0 when over. */
  remaining: number;
  /**
   * Milliseconds. When over limit: the exact wait after which the same hits would be admitted
   * with no other traffic. When OK: the time until `remaining` next grows; 0 if it never will.
   */
  resetMs: number;
}

/** The store's answer for a whole batch. */
export interface BatchResult {
  /** Every enforced counter had room, so every counter was charged. */
  admitted: boolean;
  /** One result per spec, in order. */
  results: CounterResult[];
}

/** A place to count hits. Implementations: stores/memory (default), stores/redis (later). */
export interface CounterStore {
  /**
   * Check every spec and, if every enforced one has room for its hits, charge all of them;
   * otherwise charge none. Atomic with respect to concurrent calls. Rejects only on a store
   * failure (SluiceError STORE_UNAVAILABLE), never for a decision.
   */
  apply(specs: readonly CounterSpec[]): Promise<BatchResult>;
  /** Number of counters held (for metrics and the debug endpoint); may include expired ones not yet reclaimed. */
  size(): number;
  /** Release timers and connections. */
  close(): Promise<void>;
}
