/**
 * The failure policy (`STORE_FAILURE_MODE`, docs/configuration.md): what a call answers when the
 * remote store fails or is known to be down.
 *
 * - `error` (default): the call fails with STORE_UNAVAILABLE (gRPC UNAVAILABLE) at once, so
 *   Envoy's `failure_mode_deny` decides;
 * - `allow`: the call is admitted, every counter reported with its full limit remaining;
 * - `memory`: the call is decided by an in-memory store with the same rules until the remote store
 *   is back (its counts start empty and are per replica).
 *
 * Every call answered by the policy is counted (`sluice_store_fallback_total{policy}`).
 */
import { SluiceError } from '../errors.js';
import type { StoreMetricsSink } from '../metrics/metrics.js';
import type { BatchResult, CounterSpec, CounterStore } from './counter-store.js';

/** What a call answers when the Redis store fails (`STORE_FAILURE_MODE`). */
export type StoreFailureMode = 'error' | 'allow' | 'memory';

/** Options for {@link withFailurePolicy}. */
export interface FailurePolicyOptions {
  /** The remote store whose failures the policy handles. */
  readonly store: CounterStore;
  /** What a failed call answers. */
  readonly mode: StoreFailureMode;
  /** The in-memory store for `memory` (required then, ignored otherwise; closed with this one). */
  readonly fallback?: CounterStore;
  /** Where answers given by the policy are counted; `undefined`: not counted. */
  readonly metrics?: StoreMetricsSink;
}

/**
 * Wrap `store` so that its failures get the policy's answer. `healthy()` is the remote store's
 * health with `error` (a replica that can only fail should leave the load balancer), and always
 * true with `allow` and `memory` (the replica still answers).
 */
export function withFailurePolicy(options: FailurePolicyOptions): CounterStore {
  const { store, mode, metrics } = options;
  const fallback = options.fallback;
  if (mode === 'memory' && fallback === undefined) {
    throw new SluiceError('INTERNAL', 'STORE_FAILURE_MODE=memory needs a fallback store');
  }

  const answer = (specs: readonly CounterSpec[], error: SluiceError): Promise<BatchResult> => {
    switch (mode) {
      case 'error':
        metrics?.fallback('error');
        return Promise.reject(error);
      case 'allow':
        metrics?.fallback('allow');
        return Promise.resolve({
          admitted: true,
          results: specs.map((spec) => ({
            overLimit: false,
            remaining: spec.limit,
            resetMs: 0,
          })),
        });
      case 'memory':
        metrics?.fallback('memory');
        return fallback!.apply(specs);
    }
  };

  return {
    async apply(specs) {
      try {
        return await store.apply(specs);
      } catch (error) {
        const failure = SluiceError.from(error);
        if (failure.code !== 'STORE_UNAVAILABLE') throw failure;
        return answer(specs, failure);
      }
    },
    size: () => store.size() + (fallback?.size() ?? 0),
    healthy: () => (mode === 'error' ? store.healthy() : true),
    async close() {
      await Promise.all([store.close(), fallback?.close()]);
    },
    top: fallback?.top === undefined ? undefined : (n) => fallback.top!(n),
  };
}
