/**
 * Regression tests for what the absurd-request fuzzing found: with MAX_DESCRIPTORS_PER_REQUEST
 * raised to its maximum (100,000), one request of tens of thousands of distinct descriptors took
 * minutes, because a store looked for earlier specs with the same key by scanning every earlier
 * spec (quadratic in the batch). The work is counted, not timed: the specs array is wrapped so
 * every read of an element is counted, and a batch of n specs may read at most a small multiple
 * of n. Repeated keys are still counted cumulatively, in order (docs/semantics.md §3).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import type { CounterSpec, CounterStore } from '../../src/stores/counter-store.js';
import { createStore } from '../../src/stores/index.js';
import { useProcessGroup } from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const N = 4_000;

/** `specs` behind a proxy that counts reads of its elements. */
function counted(specs: CounterSpec[]): { specs: CounterSpec[]; reads: () => number } {
  let reads = 0;
  const proxy = new Proxy(specs, {
    get(target, property, receiver) {
      if (typeof property === 'string' && /^\d+$/.test(property)) reads++;
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
  return { specs: proxy, reads: () => reads };
}

const spec = specBuilder({ algorithm: 'fixed_window', limit: 1_000, windowMs: 3_600_000 });

/** The checks every store must pass. */
function batchChecks(store: () => CounterStore, prefix: () => string): void {
  it(`charges a batch of ${N} distinct keys reading each spec a bounded number of times`, async () => {
    const batch = counted(Array.from({ length: N }, (_, i) => spec(`${prefix()}d${i}`)));
    const result = await store().apply(batch.specs);
    expect(result.admitted).toBe(true);
    expect(result.results).toHaveLength(N);
    expect(result.results.every((r) => r.remaining === 999)).toBe(true);
    // A quadratic scan reads about N^2 / 2 = 8,000,000 elements.
    expect(batch.reads()).toBeLessThanOrEqual(20 * N);
  });

  it('still counts repeated keys of one batch cumulatively, in order', async () => {
    const key = `${prefix()}same`;
    const other = `${prefix()}other`;
    const result = await store().apply([spec(key, 2, 5), spec(other, 1, 5), spec(key, 3, 5)]);
    expect(result.admitted).toBe(true);
    expect(result.results.map((r) => r.remaining)).toEqual([0, 4, 0]);
    const over = await store().apply([spec(key, 1, 5), spec(other, 1, 5)]);
    expect(over.admitted).toBe(false);
    expect(over.results[0]!.overLimit).toBe(true);
    const repeated = counted([
      ...Array.from({ length: N }, () => spec(`${prefix()}many`, 0, 5)),
      spec(`${prefix()}many`, 1, 5),
    ]);
    const last = await store().apply(repeated.specs);
    expect(last.results[N]!.remaining).toBe(4);
    expect(repeated.reads()).toBeLessThanOrEqual(20 * (N + 1));
  });
}

describe('memory store: large batches', () => {
  const clock = createManualClock();
  let store: CounterStore | undefined;
  const get = (): CounterStore => store!;
  afterAll(async () => store?.close());

  it('is created from settings', async () => {
    store = await createStore(loadSettings({ MAX_DESCRIPTORS_PER_REQUEST: '100000' }), {
      clock: clock.now,
      logger: silentLogger(),
    });
  });
  batchChecks(get, () => 'm:');
});

const redis = requireRedis('large batches on the redis store');

describe.skipIf(redis.skip)('redis store with the local cache: large batches', () => {
  const group = useProcessGroup();
  let store: CounterStore | undefined;
  const prefix = `lb-${randomUUID()}:`;
  afterAll(async () => store?.close());

  it('is created from settings', async () => {
    const server = await startRedis(group);
    store = await createStore(
      loadSettings({
        REDIS_URL: server.address,
        REDIS_SOCKET_TYPE: 'tcp',
        LOCAL_CACHE_SIZE_IN_BYTES: '1048576',
        MAX_DESCRIPTORS_PER_REQUEST: '100000',
        REDIS_WAIT_AT_START: 'true',
      }),
      { clock: Date.now, logger: silentLogger() },
    );
  });
  batchChecks(
    () => store!,
    () => prefix,
  );
});
