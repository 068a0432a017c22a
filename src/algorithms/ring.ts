/**
 * The ring of `(a, b)` number pairs that the sliding window and the sliding log keep in
 * `CounterState.ring`, oldest first from slot `head`: slot `s` is `ring[2s]`, `ring[2s + 1]`, and
 * the capacity in pairs is `ring.length / 2`.
 */
import type { CounterState } from './types.js';

/**
 * Replace a full ring by one of `nextCapacity` pairs with the stored pairs unrolled from slot 0;
 * returns the new ring (also stored in `state.ring`, with `head` reset to 0).
 */
function growRing(state: CounterState, nextCapacity: number): number[] {
  const old = state.ring;
  const capacity = old.length >> 1;
  const ring = new Array<number>(nextCapacity * 2).fill(0);
  let from = state.head;
  // Stryker disable next-line EqualityOperator: one more pair copied lands in slot `length`, which the push that grows the ring writes next.
  for (let k = 0; k < state.length; k++) {
    ring[k << 1] = old[from << 1]!;
    ring[(k << 1) + 1] = old[(from << 1) + 1]!;
    from = from + 1 === capacity ? 0 : from + 1;
  }
  state.ring = ring;
  state.head = 0;
  return ring;
}

/** Slot of the newest stored pair (`length` must be > 0). */
export function newestSlot(state: CounterState): number {
  const capacity = state.ring.length >> 1;
  const slot = state.head + state.length - 1;
  return slot >= capacity ? slot - capacity : slot;
}

/**
 * Append the pair `(a, b)` after the newest, growing the ring (doubling, capped at
 * `maxCapacity` pairs once that is reached) when it is full.
 */
export function pushPair(state: CounterState, a: number, b: number, maxCapacity: number): void {
  let ring = state.ring;
  let capacity = ring.length >> 1;
  const length = state.length;
  if (length === capacity) {
    const doubled = capacity * 2;
    ring = growRing(state, capacity < maxCapacity ? Math.min(doubled, maxCapacity) : doubled);
    capacity = ring.length >> 1;
  }
  let slot = state.head + length;
  if (slot >= capacity) slot -= capacity;
  ring[slot << 1] = a;
  ring[(slot << 1) + 1] = b;
  state.length = length + 1;
}

/**
 * Drop the stored pairs whose `a` is below `keepFrom`, oldest first, subtracting their `b` from
 * `state.total` (set to exactly 0 when none is left). Returns how many pairs remain.
 */
export function dropPairsBelow(state: CounterState, keepFrom: number): number {
  const ring = state.ring;
  const capacity = ring.length >> 1;
  let head = state.head;
  let length = state.length;
  let total = state.total;
  while (length > 0) {
    const at = head << 1;
    if (ring[at]! >= keepFrom) break;
    total -= ring[at + 1]!;
    head = head + 1 === capacity ? 0 : head + 1;
    length--;
  }
  // Stryker disable next-line ConditionalExpression: where an empty ring's head points is never read (every step goes by head and length, and the ring's users look at no slot while length is 0); 0 keeps newestSlot of an empty ring at -1.
  state.head = length === 0 ? 0 : head;
  state.length = length;
  // An empty state is exactly zero, whatever was summed and subtracted before.
  state.total = length === 0 ? 0 : total;
  return length;
}

/**
 * Walking the stored pairs oldest first, the `a` of the first pair at which the summed `b`
 * reaches `amount`; -1 when all of them together do not.
 */
export function pairFreeing(state: CounterState, amount: number): number {
  const ring = state.ring;
  const capacity = ring.length >> 1;
  let slot = state.head;
  let freed = 0;
  for (let k = 0; k < state.length; k++) {
    freed += ring[(slot << 1) + 1]!;
    if (freed >= amount) return ring[slot << 1]!;
    slot = slot + 1 === capacity ? 0 : slot + 1;
  }
  return -1;
}
