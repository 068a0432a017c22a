/**
 * How the memory store keeps its memory bounded, never scanning the whole map at once:
 * - idle reclaim: a cursor walks the map a few entries per `apply()` call (and a bounded batch
 *   per tick of an optional unref'd timer), deleting entries whose every bucket has expired;
 * - two caps: on the count of counters (`maxKeys`, `MEMORY_MAX_KEYS`) and on the bytes they hold
 *   (`maxBytes`, `MEMORY_MAX_BYTES`), key text included, so that long descriptor values cannot
 *   exhaust the heap under the count cap (how bytes are counted: `counter-columns.ts`).
 *   Inserting a new counter into a full map (by either cap) first evicts an expired counter,
 *   else one not used recently, chosen by the CLOCK (second chance) approximation of
 *   least-recently-used: a hand walks the map in insertion order,
 *   clearing the "used" bit of each counter it passes and evicting the first one found without
 *   it (after {@link CAP_SCAN_LIMIT} counters, the one under the hand). Every access after the
 *   first sets the bit, so a counter in use survives a full turn of the hand, and a flood of keys
 *   seen once evicts its own kind first. Exact LRU needs a key reference
 *   and two links per counter (16 more bytes each); the approximation keeps them out.
 *   Re-inserting a key into the `Map` on each access (the `Map` order as the LRU order) is no
 *   option: V8's ordered hash table leaves a deleted entry in its bucket chain until the next
 *   rehash, so one hot key's chain grows with every request (measured: lookups ~35x slower).
 */
import type { CounterState } from '../../algorithms/index.js';
import {
  CounterColumns,
  counterBytes,
  FLAT,
  LIMITING,
  NONE,
  TWO_BYTE_KEY,
  USED,
} from './counter-columns.js';

/** Most counters the cap examines for an expired one before the clock hand picks a live one. */
const EXPIRED_SCAN_LIMIT = 16;

/** Most counters the clock hand examines for one eviction before it takes the one it is at. */
const CAP_SCAN_LIMIT = 64;

/**
 * Most counters the clock hand examines for one eviction in all: past {@link CAP_SCAN_LIMIT} it
 * only skips limiting counters, and when it finds nothing else the new key is not stored.
 */
const LIMITING_SCAN_LIMIT = 256;

/**
 * {@link CounterColumns} within the caps: new counters are inserted by making room first, idle
 * ones are reclaimed by a cursor, and what was dropped or not stored is counted for the store to
 * report (`evictedExpired`, `evictedLru`, `notStored`).
 */
export class CappedColumns extends CounterColumns {
  /** Most bytes the counters may hold, as counted (>= 0). */
  protected readonly maxBytes: number;

  /** The idle-reclaim cursor. */
  private cursor: Iterator<[string, number]> | undefined;
  /** The cap's clock hand. */
  private hand: Iterator<[string, number]> | undefined;
  /** Counters dropped since the last report because all their hits had expired. */
  protected evictedExpired = 0;
  /** Live counters dropped by the cap since the last report. */
  protected evictedLru = 0;
  /** New counters decided but not stored since the last report. */
  protected notStored = 0;
  /**
   * The cap may have removed a counter while this batch was applied (see `owns`). Only saves map
   * lookups: set, `owns` asks the map, whose answer is then what the flag being clear implies.
   */
  // Stryker disable next-line BooleanLiteral: only saves lookups (above)
  protected removedInBatch = false;

  /**
   * @param maxKeys Most counters held at once (>= 1).
   * @param maxBytes Most bytes the counters may hold, as counted (>= 0).
   */
  constructor(maxKeys: number, maxBytes: number) {
    super(maxKeys);
    this.maxBytes = maxBytes;
  }

  /**
   * Whether `slot` is a slot (not NONE) that still holds the counter `key`. Only the cap's
   * removals during the batch can change that (a cap below the batch's key count evicting one of
   * its counters, whose charge is then forgotten), so the map is asked only after one.
   */
  protected owns(slot: number, key: string): boolean {
    return slot !== NONE && (!this.removedInBatch || this.slots.get(key) === slot);
  }

  /** The empty state of a counter decided without being stored (counted as not stored). */
  protected fresh(at: number): CounterState {
    this.notStored++;
    return this.scratchState(at);
  }

  /**
   * Add a new, empty counter for `key`, making room first; NONE (nothing added) when the map is
   * full of counters that are limiting someone.
   */
  protected insert(key: string, now: number): number {
    // Reading a character makes V8 flatten a concatenated key (a rope of ~230 bytes for a
    // typical 40-character key) into one flat string (~60 bytes) before it is kept.
    key.charCodeAt(0);
    // UTF-8 is longer than the characters exactly when one is outside ASCII (one native pass,
    // once per key: a key is hashed and copied as often on its way here).
    const keyBits = Buffer.byteLength(key) === key.length ? FLAT : TWO_BYTE_KEY;
    const cost = counterBytes(key, keyBits);
    if (!this.makeRoom(now, cost)) return NONE;
    return this.place(key, keyBits, cost);
  }

  /**
   * Examine up to `budget` entries at the cursor, deleting those whose hits all expired. At the
   * end of a pass the cursor restarts from the front on the next call, or at once when `wrap`.
   */
  protected sweep(now: number, budget: number, wrap = false): void {
    for (let k = 0; k < budget; k++) {
      this.cursor ??= this.slots.entries();
      const next = this.cursor.next();
      if (next.done === true) {
        this.cursor = undefined;
        // With `wrap`, the budget bounds how often a tiny map is examined over.
        if (!wrap) return;
        continue;
      }
      const [key, slot] = next.value;
      if (this.emptyAt[slot]! <= now) {
        this.remove(slot, key);
        this.evictedExpired++;
      }
    }
  }

  /**
   * Make room for one new counter that will be counted at `cost` bytes, when the map is at either
   * cap: drop counters one by one with {@link evictOne} until it fits. Returns false, dropping
   * nothing more, when {@link evictOne} finds only limiting counters, or at once (dropping
   * nothing) when the counter alone is over the byte cap.
   */
  private makeRoom(now: number, cost: number): boolean {
    if (cost > this.maxBytes) return false;
    const slots = this.slots;
    while (slots.size >= this.maxKeys || this.bytes + cost > this.maxBytes) {
      // What goes may be a counter of the batch being applied, whose slot then is not its own
      // any more (see `owns`).
      this.removedInBatch = true;
      if (!this.evictOne(now)) return false;
    }
    return true;
  }

  /**
   * Drop counters with {@link evictOne} until the bytes held are within the cap again (after
   * busy counters' rings grew), or until only limiting counters are within its reach.
   */
  protected shed(now: number): void {
    while (this.bytes > this.maxBytes) {
      if (!this.evictOne(now)) return;
    }
  }

  /**
   * Drop one counter or more: an expired counter found within {@link EXPIRED_SCAN_LIMIT} at the
   * reclaim cursor, else the clock hand walks on from where it stopped, dropping the first
   * counter that has expired or was not used since it was created or the hand last passed it
   * (clearing the used bit of the others), and after {@link CAP_SCAN_LIMIT} counters the first
   * one it reaches that is not limiting. A limiting counter (see {@link LIMITING}) is never
   * dropped before it expires. An expired counter counts as `expired`, any other as `lru`.
   * Returns false, dropping nothing live, when the hand found only limiting counters within
   * {@link LIMITING_SCAN_LIMIT}.
   */
  private evictOne(now: number): boolean {
    const { slots, meta, emptyAt } = this;
    // An expired counter first, within a bounded look at the reclaim cursor.
    const before = slots.size;
    this.sweep(now, EXPIRED_SCAN_LIMIT, true);
    if (slots.size < before) return true;
    for (let k = 0; ; k++) {
      // A small map of limiting counters is passed over until then, as a large one is.
      if (k >= LIMITING_SCAN_LIMIT) return false;
      this.hand ??= slots.entries();
      const next = this.hand.next();
      if (next.done === true) {
        this.hand = undefined;
        continue;
      }
      const [key, slot] = next.value;
      if (emptyAt[slot]! <= now) {
        this.remove(slot, key);
        this.evictedExpired++;
        return true;
      }
      const bits = meta[slot]!;
      if ((bits & LIMITING) !== 0) continue;
      if ((bits & USED) === 0 || k >= CAP_SCAN_LIMIT) {
        this.remove(slot, key);
        this.evictedLru++;
        return true;
      }
      meta[slot] = bits & ~USED;
    }
  }

  /** Drop every counter, and start the cursor and the clock hand over. */
  protected override clear(): void {
    this.cursor = undefined;
    this.hand = undefined;
    super.clear();
  }
}
