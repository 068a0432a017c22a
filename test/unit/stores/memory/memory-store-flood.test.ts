/**
 * Issue 22, item 5: no flood of new keys, sent once, twice or N times, makes the memory store
 * forget a counter that is still limiting someone. Scaled down from the attack (2.2M junk
 * keys sent twice against the default cap) to a cap of 1,000 and 20,000 junk keys, on a frozen
 * clock so nothing expires: the rejected client stays rejected for the rest of its window.
 */
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../../src/clock.js';
import { createMemoryStore } from '../../../../src/stores/memory/memory-store.js';
import { createStore } from '../../../../src/stores/index.js';
import { createMetrics } from '../../../../src/metrics/metrics.js';
import { loadSettings } from '../../../../src/settings.js';
import { capturingLogger } from '../../../helpers/app.js';
import { specBuilder } from '../../../helpers/specs.js';

const CAP = 1_000;
const JUNK = 20_000;

const spec = specBuilder({ limit: 5 });

function setup() {
  const clock = createManualClock(1_700_000_000_000);
  const evictions = { expired: 0, lru: 0 };
  let notStored = 0;
  const store = createMemoryStore({
    clock: clock.now,
    maxKeys: CAP,
    sweepIntervalMs: 0,
    onEvict: (reason, count) => (evictions[reason] += count),
    onNotStored: (count) => (notStored += count),
  });
  const admitted = (key: string, limit = 5): boolean =>
    store.applyNow!([spec(key, 1, limit)]).admitted;
  return { clock, store, admitted, evictions, notStored: () => notStored };
}

describe('a key flood cannot reset a counter that is limiting someone', () => {
  for (const times of [1, 2, 3, 10]) {
    it(`junk keys sent ${times} time(s) each`, async () => {
      const { clock, store, admitted, evictions, notStored } = setup();
      for (let k = 0; k < 5; k++) expect(admitted('victim')).toBe(true);
      expect(admitted('victim')).toBe(false);
      // Junk sent more often than the limit is limiting itself, so the map fills with counters
      // that may not be evicted and every new key costs a bounded scan: fewer keys suffice.
      const junk = times > 5 ? 3 * CAP : JUNK;
      for (let i = 0; i < junk; i++) {
        for (let t = 0; t < times; t++) admitted(`junk-${i}`);
        // The victim keeps trying now and then (and is rejected each time).
        if (i % 997 === 0) expect(admitted('victim')).toBe(false);
      }
      expect(store.size()).toBeLessThanOrEqual(CAP);
      // Junk sent more often than the limit is limiting too: then new junk is not stored.
      expect(evictions.lru + notStored()).toBeGreaterThan(0);
      clock.advance(30_000);
      // Still within the minute: still rejected.
      expect(admitted('victim')).toBe(false);
      await store.close();
    });
  }

  it('the victim not retrying during the flood is not forgotten either', async () => {
    const { store, admitted } = setup();
    for (let k = 0; k < 5; k++) admitted('victim');
    expect(admitted('victim')).toBe(false);
    for (let i = 0; i < JUNK; i++) {
      admitted(`junk-${i}`);
      admitted(`junk-${i}`);
    }
    expect(admitted('victim')).toBe(false);
    await store.close();
  });

  it('when every counter is limiting, new keys are decided without being stored, and counted', async () => {
    const { store, admitted, notStored, evictions } = setup();
    for (let k = 0; k < 5; k++) admitted('victim');
    // Junk keys on a limit of 1: each is at its limit after one hit, so none may be evicted.
    for (let i = 0; i < CAP * 2; i++) expect(admitted(`junk-${i}`, 1)).toBe(true);
    expect(store.size()).toBeLessThanOrEqual(CAP);
    expect(notStored()).toBeGreaterThan(0);
    expect(evictions.lru).toBe(0);
    expect(admitted('victim')).toBe(false);
    // The stored junk counters are still limiting.
    expect(admitted('junk-0', 1)).toBe(false);
    await store.close();
  });
});

describe('the memory store as the app creates it: keys not stored are counted and warned about', () => {
  it('counts every key not stored in the metric and warns at most once a minute', async () => {
    const clock = createManualClock(1_700_000_000_000);
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const { logger, lines } = capturingLogger();
    const store = await createStore(loadSettings({ MEMORY_MAX_KEYS: '64' }), {
      clock: clock.now,
      logger,
      metrics: metrics.store,
    });
    const limited = (key: string) => store.applyNow!([spec(key, 1, 1)]).admitted;
    for (let i = 0; i < 64; i++) expect(limited(`full-${i}`)).toBe(true);
    for (let i = 0; i < 10; i++) expect(limited(`new-${i}`)).toBe(true);
    const warnings = () => lines.filter((l) => String(l.msg).startsWith('new counters not stored'));
    expect(warnings()).toEqual([
      expect.objectContaining({ level: 40, count: 1, maxKeys: 64, module: 'memory-store' }),
    ]);
    clock.advance(59_999);
    limited('later-0');
    expect(warnings()).toHaveLength(1);
    clock.advance(1);
    limited('later-1');
    // The count since the last warning: 9 + 1 + 1.
    expect(warnings()[1]).toMatchObject({ count: 11 });
    expect(await metrics.render()).toContain('sluice_store_keys_not_stored_total 12\n');
    await store.close();
  });
});

describe('a counter is limiting when any spec on its key is', () => {
  it('a later duplicate in the batch left without room protects the counter', () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, maxKeys: 8, sweepIntervalMs: 0 });
    // One counter, two limits on it: 10 has room after 2 hits, 2 has none.
    expect(store.applyNow!([spec('k', 1, 10), spec('k', 1, 2)]).admitted).toBe(true);
    for (let i = 0; i < 200; i++) {
      store.applyNow!([spec(`junk-${i}`)]);
      store.applyNow!([spec(`junk-${i}`)]);
    }
    expect(store.applyNow!([spec('k', 1, 2)]).admitted).toBe(false);
  });

  it('the first spec left without room protects it too, whatever the later ones', () => {
    const clock = createManualClock(1_700_000_000_000);
    const store = createMemoryStore({ clock: clock.now, maxKeys: 8, sweepIntervalMs: 0 });
    expect(store.applyNow!([spec('k', 1, 2), spec('k', 1, 10)]).admitted).toBe(true);
    for (let i = 0; i < 200; i++) {
      store.applyNow!([spec(`junk-${i}`)]);
      store.applyNow!([spec(`junk-${i}`)]);
    }
    expect(store.applyNow!([spec('k', 1, 2)]).admitted).toBe(false);
  });
});
