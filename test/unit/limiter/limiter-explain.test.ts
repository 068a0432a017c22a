/**
 * `Limiter.explain` (issue 33, item 2): the dry run of a request gives the answer `decide` then
 * gives, from the same plan and statuses, and charges nothing; `now` is the same request checked
 * with 0 hits; the counter keys and matches are the ones `decide` counted.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createManualClock } from '../../../src/clock.js';
import { counterKey } from '../../../src/limiter/keys.js';
import { createLimiter } from '../../../src/limiter/limiter.js';
import { MAX_UINT32, type RateLimitRequest, type RateLimitRule } from '../../../src/model.js';
import type { CounterStore } from '../../../src/stores/counter-store.js';
import { createMemoryStore } from '../../../src/stores/memory/memory-store.js';
import { makeRule, snapshotOf } from '../../helpers/rules.js';

const twoLimits = makeRule({ fullKey: 'd.two', requestsPerUnit: 3 });
const RULES: Record<string, RateLimitRule> = {
  s: makeRule({ fullKey: 'd.s', requestsPerUnit: 3 }),
  fw: makeRule({ fullKey: 'd.fw', requestsPerUnit: 2, algorithm: 'fixed_window' }),
  tb: makeRule({ fullKey: 'd.tb', requestsPerUnit: 2, algorithm: 'token_bucket' }),
  q: makeRule({ fullKey: 'd.q', requestsPerUnit: 2, quotaMode: true }),
  h: makeRule({ fullKey: 'd.h', requestsPerUnit: 1, shadowMode: true }),
  hq: makeRule({ fullKey: 'd.hq', requestsPerUnit: 1, shadowMode: true, quotaMode: true }),
  u: makeRule({ fullKey: 'd.u', unlimited: true }),
  boss: makeRule({ fullKey: 'd.boss', requestsPerUnit: 5, name: 'boss', replaces: ['plain'] }),
  plain: makeRule({ fullKey: 'd.plain', requestsPerUnit: 1, name: 'plain' }),
  two: {
    ...twoLimits,
    limits: [
      twoLimits.limits[0]!,
      { ...twoLimits.limits[0]!, algorithm: 'sliding_log', windowMs: 1_000, requestsPerUnit: 1 },
    ],
  },
};
const snapshot = snapshotOf(RULES);

const descriptor = fc.record({
  key: fc.constantFrom(...Object.keys(RULES), 'none'),
  value: fc.constantFrom('a', 'b'),
  hits: fc.option(fc.nat(3), { nil: undefined }),
});
type Row = typeof descriptor extends fc.Arbitrary<infer T> ? T : never;
const steps = fc.array(
  fc.tuple(fc.array(descriptor, { minLength: 1, maxLength: 4 }), fc.nat(3), fc.nat(30_000)),
  { minLength: 1, maxLength: 10 },
);
const modes = fc.record({ shadowMode: fc.boolean(), quotaMode: fc.boolean() });

function requestOf(rows: readonly Row[], hitsAddend: number): RateLimitRequest {
  return {
    domain: 'd',
    descriptors: rows.map((row) => ({
      entries: [{ key: row.key, value: row.value }],
      limit: undefined,
      hitsAddend: row.hits,
    })),
    hitsAddend,
  };
}

/** The memory store seen through `apply` alone (as the Redis store is: no applyNow, no check). */
function applyOnly(store: CounterStore): CounterStore {
  return {
    apply: (specs) => store.apply(specs),
    size: () => store.size(),
    healthy: () => store.healthy(),
    close: () => store.close(),
  };
}

describe('Limiter.explain', () => {
  it('answers as decide() then does, from the counters as they are, charging nothing', async () => {
    await fc.assert(
      fc.asyncProperty(modes, steps, async (mode, walk) => {
        const clock = createManualClock();
        const store = createMemoryStore({ clock: clock.now });
        const limiter = createLimiter({ store, ...mode });
        for (const [rows, hitsAddend, wait] of walk) {
          const request = requestOf(rows, hitsAddend);
          const idle = {
            ...request,
            descriptors: request.descriptors.map((d) => ({ ...d, hitsAddend: 0 })),
          };
          const explained = await limiter.explain(snapshot, request);
          // Twice: the first changed nothing.
          expect(await limiter.explain(snapshot, request)).toEqual(explained);
          expect(explained.snapshot).toBe(snapshot);
          const checked = await limiter.decide(snapshot, idle);
          expect(explained.now.statuses.map((s) => s.limitRemaining)).toEqual(
            checked.statuses.map((s) => s.limitRemaining),
          );
          expect(explained.now.statuses.map((s) => s.code)).toEqual(
            checked.statuses.map((s) => s.code),
          );
          const decided = await limiter.decide(snapshot, request);
          expect(explained.response).toEqual(decided);
          request.descriptors.forEach((d, i) => {
            const status = decided.statuses[i]!;
            const match = explained.matches[i];
            // The counted rule; else an unlimited one, or none (no rule, or replaced).
            if (status.rule !== undefined) expect(match?.rule).toBe(status.rule);
            else expect(match?.rule.unlimited ?? false).toBe(status.limitRemaining === MAX_UINT32);
            const keys =
              match === undefined || status.rule === undefined
                ? []
                : match.rule.limits.map((l) =>
                    counterKey('d', d.entries, match, l.windowMs, l.algorithm),
                  );
            expect(explained.counterKeys[i]).toEqual(keys);
          });
          clock.advance(wait);
        }
      }),
      { seed: 33, numRuns: 150 },
    );
  });

  it('decides as decide() does on a store that only applies (a 0-hit peek)', async () => {
    await fc.assert(
      fc.asyncProperty(modes, steps, async (mode, walk) => {
        const clock = createManualClock();
        const store = applyOnly(createMemoryStore({ clock: clock.now }));
        const limiter = createLimiter({ store, ...mode });
        expect(limiter.decideNow).toBeUndefined();
        for (const [rows, hitsAddend, wait] of walk) {
          const request = requestOf(rows, hitsAddend);
          const explained = await limiter.explain(snapshot, request);
          const decided = await limiter.decide(snapshot, request);
          expect(explained.response.overallCode).toBe(decided.overallCode);
          expect(explained.response.rejected).toBe(decided.rejected);
          expect(explained.response.statuses.map((s) => [s.code, s.limitRemaining])).toEqual(
            decided.statuses.map((s) => [s.code, s.limitRemaining]),
          );
          clock.advance(wait);
        }
      }),
      { seed: 33, numRuns: 150 },
    );
  });
});
