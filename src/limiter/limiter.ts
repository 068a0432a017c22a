/**
 * The limiter: turns one request into at most one batched store call and a decision value.
 * It resolves rules (via the config snapshot), applies `replaces`, `unlimited`, shadow and quota
 * mode, and builds one status per descriptor (docs/semantics.md §3 and §5). The admission
 * decision itself is the store's (`BatchResult.admitted`); the limiter only reports it.
 */
import type { ConfigSnapshot, LimitMatch, RateLimitRule } from '../config/types.js';
import {
  MAX_UINT32,
  type DescriptorStatus,
  type JsonValue,
  type RateLimitRequest,
  type RateLimitResponse,
  type RequestDescriptor,
} from '../model.js';
import { SluiceError } from '../errors.js';
import type {
  BatchResult,
  CounterMode,
  CounterResult,
  CounterSpec,
  CounterStore,
} from '../stores/counter-store.js';
import { counterKey } from './keys.js';

/** Options for {@link createLimiter}. */
export interface LimiterOptions {
  /** Where hits are counted. */
  readonly store: CounterStore;
  /** Global `SHADOW_MODE`: the overall code is always OK; statuses keep their real codes. */
  readonly shadowMode: boolean;
  /** Global `QUOTA_MODE`: every rule that is not in shadow mode counts as `quota_mode`. */
  readonly quotaMode?: boolean;
  /** `RESPONSE_DYNAMIC_METADATA`: add the reference's `dynamic_metadata` to every answer. */
  readonly responseDynamicMetadata?: boolean;
}

/** Decides requests against a config snapshot. */
export interface Limiter {
  /**
   * Decide one request. Rejects only when the store fails (SluiceError STORE_UNAVAILABLE); an
   * over-limit answer is a value.
   */
  decide(snapshot: ConfigSnapshot, request: RateLimitRequest): Promise<RateLimitResponse>;
  /**
   * The same decision, returned synchronously; present only when the store decides
   * synchronously (`CounterStore.applyNow`, the memory store), so a caller answers without
   * waiting for a promise.
   */
  readonly decideNow?: (snapshot: ConfigSnapshot, request: RateLimitRequest) => RateLimitResponse;
}

const NO_RULE: DescriptorStatus = Object.freeze({
  code: 'OK',
  currentLimit: undefined,
  limitRemaining: 0,
  durationUntilResetMs: undefined,
  rule: undefined,
  hits: 0,
  overLimit: false,
});

const UNLIMITED: DescriptorStatus = Object.freeze({
  code: 'OK',
  currentLimit: undefined,
  limitRemaining: MAX_UINT32,
  durationUntilResetMs: undefined,
  rule: undefined,
  hits: 0,
  overLimit: false,
});

const NO_HEADERS: readonly never[] = Object.freeze([]);

/**
 * Hits a descriptor adds: its own `hits_addend` when present, else max(1, request's), at most
 * {@link MAX_UINT32} (docs/semantics.md, "Hits"). The bound is the reference's request type
 * (`hits_addend` is a uint32 on the request, and a limit is a uint32): a larger per-descriptor
 * value (a UInt64Value on the wire, up to 2^53 over `/json`) is already more than any limit but
 * the largest admits, and keeping every charge a whole number far below 2^53 keeps every total
 * exact, so small charges are never lost to rounding and no total goes negative.
 */
export function hitsFor(descriptor: RequestDescriptor, requestHits: number): number {
  return Math.min(descriptor.hitsAddend ?? Math.max(1, requestHits), MAX_UINT32);
}

/** How a rule's counters take part in admission: shadow wins over quota (as in the reference). */
function modeOf(rule: RateLimitRule, globalQuota: boolean): CounterMode {
  if (rule.shadowMode) return 'shadow';
  return rule.quotaMode || globalQuota ? 'quota' : 'enforced';
}

/**
 * Which of a rule's limits a status reports (docs/semantics.md §5): the over-limit one with the
 * longest wait, else the one with the least remaining (the first on a tie). `results` holds the
 * rule's `count` results from `start`.
 */
function reportedLimit(results: readonly CounterResult[], start: number, count: number): number {
  let best = start;
  for (let k = start + 1; k < start + count; k++) {
    const candidate = results[k]!;
    const current = results[best]!;
    if (candidate.overLimit !== current.overLimit) {
      if (candidate.overLimit) best = k;
    } else if (candidate.overLimit) {
      if (candidate.resetMs > current.resetMs) best = k;
    } else if (candidate.remaining < current.remaining) {
      best = k;
    }
  }
  return best;
}

/** Create a limiter over `options.store`. */
export function createLimiter(options: LimiterOptions): Limiter {
  const { store, shadowMode } = options;
  const globalQuota = options.quotaMode === true;
  const withMetadata = options.responseDynamicMetadata === true;

  /** What one request asks the store: its matched rules and its counters. */
  interface Plan {
    readonly request: RateLimitRequest;
    readonly matches: (LimitMatch | undefined)[];
    /** Index into `specs` of descriptor i's first counter (one per limit), -1 when not counted. */
    readonly specOf: number[];
    readonly specs: CounterSpec[];
  }

  const plan = (snapshot: ConfigSnapshot, request: RateLimitRequest): Plan => {
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

    // A plain array: a typed array costs an ArrayBuffer per request.
    const specOf = new Array<number>(count).fill(-1);
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
      const hits = hitsFor(descriptor, request.hitsAddend);
      const mode = modeOf(rule, globalQuota);
      specOf[i] = specs.length;
      const limits = rule.limits;
      for (let l = 0; l < limits.length; l++) {
        const limit = limits[l]!;
        specs.push({
          key: counterKey(domain, descriptor.entries, match, limit.windowMs, limit.algorithm),
          algorithm: limit.algorithm,
          limit: limit.requestsPerUnit,
          windowMs: limit.windowMs,
          burst: limit.burst,
          hits,
          mode,
        });
      }
    }
    return { request, matches, specOf, specs };
  };

  const finish = (
    { request, matches, specOf, specs }: Plan,
    batch: BatchResult | undefined,
  ): RateLimitResponse => {
    const count = matches.length;
    // The store decided admission; statuses only report it.
    const overLimit = batch !== undefined && !batch.admitted;
    let violations: number[] | undefined;
    const statuses = new Array<DescriptorStatus>(count);
    for (let i = 0; i < count; i++) {
      const match = matches[i];
      const at = specOf[i]!;
      if (match === undefined) {
        statuses[i] = NO_RULE;
        continue;
      }
      if (at < 0) {
        statuses[i] = UNLIMITED;
        continue;
      }
      const rule = match.rule;
      const results = batch!.results;
      const limitCount = rule.limits.length;
      const chosen = reportedLimit(results, at, limitCount);
      const result = results[chosen]!;
      const limit = rule.limits[chosen - at]!;
      const mode = specs[at]!.mode;
      const over = result.overLimit;
      let resetMs = result.resetMs;
      if (over) {
        // The wait until every limit admits: the longest of the over-limit ones.
        for (let k = at; k < at + limitCount; k++) {
          const other = results[k]!;
          if (other.overLimit && other.resetMs > resetMs) resetMs = other.resetMs;
        }
      }
      const blocks = over && mode === 'enforced';
      const quotaViolation = over && mode === 'quota';
      if (quotaViolation) (violations ??= []).push(i);
      statuses[i] = {
        code: blocks ? 'OVER_LIMIT' : 'OK',
        currentLimit: {
          requestsPerUnit: limit.requestsPerUnit,
          unit: limit.unit,
          name: limit.name,
        },
        limitRemaining: over ? 0 : result.remaining,
        // The reference sends no reset for a quota rule over its limit.
        durationUntilResetMs: quotaViolation ? undefined : resetMs,
        rule,
        hits: specs[at]!.hits,
        overLimit: over,
        overLimitWithLocalCache: over && result.fromLocalCache === true,
      };
    }

    return {
      overallCode: overLimit && !shadowMode ? 'OVER_LIMIT' : 'OK',
      statuses,
      responseHeadersToAdd: NO_HEADERS,
      dynamicMetadata: withMetadata ? metadataOf(request, matches, violations) : undefined,
    };
  };

  const applyNow = store.applyNow?.bind(store);
  if (applyNow !== undefined) {
    const decideNow = (snapshot: ConfigSnapshot, request: RateLimitRequest) => {
      const p = plan(snapshot, request);
      return finish(p, p.specs.length > 0 ? applyNow(p.specs) : undefined);
    };
    return {
      decide(snapshot, request) {
        try {
          return Promise.resolve(decideNow(snapshot, request));
        } catch (error) {
          return Promise.reject(SluiceError.from(error));
        }
      },
      decideNow,
    };
  }
  return {
    async decide(snapshot, request) {
      const p = plan(snapshot, request);
      return finish(p, p.specs.length > 0 ? await store.apply(p.specs) : undefined);
    },
  };
}

/**
 * The reference's `dynamic_metadata` (docs/semantics.md §5): the domain, each descriptor's
 * entries as `key=value` with its override and hits_addend, the request's hits_addend when not 0,
 * the indexes of quota descriptors over their limit, and whether any matched rule is in quota mode.
 */
function metadataOf(
  request: RateLimitRequest,
  matches: readonly (LimitMatch | undefined)[],
  violations: readonly number[] | undefined,
): Record<string, JsonValue> {
  const descriptors: JsonValue[] = request.descriptors.map((descriptor) => {
    const fields: Record<string, JsonValue> = {
      entries: descriptor.entries.map((entry) => `${entry.key}=${entry.value}`),
    };
    if (descriptor.limit !== undefined) {
      const unit = descriptor.limit.unit?.toUpperCase() ?? 'UNKNOWN';
      fields.limit = `requests_per_unit:${descriptor.limit.requestsPerUnit} unit:${unit}`;
    }
    if (descriptor.hitsAddend !== undefined) fields.hitsAddend = descriptor.hitsAddend;
    return fields;
  });
  const metadata: Record<string, JsonValue> = { domain: request.domain, descriptors };
  if (request.hitsAddend !== 0) metadata.hitsAddend = request.hitsAddend;
  if (violations !== undefined) metadata.quotaModeViolations = violations;
  metadata.quotaModeEnabled = matches.some((match) => match?.rule.quotaMode === true);
  return metadata;
}
