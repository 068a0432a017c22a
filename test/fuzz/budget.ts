/**
 * The fuzz tier's seed and budget. CI runs every property with a fixed seed and a small number of
 * runs; `npm run test:fuzz:long` (docs/testing.md, "Fuzzing") scales the runs up. Environment:
 *
 * - `SLUICE_FUZZ_SEED`: the fast-check seed (default {@link DEFAULT_SEED}); a failure prints the
 *   seed and the path that reproduces it;
 * - `SLUICE_FUZZ_SCALE`: multiply every property's CI runs by this (default 1);
 * - `SLUICE_FUZZ_RUNS`: run every property exactly this many times (wins over the scale; for
 *   replaying one failure quickly).
 */
import type { Parameters as FcParameters } from 'fast-check';

/** The seed CI uses. */
const DEFAULT_SEED = 20261123;

function positiveInt(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new Error(`${name}=${JSON.stringify(text)}: expected a non-negative integer`);
  }
  return value;
}

/** The fast-check seed of this run. */
const FUZZ_SEED = positiveInt('SLUICE_FUZZ_SEED') ?? DEFAULT_SEED;

/** How many times the CI budget this run takes. */
const FUZZ_SCALE = Math.max(1, positiveInt('SLUICE_FUZZ_SCALE') ?? 1);

const FIXED_RUNS = positiveInt('SLUICE_FUZZ_RUNS');

/** Runs of a property whose CI budget is `ciRuns`. */
function runsFor(ciRuns: number): number {
  return FIXED_RUNS ?? ciRuns * FUZZ_SCALE;
}

/** fast-check parameters for a property with `ciRuns` runs in CI. */
export function fcParams<T>(ciRuns: number): FcParameters<T> {
  return { seed: FUZZ_SEED, numRuns: runsFor(ciRuns), endOnFailure: true };
}

/** A vitest timeout for a test whose CI budget needs about `ciMs`, scaled with the runs. */
export function timeoutFor(ciMs: number): number {
  const factor = FIXED_RUNS === undefined ? FUZZ_SCALE : Math.max(1, FIXED_RUNS / 100);
  return ciMs * factor + 30_000;
}
