/**
 * The local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`): counters Redis reported over limit are
 * remembered until the moment the same hits would fit again, so repeated calls for them are
 * answered from memory without a Redis call. Counts only grow between now and then (no traffic
 * frees room early), so the answer is the one Redis would give. Bounded in bytes (an estimate per
 * entry); the oldest entries go first.
 */

/** Estimated bytes an entry costs beyond its key's characters (Map slot, object, numbers). */
const ENTRY_OVERHEAD_BYTES = 96;

interface CacheEntry {
  /** Local epoch ms until which the counter is over limit for `hits` or more. */
  readonly untilMs: number;
  /** The (cumulative) hits Redis refused. */
  readonly hits: number;
  /** The limit they were refused under (a reload that changes it invalidates the entry). */
  readonly limit: number;
}

/** A bounded map from counter key to "over limit until". */
export class LocalOverLimitCache {
  private readonly entries = new Map<string, CacheEntry>();
  private bytes = 0;

  /** `maxBytes`: the budget (> 0). */
  constructor(private readonly maxBytes: number) {}

  /** Number of entries held. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Milliseconds the counter `key` stays over limit for `hits` under `limit` from `nowMs`, or 0
   * when the cache cannot tell (unknown, expired, different limit, fewer hits than refused).
   */
  overLimitForMs(key: string, hits: number, limit: number, nowMs: number): number {
    const entry = this.entries.get(key);
    if (entry === undefined) return 0;
    if (entry.untilMs <= nowMs) {
      this.delete(key);
      return 0;
    }
    if (entry.limit !== limit || hits < entry.hits) return 0;
    return entry.untilMs - nowMs;
  }

  /** Remember that `key` is over limit for `hits` under `limit` until `untilMs`. */
  remember(key: string, hits: number, limit: number, untilMs: number): void {
    if (this.entries.has(key)) this.delete(key);
    const cost = costOf(key);
    if (cost > this.maxBytes) return;
    // Oldest first (a Map iterates in insertion order; deleting the current key is safe).
    for (const oldest of this.entries.keys()) {
      if (this.bytes + cost <= this.maxBytes) break;
      this.delete(oldest);
    }
    this.entries.set(key, { untilMs, hits, limit });
    this.bytes += cost;
  }

  /** Forget everything. */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  private delete(key: string): void {
    this.entries.delete(key);
    this.bytes -= costOf(key);
  }
}

/** Estimated bytes the entry of `key` costs (UTF-16 characters and {@link ENTRY_OVERHEAD_BYTES}). */
function costOf(key: string): number {
  return key.length * 2 + ENTRY_OVERHEAD_BYTES;
}
