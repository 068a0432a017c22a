/**
 * Rolling upgrades on one Redis (README, "Upgrading: the Redis data layout"): during a deploy, old
 * replicas (layout 1, test/fixtures/apply-script-v1.ts, keys `prefix{tag}COUNTER_KEY`) and new
 * ones (layout 2, keys `prefix{tag}v2|COUNTER_KEY`) share one Redis. Each must go on counting its
 * own counters exactly, with no error and no write into the other's keys: a mixed fleet counts
 * apart until the old replicas are gone (at most one window later, every old key has expired).
 *
 * Calls that carry several requests (issue 30) kept layout 2: the previous release's script
 * (test/fixtures/apply-script-v2-per-request.ts, one request per call) and the current store
 * share each counter and count it together exactly, so that deploy needs no key change.
 */
import { describe, expect, it } from 'vitest';
import { ALGORITHMS, type Algorithm } from '../../src/algorithms/index.js';
import { createManualClock } from '../../src/clock.js';
import type { CounterSpec } from '../../src/stores/counter-store.js';
import { ALGORITHM_CODES } from '../../src/stores/redis/apply-script.js';
import { hashTagOf, redisKeyOf } from '../../src/stores/redis/keys.js';
import { APPLY_SCRIPT as APPLY_SCRIPT_V1 } from '../fixtures/apply-script-v1.js';
import { APPLY_SCRIPT_V2_PER_REQUEST } from '../fixtures/apply-script-v2-per-request.js';
import { useSharedRedis } from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

/** A minute boundary, so fixed windows start at T0. */
const T0 = 1_699_999_980_000;
const MINUTE = 60_000;
const LIMIT = 5;
/** Layout 1's algorithm codes (its own `ALGORITHM_CODES`). */
const V1_CODES: Record<Algorithm, number> = {
  sliding_window: 1,
  fixed_window: 2,
  token_bucket: 3,
  sliding_log: 4,
};

const redis = useSharedRedis('redis layout upgrade');

/** A replica still on layout 1: its script, its key names, the time of `now()`. */
function oldReplica(prefix: string, now: () => number) {
  const client = redis.client();
  client.defineCommand('applyV1', { lua: APPLY_SCRIPT_V1 });
  const call = client as unknown as { applyV1(...args: (string | number)[]): Promise<number[]> };
  return {
    keyOf: (key: string) => `${prefix}{${hashTagOf(key)}}${key}`,
    /** One request of one spec; its `[overLimit, remaining]`. */
    async apply(spec: CounterSpec): Promise<[boolean, number]> {
      const reply = await call.applyV1(
        1,
        this.keyOf(spec.key),
        Math.floor(now()),
        '0',
        3_600_000,
        V1_CODES[spec.algorithm],
        spec.limit,
        spec.windowMs,
        spec.burst,
        spec.hits,
        'e',
      );
      return [reply[1] === 1, reply[2]!];
    },
  };
}

const spec = specBuilder({ limit: LIMIT, windowMs: MINUTE });

describe.skipIf(redis.requirement.skip)('redis layout: old and new replicas on one Redis', () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: each layout counts its own counter exactly; neither reads or writes the other's`, async () => {
      const clock = createManualClock(T0);
      const { store, prefix } = await redis.openStore('up', {
        clock: clock.now,
        scriptClock: clock.now,
      });
      const old = oldReplica(prefix, clock.now);
      const counter = spec(`${algorithm}|60000|edge|user=a`, 1, LIMIT, { algorithm });

      // The old replica has counted 3 hits when the new one starts.
      for (let i = 0; i < 3; i++) await old.apply(counter);
      const oldKey = old.keyOf(counter.key);
      const oldBefore = await redis.admin.dump(oldKey);
      expect(oldBefore).not.toBeNull();

      // The new replica counts from zero on its own key, never failing on the old one's type.
      const fresh = await store.apply([counter]);
      expect(fresh.admitted).toBe(true);
      expect(fresh.results[0]!.remaining).toBe(LIMIT - 1);
      const newKey = redisKeyOf(prefix, counter.key);
      expect(newKey).not.toBe(oldKey);
      expect(await redis.admin.dump(oldKey)).toEqual(oldBefore);

      // Interleaved: each side goes on exactly from its own count.
      clock.advance(1_000);
      expect(await old.apply(counter)).toEqual([false, LIMIT - 4]);
      expect((await store.apply([counter])).results[0]!.remaining).toBe(LIMIT - 2);
      expect(await old.apply(counter)).toEqual([false, 0]);
      expect((await old.apply(counter))[0]).toBe(true);
      for (let i = 0; i < 3; i++) expect((await store.apply([counter])).admitted).toBe(true);
      const full = await store.apply([counter]);
      expect(full.admitted).toBe(false);
      expect(full.results[0]!.remaining).toBe(0);

      expect((await redis.admin.keys(`${prefix}*`)).sort()).toEqual([oldKey, newKey].sort());
    });
  }
});

/** A replica of the previous release: layout 2 keys, one request per script call. */
function perRequestReplica(prefix: string, now: () => number) {
  const client = redis.client();
  client.defineCommand('applyV2', { lua: APPLY_SCRIPT_V2_PER_REQUEST });
  const call = client as unknown as { applyV2(...args: (string | number)[]): Promise<number[]> };
  return {
    /** One request of one spec; its `[admitted, remaining]`. */
    async apply(spec: CounterSpec): Promise<[boolean, number]> {
      const reply = await call.applyV2(
        1,
        redisKeyOf(prefix, spec.key),
        Math.floor(now()),
        '0',
        3_600_000,
        ALGORITHM_CODES[spec.algorithm],
        spec.limit,
        spec.windowMs,
        spec.burst,
        spec.hits,
        'e',
      );
      return [reply[0] === 1, reply[2]!];
    },
  };
}

describe.skipIf(redis.requirement.skip)(
  'redis layout 2: one request per call and many per call',
  () => {
    for (const algorithm of ALGORITHMS) {
      it(`${algorithm}: the previous release and the current store count one counter together`, async () => {
        const clock = createManualClock(T0);
        const { store, prefix } = await redis.openStore('up2', {
          clock: clock.now,
          scriptClock: clock.now,
        });
        const previous = perRequestReplica(prefix, clock.now);
        const limit = 10;
        // 3 s: a new sliding-window sub-bucket each step, all in one fixed window; a token
        // bucket refills with time, so its clock stays.
        const step = algorithm === 'token_bucket' ? 0 : 3_000;
        const counter = spec(`${algorithm}|60000|edge|user=a`, 1, limit, { algorithm });

        // 2 hits from the previous release, then a turn of 3 concurrent requests on the current
        // store (one call), then alternating: one count, down to the limit.
        expect(await previous.apply(counter)).toEqual([true, limit - 1]);
        clock.advance(step);
        expect(await previous.apply(counter)).toEqual([true, limit - 2]);
        clock.advance(step);
        const turn = await Promise.all([0, 1, 2].map(() => store.apply([counter])));
        expect(turn.map((batch) => batch.results[0]!.remaining)).toEqual([
          limit - 3,
          limit - 4,
          limit - 5,
        ]);
        for (let used = 6; used <= limit; used++) {
          clock.advance(step);
          const remaining =
            used % 2 === 0
              ? (await previous.apply(counter))[1]
              : (await store.apply([counter])).results[0]!.remaining;
          expect(remaining, `hit ${used}`).toBe(limit - used);
        }
        // Full for both.
        expect((await previous.apply(counter))[0]).toBe(false);
        expect((await store.apply([counter])).admitted).toBe(false);
        expect(await redis.admin.keys(`${prefix}*`)).toEqual([redisKeyOf(prefix, counter.key)]);
      });
    }
  },
);
