/**
 * The memory store's counters in columns (docs/operations.md, capacity planning): one `Map` from
 * counter key to a slot number, and the counters of every slot in columns of typed arrays, so a
 * quiet counter costs a few dozen bytes next to its key instead of a JavaScript object, an array
 * and their headers:
 * - `total`, `emptyAt` (Float64): the algorithm state's `total` and `emptyAtMs`;
 * - `meta` (Uint8): the state's shape: no stored pair, or one pair (sliding window or log), or
 *   {@link WIDE} (several pairs: the whole state object lives in a side `Map`; busy counters
 *   only); plus a "used since the clock hand last passed" bit;
 * - `limit` (Uint32): the limit of the last charge, for the debug view (MAX_UINT32 at most).
 * What else a quiet state holds (`stampMs`, or the first number of its one pair, whose second is
 * `total`) is implied by those (`CounterAlgorithm.impliedFirst`); a state for which it is not
 * is kept {@link WIDE}. Free slots are chained through `total`. The algorithms (src/algorithms)
 * work on `CounterState` objects: {@link CounterColumns.load} loads a counter into a reused
 * scratch state and {@link CounterColumns.save} writes it back.
 *
 * The bytes the counters hold are counted here too (the byte cap, `counter-cap.ts`, reads them):
 * each counter at {@link COUNTER_BYTES} plus its key's characters (two bytes each when the key has
 * one outside ASCII, as V8 then stores the whole string), and a {@link WIDE} one also at
 * {@link WIDE_STATE_BYTES} plus its ring's numbers. The count is kept up to date at each insert,
 * removal and ring growth, in O(1) and without allocating; a key that is not ASCII is found once,
 * when it is inserted.
 */
import {
  ALGORITHM_STEPS,
  cloneCounterState,
  createCounterState,
  type CounterState,
} from '../../algorithms/index.js';
import type { CounterSpec } from '../counter-store.js';

/**
 * Bytes a counter is counted at besides its key's characters: its `Map` entry, its cells in the
 * columns and the key string's headers. Measured from about 60 (many counters) to 140 (a little
 * over a power of two, where the `Map` and the columns have just doubled); the parts add up to
 * about 150 at worst, and this leaves a margin above that, so what is counted is never less than
 * what is held (docs/operations.md, "Capacity planning").
 */
const COUNTER_BYTES = 192;

/**
 * Bytes a {@link WIDE} counter's state is counted at besides its ring's numbers: the object and
 * its boxed numbers, the ring array's headers and the side map's entry (measured about 200).
 */
const WIDE_STATE_BYTES = 256;

/** Bytes per number of a wide state's ring (a double each). */
export const RING_NUMBER_BYTES = 8;

/** Shape of a slot with no stored pair (`stampMs` implied). */
export const FLAT = 0;
/** Shape of a slot with one stored pair (its first number implied, its second is `total`). */
const ONE_PAIR = 1;
/** Shape of a slot whose state object lives in the side map (several stored pairs). */
export const WIDE = 2;
/** The bits of `meta` that hold the shape. */
export const SHAPE = 3;
/** The bit of `meta` set by every access and cleared by the passing clock hand. */
export const USED = 4;
/**
 * The bit of `meta` set when the counter's last decision left it without room (over its limit,
 * or at it): such a counter is limiting someone, and the cap never evicts it before it expires.
 */
export const LIMITING = 8;
/**
 * The bit of `meta` set when the key has a character outside ASCII, so V8 may hold it at two
 * bytes per character: the key is counted so (see `counterBytes`).
 */
export const TWO_BYTE_KEY = 16;
/** The bits of `meta` that {@link CounterColumns.save} keeps. */
const FLAGS = USED | LIMITING | TWO_BYTE_KEY;

/** No slot (end of a list, or a counter that does not exist). */
export const NONE = -1;

/** Slots allocated when the first counter arrives; the columns double from there. */
const INITIAL_CAPACITY = 1024;

/**
 * The counters' map, columns and byte count, with the moves that keep them consistent: load and
 * save a counter's state, take a slot for a new key, free one. What is dropped when, and why, is
 * the cap's business (`counter-cap.ts`); the decision is the store's (`memory-store.ts`).
 */
export class CounterColumns {
  /** Most counters held at once (>= 1): the columns never grow past it. */
  protected readonly maxKeys: number;
  /** Bytes held as counted (see the module header); at most `maxBytes` after every call. */
  protected bytes = 0;
  /** Counter key to slot. */
  protected readonly slots = new Map<string, number>();
  /** State objects of {@link WIDE} slots. */
  private readonly wide = new Map<number, CounterState>();

  // The columns, indexed by slot (see the module header).
  protected total = new Float64Array(0);
  protected emptyAt = new Float64Array(0);
  protected meta = new Uint8Array(0);
  protected limit = new Uint32Array(0);
  /** Slots below this have been handed out at least once. */
  private used = 0;
  /** First free slot below `used` (chained through `total`), or NONE. */
  private freeHead = NONE;

  /** Scratch states, one per batch position, each with its own two-number ring. */
  private readonly scratch: CounterState[] = [];
  private readonly scratchRings: number[][] = [];

  /** @param maxKeys Most counters held at once (>= 1). */
  constructor(maxKeys: number) {
    this.maxKeys = maxKeys;
  }

  /** The state of `slot`: its wide state object, or scratch state `at` loaded from the columns. */
  protected load(slot: number, at: number, spec: CounterSpec): CounterState {
    const shape = this.meta[slot]! & SHAPE;
    if (shape === WIDE) return this.wide.get(slot)!;
    const state = this.scratchState(at);
    const ring = state.ring;
    state.total = this.total[slot]!;
    state.emptyAtMs = this.emptyAt[slot]!;
    state.length = shape === ONE_PAIR ? 1 : 0;
    const first = ALGORITHM_STEPS[spec.algorithm].impliedFirst(state, spec);
    if (shape === ONE_PAIR) {
      ring[0] = first;
      ring[1] = state.total;
    } else {
      state.stampMs = first;
    }
    return state;
  }

  /** Scratch state `at`, empty (its own two-number ring, zeroed). */
  protected scratchState(at: number): CounterState {
    const state = (this.scratch[at] ??= createCounterState());
    // An algorithm may have given the state a longer ring; it gets its own back.
    const ring = (this.scratchRings[at] ??= state.ring);
    state.ring = ring;
    state.head = 0;
    state.total = 0;
    state.emptyAtMs = 0;
    state.stampMs = 0;
    state.length = 0;
    ring[0] = 0;
    ring[1] = 0;
    return state;
  }

  /**
   * Write `state` (as {@link load} returned it, then changed) back to the columns of `slot`,
   * keeping it {@link WIDE} when the columns cannot hold it.
   */
  protected save(slot: number, state: CounterState, spec: CounterSpec): void {
    this.total[slot] = state.total;
    this.emptyAt[slot] = state.emptyAtMs;
    const meta = this.meta[slot]!;
    if ((meta & SHAPE) === WIDE) return;
    const used = meta & FLAGS;
    const length = state.length;
    // Stryker disable next-line ConditionalExpression: a shortcut only; with two pairs or more neither test below passes
    if (length <= 1) {
      const first = ALGORITHM_STEPS[spec.algorithm].impliedFirst(state, spec);
      if (length === 0 && state.stampMs === first) {
        this.meta[slot] = FLAT | used;
        return;
      }
      const at = state.head << 1;
      if (
        length === 1 &&
        state.stampMs === 0 &&
        state.ring[at] === first &&
        state.ring[at + 1] === state.total
      ) {
        this.meta[slot] = ONE_PAIR | used;
        return;
      }
    }
    // Several pairs (or numbers the columns do not imply): the slot gets its own state object.
    const wide = cloneCounterState(state);
    this.wide.set(slot, wide);
    this.meta[slot] = WIDE | used;
    this.bytes += WIDE_STATE_BYTES + wide.ring.length * RING_NUMBER_BYTES;
  }

  /**
   * Put a new, empty counter for `key` in a free slot and return the slot; the caller has made
   * room for its `cost` bytes (see {@link counterBytes}). `keyBits`: {@link TWO_BYTE_KEY} or
   * {@link FLAT}.
   */
  protected place(key: string, keyBits: number, cost: number): number {
    let slot = this.freeHead;
    if (slot !== NONE) {
      this.freeHead = this.total[slot]!;
    } else {
      // The columns' length is the capacity.
      if (this.used === this.total.length) this.grow();
      slot = this.used++;
    }
    this.total[slot] = 0;
    this.emptyAt[slot] = 0;
    // Not marked used: a counter earns its second chance by being used again, so a flood of
    // keys seen once never pushes out one in steady use.
    this.meta[slot] = FLAT | keyBits;
    this.limit[slot] = 0;
    this.slots.set(key, slot);
    this.bytes += cost;
    return slot;
  }

  /** Double the columns (never beyond `maxKeys` slots, which the cap keeps enough). */
  private grow(): void {
    const capacity = Math.max(
      1,
      Math.min(Math.max(INITIAL_CAPACITY, this.total.length * 2), this.maxKeys),
    );
    this.total = widen(this.total, new Float64Array(capacity));
    this.emptyAt = widen(this.emptyAt, new Float64Array(capacity));
    this.meta = widen(this.meta, new Uint8Array(capacity));
    this.limit = widen(this.limit, new Uint32Array(capacity));
  }

  /** Delete the counter `key` at `slot` from the map, and free the slot. */
  protected remove(slot: number, key: string): void {
    const meta = this.meta[slot]!;
    let bytes = counterBytes(key, meta);
    if ((meta & SHAPE) === WIDE) {
      bytes += WIDE_STATE_BYTES + this.wide.get(slot)!.ring.length * RING_NUMBER_BYTES;
      this.wide.delete(slot);
    }
    this.bytes -= bytes;
    this.slots.delete(key);
    this.meta[slot] = FLAT;
    this.total[slot] = this.freeHead;
    this.emptyAt[slot] = 0;
    this.freeHead = slot;
  }

  /** Drop every counter and give the columns' memory back. */
  protected clear(): void {
    this.slots.clear();
    this.wide.clear();
    this.used = 0;
    this.freeHead = NONE;
    this.bytes = 0;
    this.total = new Float64Array(0);
    this.emptyAt = new Float64Array(0);
    this.meta = new Uint8Array(0);
    this.limit = new Uint32Array(0);
  }
}

/**
 * Bytes a counter of `key` is counted at, without a wide state: {@link COUNTER_BYTES} plus its
 * characters, at two bytes each when `meta` has {@link TWO_BYTE_KEY}, rounded up to the 8 bytes
 * V8 aligns a string to.
 */
export function counterBytes(key: string, meta: number): number {
  const chars = (meta & TWO_BYTE_KEY) === 0 ? key.length : key.length * 2;
  return COUNTER_BYTES + ((chars + 7) & ~7);
}

/** `into` (a larger column) with `from`'s cells copied to its start. */
function widen<T extends Float64Array | Uint8Array | Int32Array | Uint32Array>(
  from: T,
  into: T,
): T {
  into.set(from);
  return into;
}
