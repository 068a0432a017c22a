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
      this.delete(key, entry);
      return 0;
    }
    if (entry.limit !== limit || hits < entry.hits) return 0;
    return entry.untilMs - nowMs;
  }

  /** Remember that `key` is over limit for `hits` under `limit` until `untilMs`. */
  remember(key: string, hits: number, limit: number, untilMs: number): void {
    const old = this.entries.get(key);
    if (old !== undefined) this.delete(key, old);
    const cost = key.length * 2 + ENTRY_OVERHEAD_BYTES;
    if (cost > this.maxBytes) return;
    while (this.bytes + cost > this.maxBytes) {
      const oldest = this.entries.entries().next();
      if (oldest.done === true) break;
      this.delete(oldest.value[0], oldest.value[1]);
    }
    this.entries.set(key, { untilMs, hits, limit });
    this.bytes += cost;
  }

  /** Forget everything. */
  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  private delete(key: string, entry: CacheEntry): void {
    void entry;
    this.entries.delete(key);
    this.bytes -= key.length * 2 + ENTRY_OVERHEAD_BYTES;
  }
}
