/**
 * The memory store's columns on their own (src/stores/memory/counter-columns.ts): a quiet state
 * is held in the columns (`total`, `emptyAt` and a shape), with the rest implied by the algorithm
 * (`impliedFirst`); any state the columns cannot imply must be kept whole as a wide state, and
 * counted at its extra bytes. Every state, either way, loads back as it was saved.
 * test/unit/algorithms/algorithms-implied-first.test.ts shows the algorithms' own quiet states
 * are implied; these cases hand-make the ones that are not, one broken condition each.
 */
import { describe, expect, it } from 'vitest';
import {
  ALGORITHM_STEPS,
  createCounterState,
  type Algorithm,
  type CounterState,
} from '../../../../src/algorithms/index.js';
import type { CounterSpec } from '../../../../src/stores/counter-store.js';
import {
  CounterColumns,
  counterBytes,
  FLAT,
  RING_NUMBER_BYTES,
  SHAPE,
  WIDE,
} from '../../../../src/stores/memory/counter-columns.js';
import { spec } from '../../../helpers/specs.js';

const EMPTY_AT = 1_700_000_060_000;
/** What a wide state is counted at besides its ring's numbers (counter-columns.ts). */
const WIDE_STATE_BYTES = 256;

/** The columns with their protected moves opened for the test. */
class Columns extends CounterColumns {
  constructor() {
    super(16);
  }
  put(key: string): number {
    return this.place(key, FLAT, counterBytes(key, FLAT));
  }
  saveState(slot: number, state: CounterState, counter: CounterSpec): void {
    this.save(slot, state, counter);
  }
  loadState(slot: number, counter: CounterSpec): CounterState {
    return this.load(slot, 0, counter);
  }
  shapeOf(slot: number): number {
    return this.meta[slot]! & SHAPE;
  }
  held(): number {
    return this.bytes;
  }
}

/** What a state means: its numbers and its stored pairs, oldest first (wherever the head is). */
function meaning(state: CounterState) {
  const capacity = state.ring.length >> 1;
  const pairs: [number, number][] = [];
  for (let i = 0; i < state.length; i++) {
    const at = ((state.head + i) % capacity) << 1;
    pairs.push([state.ring[at]!, state.ring[at + 1]!]);
  }
  return { total: state.total, emptyAtMs: state.emptyAtMs, stampMs: state.stampMs, pairs };
}

function counterOf(algorithm: Algorithm): CounterSpec {
  return spec('k', 1, 10, { algorithm, windowMs: 60_000 });
}

/** A token bucket state with no pair, as the algorithm leaves it (its stamp implied). */
function quietBucket(counter: CounterSpec): CounterState {
  const state = createCounterState();
  state.total = 3;
  state.emptyAtMs = EMPTY_AT;
  state.stampMs = ALGORITHM_STEPS.token_bucket.impliedFirst(state, counter);
  return state;
}

/** A sliding window state with one pair, as the algorithm leaves it (its first number implied). */
function onePairWindow(counter: CounterSpec): CounterState {
  const state = createCounterState();
  state.total = 3;
  state.emptyAtMs = EMPTY_AT;
  state.length = 1;
  state.ring[0] = ALGORITHM_STEPS.sliding_window.impliedFirst(state, counter);
  state.ring[1] = 3;
  return state;
}

/** Save `state` into a fresh slot; what it loads back as, its shape and the bytes it added. */
function roundTrip(state: CounterState, counter: CounterSpec) {
  const columns = new Columns();
  const slot = columns.put('k');
  const before = columns.held();
  const saved = meaning(state);
  columns.saveState(slot, state, counter);
  return {
    saved,
    loaded: meaning(columns.loadState(slot, counter)),
    shape: columns.shapeOf(slot),
    added: columns.held() - before,
  };
}

describe('counter columns: quiet states are held in the columns', () => {
  it('a token bucket with its stamp implied: no pair, no extra bytes', () => {
    const counter = counterOf('token_bucket');
    const { saved, loaded, shape, added } = roundTrip(quietBucket(counter), counter);
    expect(shape).toBe(FLAT);
    expect(added).toBe(0);
    expect(loaded).toEqual(saved);
  });

  it('a sliding window with one implied pair, at the ring start or past it', () => {
    const counter = counterOf('sliding_window');
    const atStart = onePairWindow(counter);
    // The same pair in the second slot of a longer ring, the head pointing at it.
    const pastStart = onePairWindow(counter);
    pastStart.ring = [11, 12, atStart.ring[0]!, atStart.ring[1]!];
    pastStart.head = 1;
    for (const state of [atStart, pastStart]) {
      const { saved, loaded, shape, added } = roundTrip(state, counter);
      expect(shape).not.toBe(WIDE);
      expect(added).toBe(0);
      expect(loaded).toEqual(saved);
    }
  });
});

describe('counter columns: a state the columns cannot imply is kept whole', () => {
  const bucket = counterOf('token_bucket');
  const window = counterOf('sliding_window');
  const cases: [string, CounterSpec, () => CounterState][] = [
    [
      'no pair, a stamp that is not the implied one',
      bucket,
      () => {
        const state = quietBucket(bucket);
        state.stampMs += 5;
        return state;
      },
    ],
    [
      'no pair, stamp 0, and a ring that would pass for one implied pair',
      bucket,
      () => {
        const state = quietBucket(bucket);
        state.ring[0] = state.stampMs;
        state.ring[1] = state.total;
        state.stampMs = 0;
        return state;
      },
    ],
    [
      'one pair and a stamp (the one a pairless state would imply)',
      window,
      () => {
        const state = onePairWindow(window);
        state.stampMs = state.ring[0]!;
        return state;
      },
    ],
    [
      'one pair whose first number is not the implied one',
      window,
      () => {
        const state = onePairWindow(window);
        state.ring[0]! += 1;
        return state;
      },
    ],
    [
      'one pair whose hits are not the total',
      window,
      () => {
        const state = onePairWindow(window);
        state.ring[1]! -= 1;
        return state;
      },
    ],
    [
      'two pairs',
      window,
      () => {
        const state = onePairWindow(window);
        state.ring = [state.ring[0]! - 1, 1, state.ring[0]!, 2];
        state.length = 2;
        return state;
      },
    ],
  ];

  it.each(cases)('%s', (_, counter, make) => {
    const state = make();
    const ringNumbers = state.ring.length;
    const { saved, loaded, shape, added } = roundTrip(state, counter);
    expect(shape).toBe(WIDE);
    expect(added).toBe(WIDE_STATE_BYTES + ringNumbers * RING_NUMBER_BYTES);
    expect(loaded).toEqual(saved);
  });
});
