/**
 * The limiter: turns one request into at most one batched store call and a decision value.
 * It resolves rules (via the config snapshot), applies `replaces`, `unlimited` and shadow mode,
 * and builds one status per descriptor (SPEC §3).
 */
import type { ConfigSnapshot, LimitMatch } from '../config/types.js';
import {
  MAX_UINT32,
  type DescriptorStatus,
  type RateLimitRequest,
  type RateLimitResponse,
  type RequestDescriptor,
} from '../model.js';
import type { CounterSpec, CounterStore } from '../stores/counter-store.js';
import { counterKey } from './keys.js';

/** Options for {@link createLimiter}. */
export interface LimiterOptions {
  /** Where hits are counted. */
  readonly store: CounterStore;
  /** Global `SHADOW_MODE`: the overall code is always OK; statuses keep their real codes. */
  readonly shadowMode: boolean;
}

/** Decides requests against a config snapshot. */
export interface Limiter {
  /**
   * Decide one request. Rejects only when the store fails (SluiceError STORE_UNAVAILABLE); an
   * over-limit answer is a value.
   */
  decide(snapshot: ConfigSnapshot, request: RateLimitRequest): Promise<RateLimitResponse>;
}

const NO_RULE: DescriptorStatus = Object.freeze({
  code: 'OK',
  currentLimit: undefined,
  limitRemaining: 0,
  durationUntilResetMs: undefined,
});

const UNLIMITED: DescriptorStatus = Object.freeze({
  code: 'OK',
  currentLimit: undefined,
  limitRemaining: MAX_UINT32,
  durationUntilResetMs: undefined,
});

const NO_HEADERS: readonly never[] = Object.freeze([]);

/** Hits a descriptor adds: its own `hits_addend` when present, else max(1, request's). */
export function hitsFor(descriptor: RequestDescriptor, requestHits: number): number {
  return descriptor.hitsAddend ?? Math.max(1, requestHits);
}

/** Create a limiter over `options.store`. */
export function createLimiter(options: LimiterOptions): Limiter {
  const { store, shadowMode } = options;

  return {
    async decide(snapshot, request) {
      const { domain, descriptors } = request;
      const count = descriptors.length;
      const matches: (LimitMatch | undefined)[] = new Array<LimitMatch | undefined>(count);
      let replaced: Set<string> | undefined;

      for (let i = 0; i < count; i++) {
        const match = snapshot.getLimit(domain, descriptors[i]!);
        matches[i] = match;
        if (match !== undefined && match.rule.replaces.length > 0) {
          replaced ??= new Set<string>();
          for (const name of match.rule.replaces) replaced.add(name);
        }
      }

      // specOf[i] is the index into `specs` of descriptor i's counter, -1 when it is not counted.
      const specOf = new Int32Array(count).fill(-1);
      const specs: CounterSpec[] = [];
      for (let i = 0; i < count; i++) {
        const match = matches[i];
        if (match === undefined) continue;
        const rule = match.rule;
        if (rule.unlimited) continue;
        // A replaced rule is dropped as if nothing matched (the reference's behaviour).
        if (replaced !== undefined && rule.name !== '' && replaced.has(rule.name)) {
          matches[i] = undefined;
          continue;
        }
        const descriptor = descriptors[i]!;
        specOf[i] = specs.length;
        specs.push({
          key: counterKey(domain, descriptor.entries, match, rule.windowMs),
          algorithm: rule.algorithm,
          limit: rule.requestsPerUnit,
          windowMs: rule.windowMs,
          hits: hitsFor(descriptor, request.hitsAddend),
          enforced: !rule.shadowMode,
        });
      }

      const batch = specs.length > 0 ? await store.apply(specs) : undefined;

      let overLimit = false;
      const statuses = new Array<DescriptorStatus>(count);
      for (let i = 0; i < count; i++) {
        const match = matches[i];
        const at = specOf[i]!;
        if (match === undefined) {
          statuses[i] = NO_RULE;
        } else if (at < 0) {
          statuses[i] = UNLIMITED;
        } else {
          const rule = match.rule;
          const result = batch!.results[at]!;
          const over = result.overLimit && !rule.shadowMode;
          if (over) overLimit = true;
          statuses[i] = {
            code: over ? 'OVER_LIMIT' : 'OK',
            currentLimit: {
              requestsPerUnit: rule.requestsPerUnit,
              unit: rule.unit,
              name: rule.name,
            },
            limitRemaining: result.overLimit ? 0 : result.remaining,
            durationUntilResetMs: result.resetMs,
          };
        }
      }

      return {
        overallCode: overLimit && !shadowMode ? 'OVER_LIMIT' : 'OK',
        statuses,
        responseHeadersToAdd: NO_HEADERS,
      };
    },
  };
}
