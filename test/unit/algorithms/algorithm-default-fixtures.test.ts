/**
 * Every reference-format rule file in the repo (test/fixtures/config/valid and the bundled
 * envoy/ratelimit) still loads, with `DEFAULT_ALGORITHM` unset and set to `fixed_window`, with
 * the same rules; the default only picks the algorithm (docs/configuration.md). With
 * `fixed_window` a reference file gives the reference's numbers (docs/semantics.md §4).
 */
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { loadSnapshot } from '../../../src/config/load.js';
import { createLimiter } from '../../../src/limiter/limiter.js';
import { UNIT_MS, type RequestDescriptor } from '../../../src/model.js';
import { loadSettings } from '../../../src/settings.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
const FIXTURES = [
  path.join(ROOT, 'test/fixtures/config/valid'),
  path.join(ROOT, 'envoy/ratelimit'),
];

function descriptor(entries: Record<string, string>): RequestDescriptor {
  return {
    entries: Object.entries(entries).map(([key, value]) => ({ key, value })),
    limit: undefined,
    hitsAddend: undefined,
  };
}

/** A limited descriptor of each fixture (domain, entries, unit, requests_per_unit). */
const SAMPLES = [
  { domain: 'edge', entries: { remote_address: '192.0.2.1' }, unit: 'second', limit: 10 },
  { domain: 'messaging', entries: { to_number: '123' }, unit: 'day', limit: 100 },
  { domain: 'internal', entries: { azure: 'x' }, unit: 'minute', limit: 100 },
] as const;

const open: CounterStore[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((store) => store.close()));
});

describe('reference-format fixtures under DEFAULT_ALGORITHM', () => {
  for (const dir of FIXTURES) {
    it(`${path.relative(ROOT, dir)} loads unset and =fixed_window, with the same rules`, async () => {
      const unset = loadSettings({}).defaultAlgorithm;
      const fixed = loadSettings({ DEFAULT_ALGORITHM: 'fixed_window' }).defaultAlgorithm;
      expect(unset).toBe('sliding_window');
      expect(fixed).toBe('fixed_window');
      const a = await loadSnapshot([dir], { defaultAlgorithm: unset });
      const b = await loadSnapshot([dir], { defaultAlgorithm: fixed });
      expect(a.domains.size).toBeGreaterThan(0);
      expect([...b.domains.keys()]).toEqual([...a.domains.keys()]);
      expect(b.dump()).toEqual(a.dump());
      expect(a.files).toEqual(b.files);
    });
  }

  it('limits that name no algorithm take the default; window = unit, multiplier 1', async () => {
    for (const algorithm of ['sliding_window', 'fixed_window'] as const) {
      const snapshot = await loadSnapshot([FIXTURES[0]!], { defaultAlgorithm: algorithm });
      for (const sample of SAMPLES) {
        const match = snapshot.getLimit(sample.domain, descriptor(sample.entries));
        expect(match, `${sample.domain} ${JSON.stringify(sample.entries)}`).toBeDefined();
        const limits = match!.rule.limits;
        expect(limits).toHaveLength(1);
        expect(limits[0]).toMatchObject({
          algorithm,
          unit: sample.unit,
          unitMultiplier: 1,
          windowMs: UNIT_MS[sample.unit],
          requestsPerUnit: sample.limit,
        });
      }
    }
  });

  it('with fixed_window a reference file answers the reference numbers (100 per DAY at 2222 s)', async () => {
    const snapshot = await loadSnapshot([FIXTURES[0]!], { defaultAlgorithm: 'fixed_window' });
    const clock = createManualClock(2222_000);
    const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
    open.push(store);
    const limiter = createLimiter({ store, shadowMode: false });
    const response = await limiter.decide(snapshot, {
      domain: 'messaging',
      descriptors: [descriptor({ to_number: '123' })],
      hitsAddend: 0,
    });
    expect(response.overallCode).toBe('OK');
    expect(response.statuses[0]).toMatchObject({
      code: 'OK',
      limitRemaining: 99,
      durationUntilResetMs: (86_400 - 2222) * 1000,
    });
  });
});
