/**
 * The budget of the seeded property tests. `SLUICE_PROPERTY_SCALE` (default 1, at most 1) runs
 * that fraction of each test's seeds, at least one; `npm run test:mutation` sets a small one so
 * each mutant costs a fraction of a second there (docs/testing.md, "Mutation testing"). The
 * seeds are a prefix of the full run's, so a smaller budget is the same traffic, shorter.
 */
const raw = process.env['SLUICE_PROPERTY_SCALE'];
const parsed = raw === undefined || raw === '' ? 1 : Number(raw);
if (!(parsed > 0 && parsed <= 1)) {
  throw new Error(`SLUICE_PROPERTY_SCALE=${raw}: must be a number in (0, 1]`);
}

/** The fraction of the full budget this run does. */
const PROPERTY_SCALE = parsed;

/** How many of `runs` seeds to run under the current budget (at least one). */
export function propertyRuns(runs: number): number {
  return Math.max(1, Math.round(runs * PROPERTY_SCALE));
}

/** A "the traffic exercised this" floor of the full run, scaled to the current budget. */
export function scaledFloor(floor: number): number {
  return Math.floor(floor * PROPERTY_SCALE);
}
