/**
 * Random traffic against the sliding window, cross-checked with the brute-force model in
 * test/helpers/sliding-model.ts. Every run is seeded (mulberry32); a failure names its seed, and
 * `SLUICE_SEED=<seed>` replays just that run.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import {
  checkAndCharge,
  cloneState,
  createSlidingWindowState,
  evict,
  hasRoom,
  type SlidingWindowResult,
  type SlidingWindowState,
} from '../../../src/algorithms/sliding-window.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { CounterSpec } from '../../../src/stores/counter-store.js';
import {
  ModelCounter,
  ModelStore,
  maxInAnyWindow,
  modelCheckAndCharge,
  mulberry32,
  type ModelHit,
} from '../../helpers/sliding-model.js';
import { propertyRuns, scaledFloor } from '../../helpers/property-budget.js';

const T0 = 1_700_000_000_000;
// 20 and 100 ms windows (1 and 5 ms sub-buckets) stress the boundaries; the rest are real units.
const WINDOWS = [20, 100, 1_000, 2_000, 60_000];
const LIMITS = [0, 1, 2, 3, 5, 8, 12, 20];

function seeds(base: number, runs: number): number[] {
  const only = process.env['SLUICE_SEED'];
  if (only !== undefined && only !== '') return [Number(only)];
  return Array.from({ length: propertyRuns(runs) }, (_, k) => base + k);
}

/** Prefix a failure with its seed, so the run can be replayed. */
function nameSeed(seed: number, error: unknown): unknown {
  if (error instanceof Error)
    error.message = `seed ${seed} (SLUICE_SEED=${seed}): ${error.message}`;
  return error;
}

/** Run `body` with a PRNG seeded by `seed`, naming the seed in any failure. */
function withSeed(seed: number, body: (rand: () => number) => void): void {
  try {
    body(mulberry32(seed));
  } catch (error) {
    throw nameSeed(seed, error);
  }
}

/** {@link withSeed} for an async body. */
async function withSeedAsync(
  seed: number,
  body: (rand: () => number) => Promise<void>,
): Promise<void> {
  try {
    await body(mulberry32(seed));
  } catch (error) {
    throw nameSeed(seed, error);
  }
}

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}

function int(rand: () => number, below: number): number {
  return Math.floor(rand() * below);
}

/** Deep equality of two results without the cost of `expect` on the passing path. */
function sameResult(a: SlidingWindowResult, b: SlidingWindowResult): boolean {
  return a.overLimit === b.overLimit && a.remaining === b.remaining && a.resetMs === b.resetMs;
}

/** The next gap in ms: same instant, small steps, exact bucket boundaries, idle gaps beyond W. */
function gap(rand: () => number, now: number, windowMs: number): number {
  const b = windowMs / 20;
  const r = rand();
  if (r < 0.2) return 0;
  if (r < 0.45) return int(rand, b);
  if (r < 0.55) return b;
  if (r < 0.65) return b - (now % b); // exactly onto the next boundary
  if (r < 0.7) return Math.max(0, b - (now % b) - 1); // one ms before it
  if (r < 0.76) return windowMs;
  if (r < 0.8) return windowMs + b;
  if (r < 0.84) return windowMs + int(rand, 3 * windowMs); // idle longer than W
  return int(rand, windowMs / 4);
}

describe('sliding window vs the brute-force model (one counter at a time)', () => {
  it('matches decisions, never exceeds the limit in any W, and reports the exact wait', () => {
    const seen = { admitted: 0, rejected: 0, exactWaits: 0, neverAdmitted: 0, fullWindows: 0 };
    for (const seed of seeds(1, 400)) {
      withSeed(seed, (rand) => {
        const counters = Array.from({ length: 1 + int(rand, 3) }, () => ({
          windowMs: pick(rand, WINDOWS),
          limit: pick(rand, LIMITS),
          state: createSlidingWindowState(),
          admitted: [] as ModelHit[],
        }));
        const models = counters.map((c) => new ModelCounter(c.windowMs));
        let now = T0 + int(rand, 100_000);
        const out: SlidingWindowResult = { overLimit: false, remaining: 0, resetMs: 0 };

        for (let step = 0; step < 250; step++) {
          const which = int(rand, counters.length);
          const c = counters[which]!;
          now += gap(rand, now, c.windowMs);
          const hits = int(rand, 6);
          const before = cloneState(c.state);
          const got = { ...checkAndCharge(c.state, now, hits, c.limit, c.windowMs, out) };
          const want = modelCheckAndCharge(models[which]!, now, hits, c.limit);
          if (!sameResult(got, want)) {
            expect(got, `step ${step}, now ${now}, hits ${hits}`).toEqual(want);
          }
          if (!got.overLimit && hits > 0) {
            c.admitted.push({ atMs: now, hits });
            seen.admitted++;
          }

          if (got.overLimit) {
            seen.rejected++;
            if (hits > c.limit) {
              expect(got.resetMs).toBe(c.windowMs);
              seen.neverAdmitted++;
            } else {
              expectExactWait(before, now, hits, c.limit, c.windowMs, got.resetMs);
              seen.exactWaits++;
            }
          }
        }

        for (const c of counters) {
          const most = maxInAnyWindow(c.admitted, c.windowMs);
          expect(most).toBeLessThanOrEqual(c.limit);
          if (most === c.limit && c.limit > 0) seen.fullWindows++;
        }
      });
    }
    // The traffic must actually exercise what is asserted.
    if (process.env['SLUICE_SEED'] === undefined) {
      expect(seen.exactWaits).toBeGreaterThan(scaledFloor(5_000));
      expect(seen.neverAdmitted).toBeGreaterThan(scaledFloor(500));
      expect(seen.admitted).toBeGreaterThan(scaledFloor(10_000));
      expect(seen.fullWindows).toBeGreaterThan(scaledFloor(200));
    }
  }, 60_000);
});

/** Waiting `resetMs - 1` from `now` still rejects `hits`; waiting exactly `resetMs` admits them. */
function expectExactWait(
  state: SlidingWindowState,
  now: number,
  hits: number,
  limit: number,
  windowMs: number,
  resetMs: number,
): void {
  const early = cloneState(state);
  evict(early, now + resetMs - 1, windowMs);
  const onTime = cloneState(state);
  evict(onTime, now + resetMs, windowMs);
  if (resetMs <= 0 || hasRoom(early, hits, limit) || !hasRoom(onTime, hits, limit)) {
    expect.fail(`resetMs ${resetMs} at ${now} for ${hits} hits is not the exact wait`);
  }
}

interface KeyTemplate {
  key: string;
  windowMs: number;
  limit: number;
  enforced: boolean;
}

describe('memory store vs the brute-force model (batches)', () => {
  it('matches every batch decision and result, all-or-nothing, with shadow and duplicate specs', async () => {
    const seen = { admitted: 0, rejected: 0, shadowOverCharged: 0, duplicates: 0, probes: 0 };
    for (const seed of seeds(10_001, 120)) {
      await withSeedAsync(seed, async (rand) => {
        const templates: KeyTemplate[] = Array.from({ length: 2 + int(rand, 4) }, (_, k) => ({
          key: `k${k}`,
          windowMs: pick(rand, WINDOWS),
          limit: pick(rand, LIMITS),
          enforced: rand() < 0.75,
        }));
        const clock = createManualClock(T0 + int(rand, 100_000));
        const store = createMemoryStore({
          clock: clock.now,
          sweepBatch: int(rand, 3),
          sweepIntervalMs: 0,
        });
        const model = new ModelStore();
        let admittedBatches = 0;
        let rejectedBatches = 0;

        for (let step = 0; step < 200; step++) {
          const size = 1 + int(rand, 4);
          const specs: CounterSpec[] = [];
          for (let s = 0; s < size; s++) {
            const t = pick(rand, templates);
            specs.push({
              key: t.key,
              algorithm: 'sliding_window',
              limit: t.limit,
              windowMs: t.windowMs,
              burst: t.limit,
              hits: int(rand, 6),
              mode: t.enforced ? 'enforced' : 'shadow',
            });
          }
          clock.advance(gap(rand, clock.now(), specs[0]!.windowMs));
          const now = clock.now();

          const got = await store.apply(specs);
          const want = model.apply(now, specs);
          if (
            got.admitted !== want.admitted ||
            !got.results.every((r, i) => sameResult(r, want.results[i]!))
          ) {
            expect(
              { admitted: got.admitted, results: got.results },
              `step ${step}, now ${now}, specs ${JSON.stringify(specs)}`,
            ).toEqual({ admitted: want.admitted, results: want.results });
          }
          if (got.admitted) admittedBatches++;
          else rejectedBatches++;
          if (new Set(specs.map((x) => x.key)).size < specs.length) seen.duplicates++;
          if (
            got.admitted &&
            specs.some((x, i) => x.mode !== 'enforced' && x.hits > 0 && got.results[i]!.overLimit)
          ) {
            seen.shadowOverCharged++;
          }

          let liveKeys = 0;
          for (const counter of model.counters.values()) if (counter.totalAt(now) > 0) liveKeys++;
          expect(store.size()).toBeGreaterThanOrEqual(liveKeys);
          expect(store.size()).toBeLessThanOrEqual(model.counters.size);

          // (c) on the real store: replay this key's live history into a fresh store.
          for (let i = 0; i < specs.length; i++) {
            const spec = specs[i]!;
            const r = got.results[i]!;
            if (!r.overLimit) continue;
            const cumulative = want.cumulative[i]!;
            if (cumulative > spec.limit) {
              expect(r.resetMs).toBe(spec.windowMs);
              continue;
            }
            const history = model.counters.get(spec.key)?.charges ?? [];
            const probe = { ...spec, hits: cumulative, mode: 'enforced' as const };
            expect(await replayAndProbe(history, probe, now + r.resetMs - 1)).toBe(true);
            expect(await replayAndProbe(history, probe, now + r.resetMs)).toBe(false);
            seen.probes++;
          }
        }

        for (const t of templates) {
          if (!t.enforced) continue;
          const charges = model.counters.get(t.key)?.charges ?? [];
          expect(maxInAnyWindow(charges, t.windowMs), `key ${t.key}`).toBeLessThanOrEqual(t.limit);
        }
        seen.admitted += admittedBatches;
        seen.rejected += rejectedBatches;
        await store.close();
      });
    }
    if (process.env['SLUICE_SEED'] === undefined) {
      expect(seen.admitted).toBeGreaterThan(scaledFloor(5_000));
      expect(seen.rejected).toBeGreaterThan(scaledFloor(5_000));
      expect(seen.shadowOverCharged).toBeGreaterThan(scaledFloor(200));
      expect(seen.duplicates).toBeGreaterThan(scaledFloor(1_000));
      expect(seen.probes).toBeGreaterThan(scaledFloor(2_000));
    }
  }, 60_000);
});

/**
 * Replay `history` (charges up to now, as shadow specs, which are always charged) into a fresh
 * store, then ask once at `atMs` with `probe`; returns whether it was over limit.
 */
async function replayAndProbe(
  history: readonly ModelHit[],
  probe: CounterSpec,
  atMs: number,
): Promise<boolean> {
  const clock = createManualClock(T0);
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const horizon = atMs - 2 * probe.windowMs;
  for (const charge of history) {
    if (charge.atMs < horizon) continue;
    clock.set(charge.atMs);
    await store.apply([{ ...probe, hits: charge.hits, mode: 'shadow' }]);
  }
  clock.set(atMs);
  const over = (await store.apply([probe])).results[0]!.overLimit;
  await store.close();
  return over;
}
