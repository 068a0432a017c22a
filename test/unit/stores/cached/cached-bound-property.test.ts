/**
 * Cached mode's over-admission bound (docs/cached-mode.md, "The bound"), as a property: R
 * simulated replicas (real cached stores) share one simulated global count (a memory store
 * playing Redis: each sync request is applied there atomically when it is delivered, as a script
 * call is). Random arrivals per replica, random sync sends and deliveries (a sync is in flight
 * between the two, as over a network). Within one window:
 *
 * - the hits admitted in all never exceed `L + (R - 1) x min(L, A)`, where A is the most hits one
 *   replica admitted between the send of one of its syncs and the delivery of its next one (the
 *   `r x (I + rtt)` of the documented formula, measured on the run);
 * - with time passing too, the same holds in every fixed window and in every W ms of a sliding
 *   window (views and local hits expire, windows end);
 * - rejected calls charge nothing: once every sync is delivered the global count is exactly the
 *   hits admitted;
 * - one replica alone on a fixed window decides exactly as the memory store does, whatever the
 *   sync times (its view plus its local hits are the whole count), shadow counters past their
 *   limit included.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Algorithm } from '../../../../src/algorithms/index.js';
import { createManualClock } from '../../../../src/clock.js';
import { createCachedStore, type CachedStore } from '../../../../src/stores/cached/cached-store.js';
import type {
  BatchResult,
  CounterSpec,
  CounterStore,
} from '../../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../../src/stores/memory/memory-store.js';
import { propertyRuns } from '../../../helpers/property-budget.js';

/** A replica's link to the global count: requests wait in it until delivered. */
class Link implements CounterStore {
  private readonly queue: { specs: readonly CounterSpec[]; resolve(batch: BatchResult): void }[] =
    [];
  constructor(private readonly global: CounterStore) {}
  apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    return new Promise((resolve) => this.queue.push({ specs, resolve }));
  }
  /** Apply every waiting request to the global count now. */
  async deliver(): Promise<void> {
    for (const request of this.queue.splice(0)) {
      request.resolve(await this.global.apply(request.specs));
    }
  }
  size = (): number => 0;
  healthy = (): boolean => true;
  close = (): Promise<void> => Promise.resolve();
}

/** One step of a run: a call of `hits` to a replica, a sync sent or delivered, time passing. */
type Step =
  | { kind: 'call'; replica: number; hits: number }
  | { kind: 'send'; replica: number }
  | { kind: 'deliver'; replica: number }
  | { kind: 'wait'; ms: number };

/** Steps on `replicas` replicas; with `waitMs` > 0, time also moves by up to that much. */
const step = (replicas: number, waitMs: number): fc.Arbitrary<Step> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant('call' as const),
        replica: fc.nat(replicas - 1),
        hits: fc.integer({ min: 1, max: 3 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant('send' as const), replica: fc.nat(replicas - 1) }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('deliver' as const),
        replica: fc.nat(replicas - 1),
      }),
    },
    {
      weight: waitMs > 0 ? 1 : 0,
      arbitrary: fc.record({
        kind: fc.constant('wait' as const),
        ms: fc.integer({ min: 1, max: Math.max(1, waitMs) }),
      }),
    },
  );

/** A run's shape and steps; `waitMs` as for {@link step}. */
const run = (waitMs: number) =>
  fc
    .record({
      replicas: fc.integer({ min: 1, max: 4 }),
      limit: fc.integer({ min: 1, max: 40 }),
      algorithm: fc.constantFrom<Algorithm>('fixed_window', 'sliding_window'),
    })
    .chain((shape) =>
      fc.record({
        shape: fc.constant(shape),
        steps: fc.array(step(shape.replicas, waitMs), { maxLength: 200, size: 'max' }),
      }),
    );

/** A minute's window starts at this time. */
const T0 = 1_700_000_040_000;

/**
 * The window of every counter in these runs. Arrays are drawn at full size (`size: 'max'`):
 * fast-check's default keeps them near ten steps, too few to reach a limit, sync, and wait.
 */
const W = 60_000;

/** What a simulated run gives. */
interface Outcome {
  /** Every admitted call: its time and hits. */
  readonly admitted: readonly { readonly at: number; readonly hits: number }[];
  /** A: the most hits one replica admitted between a sync's send and the next one's delivery. */
  readonly most: number;
  /** The count the global store holds at the end, once every hit is delivered. */
  readonly globalCount: number;
}

/** Run `steps` on `shape.replicas` cached stores sharing one global count. */
async function simulate(
  shape: { replicas: number; limit: number; algorithm: Algorithm },
  steps: readonly Step[],
): Promise<Outcome> {
  const { replicas: count, limit, algorithm } = shape;
  const clock = createManualClock(T0);
  const global = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const links = Array.from({ length: count }, () => new Link(global));
  const replicas: CachedStore[] = links.map((remote) =>
    createCachedStore({
      remote,
      syncIntervalMs: 100,
      maxCounters: 100,
      failureMode: 'memory',
      clock: clock.now,
      timer: false,
    }),
  );
  const syncs: (Promise<void> | undefined)[] = replicas.map(() => undefined);
  // Per replica: hits admitted since the send of its last delivered sync (or the start), and
  // since the send of the sync in flight; A is the largest the first one reached.
  const sinceDelivered = replicas.map(() => 0);
  const sinceSent = replicas.map(() => 0);
  let most = 0;
  const admitted: { at: number; hits: number }[] = [];
  const deliver = async (r: number): Promise<void> => {
    const pending = syncs[r];
    if (pending === undefined) return;
    await links[r]!.deliver();
    await pending;
    syncs[r] = undefined;
    sinceDelivered[r] = sinceSent[r]!;
  };
  const spec = (hits: number): CounterSpec => ({
    key: 'k',
    algorithm,
    limit,
    windowMs: W,
    burst: limit,
    hits,
    mode: 'enforced',
  });
  for (const s of steps) {
    if (s.kind === 'wait') {
      clock.advance(s.ms);
      continue;
    }
    const r = s.replica;
    if (s.kind === 'call') {
      clock.advance(1);
      if (replicas[r]!.applyNow([spec(s.hits)]).admitted) {
        admitted.push({ at: clock.now(), hits: s.hits });
        sinceDelivered[r]! += s.hits;
        sinceSent[r]! += s.hits;
        most = Math.max(most, sinceDelivered[r]!);
      }
    } else if (s.kind === 'send') {
      if (syncs[r] !== undefined) continue;
      sinceSent[r] = 0;
      syncs[r] = replicas[r]!.sync();
    } else {
      await deliver(r);
    }
  }
  // Deliver everything, then one more sync each.
  for (let r = 0; r < count; r++) await deliver(r);
  for (let r = 0; r < count; r++) {
    syncs[r] = replicas[r]!.sync();
    await deliver(r);
  }
  const peek = await global.apply([{ ...spec(0), limit: 1_000_000 }]);
  return { admitted, most, globalCount: 1_000_000 - peek.results[0]!.remaining };
}

const sum = (calls: readonly { hits: number }[]): number =>
  calls.reduce((total, call) => total + call.hits, 0);

describe('cached mode: the over-admission bound (property)', () => {
  it('admits at most L + (R - 1) x min(L, A) in one window, and rejected calls charge nothing', async () => {
    await fc.assert(
      fc.asyncProperty(run(0), async ({ shape, steps }) => {
        const { admitted, most, globalCount } = await simulate(shape, steps);
        const { replicas, limit } = shape;
        expect(sum(admitted)).toBeLessThanOrEqual(limit + (replicas - 1) * Math.min(limit, most));
        // Every admitted hit reached the global count, and nothing else did.
        expect(globalCount).toBe(sum(admitted));
      }),
      { seed: 3030, numRuns: propertyRuns(400) },
    );
  });

  it('keeps the bound in every window as time passes (fixed windows, and any W for sliding)', async () => {
    await fc.assert(
      fc.asyncProperty(run(W / 2), async ({ shape, steps }) => {
        const { admitted, most } = await simulate(shape, steps);
        const { replicas, limit, algorithm } = shape;
        const bound = limit + (replicas - 1) * Math.min(limit, most);
        for (const first of admitted) {
          // Fixed: the aligned window of this call; sliding: the W ms from this call on.
          const from = algorithm === 'fixed_window' ? first.at - ((first.at - T0) % W) : first.at;
          const inWindow = admitted.filter((call) => call.at >= from && call.at < from + W);
          expect(sum(inWindow)).toBeLessThanOrEqual(bound);
        }
      }),
      { seed: 3032, numRuns: propertyRuns(400) },
    );
  });

  it('one replica on a fixed window decides as the memory store, whatever the sync times', async () => {
    const history = fc.array(
      fc.oneof(
        fc.record({
          kind: fc.constant('call' as const),
          hits: fc.nat(4),
          key: fc.constantFrom('a', 'b'),
          mode: fc.constantFrom('enforced', 'enforced', 'shadow'),
        }),
        fc.record({ kind: fc.constant('sync' as const) }),
        fc.record({ kind: fc.constant('wait' as const), ms: fc.integer({ min: 1, max: 40_000 }) }),
      ),
      { maxLength: 120, size: 'max' },
    );
    await fc.assert(
      fc.asyncProperty(history, async (steps) => {
        const clock = createManualClock(T0);
        const global = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
        const memory = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
        const cached = createCachedStore({
          remote: global,
          syncIntervalMs: 100,
          maxCounters: 100,
          failureMode: 'memory',
          clock: clock.now,
          timer: false,
        });
        for (const s of steps) {
          if (s.kind === 'wait') clock.advance(s.ms);
          else if (s.kind === 'sync') await cached.sync();
          else {
            const specs: CounterSpec[] = [
              {
                key: s.key,
                algorithm: 'fixed_window',
                limit: 7,
                windowMs: 60_000,
                burst: 7,
                hits: s.hits,
                // Shadow counters go past their limit: the view must then stay over.
                mode: s.mode,
              },
              {
                key: 'c',
                algorithm: 'fixed_window',
                limit: 20,
                windowMs: 60_000,
                burst: 20,
                hits: 1,
                mode: 'enforced',
              },
            ];
            const want = await memory.apply(specs);
            const got = cached.applyNow(specs);
            expect(got.admitted).toBe(want.admitted);
            expect(got.results.map((r) => [r.overLimit, r.remaining, r.resetMs])).toEqual(
              want.results.map((r) => [r.overLimit, r.remaining, r.resetMs]),
            );
          }
        }
      }),
      { seed: 3031, numRuns: propertyRuns(300) },
    );
  });
});
