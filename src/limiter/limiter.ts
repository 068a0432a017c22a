/**
 * The limiter: turns one request into at most one batched store call and a decision value.
 * It resolves rules (via the config snapshot), applies `replaces`, `unlimited`, shadow and quota
 * mode, and builds one status per descriptor (docs/semantics.md §3 and §5). The admission
 * decision itself is the store's (`BatchResult.admitted`); the limiter only reports it. A dry run
 * (`explain`, the console's "try it") goes through the same plan and statuses, with the store's
 * dry run (`checkBatch`) in place of the charge.
 */
import type { ConfigSnapshot, LimitMatch } from '../config/types.js';
import {
  MAX_UINT32,
  type DescriptorStatus,
  type JsonObject,
  type JsonValue,
  type RateLimitRequest,
  type RateLimitRule,
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
import { checkBatch } from '../stores/batch.js';
import { counterKey } from './keys.js';

/** Options for {@link createLimiter}. */
export interface LimiterOptions {
  /** Where hits are counted. */
  readonly store: CounterStore;
  /** Global `SHADOW_MODE`: the overall code is always OK; statuses keep their real codes. */
  readonly shadowMode: boolean;
  /**
   * Global `QUOTA_MODE`: every descriptor that is not unlimited is a quota descriptor (a rule in
   * shadow mode still never rejects).
   */
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
  /**
   * The answer {@link decide} would give now, from the same code, charging nothing (the console's
   * "try it"). Allocates more than `decide`; never on the serving path. Rejects as `decide` does.
   */
  explain(snapshot: ConfigSnapshot, request: RateLimitRequest): Promise<Explanation>;
}

/** A dry run of one request ({@link Limiter.explain}). */
export interface Explanation {
  /** The snapshot it was decided against. */
  readonly snapshot: ConfigSnapshot;
  /** The answer `decide` would give now; nothing was charged. */
  readonly response: RateLimitResponse;
  /** The same request checked with 0 hits: each descriptor's room now (`limitRemaining`). */
  readonly now: RateLimitResponse;
  /**
   * Per descriptor: the rule that decided it, `undefined` when none matched or its rule was
   * replaced (`replaces`).
   */
  readonly matches: readonly (LimitMatch | undefined)[];
  /** Per descriptor: its counters' keys, one per limit; empty when it is not counted. */
  readonly counterKeys: readonly (readonly string[])[];
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

/** What one request asks the store: its matched rules and its counters. */
interface Plan {
  readonly request: RateLimitRequest;
  readonly matches: (LimitMatch | undefined)[];
  /** Index into `specs` of descriptor i's first counter (one per limit), -1 when not counted. */
  readonly specOf: number[];
  readonly specs: CounterSpec[];
}

/**
 * What `request` asks the store under `snapshot`: each descriptor's rule (after `replaces`) and
 * one counter spec per counted limit, with its mode and quota group. `globalQuota`: QUOTA_MODE.
 */
function planOf(snapshot: ConfigSnapshot, request: RateLimitRequest, globalQuota: boolean): Plan {
  const { domain, descriptors } = request;
  const count = descriptors.length;
  // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
  const matches = new Array<LimitMatch | undefined>(count);
  let replaced: Set<string> | undefined;

  for (let i = 0; i < count; i++) {
    const match = snapshot.getLimit(domain, descriptors[i]!);
    matches[i] = match;
    if (match === undefined) continue;
    // An indexed loop: this runs per descriptor per call, and most rules replace nothing.
    const replaces = match.rule.replaces;
    for (let r = 0; r < replaces.length; r++) (replaced ??= new Set<string>()).add(replaces[r]!);
  }

  // A plain array: a typed array costs an ArrayBuffer per request.
  const specOf = new Array<number>(count).fill(-1);
  const specs: CounterSpec[] = [];
  // The reference's quota rule: the request is rejected when every quota descriptor is over
  // its limit. A quota descriptor that is never over (no rule under QUOTA_MODE, shadow mode)
  // means quota cannot reject; otherwise each quota counter carries its descriptor as group.
  let quotaCanReject = true;
  for (let i = 0; i < count; i++) {
    const match = matches[i];
    if (match === undefined) {
      if (globalQuota) quotaCanReject = false;
      continue;
    }
    const rule = match.rule;
    if (rule.unlimited) continue;
    // A replaced rule is dropped as if nothing matched (the reference's behaviour). A rule
    // without a name is never replaced: validation refuses an empty name in `replaces`.
    if (replaced?.has(rule.name) === true) {
      matches[i] = undefined;
      if (globalQuota) quotaCanReject = false;
      continue;
    }
    const descriptor = descriptors[i]!;
    const hits = hitsFor(descriptor, request.hitsAddend);
    const mode = modeOf(rule, globalQuota);
    if (mode === 'shadow' && (globalQuota || rule.quotaMode)) quotaCanReject = false;
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
        quotaGroup: mode === 'quota' ? i : undefined,
      });
    }
  }
  // Only known at the end: a quota descriptor that is never over means no group rejects.
  if (!quotaCanReject) for (const spec of specs) spec.quotaGroup = undefined;
  return { request, matches, specOf, specs };
}

/** Create a limiter over `options.store`. */
export function createLimiter(options: LimiterOptions): Limiter {
  const { store, shadowMode } = options;
  const globalQuota = options.quotaMode === true;
  const withMetadata = options.responseDynamicMetadata === true;

  const finish = (
    { request, matches, specOf, specs }: Plan,
    batch: BatchResult | undefined,
  ): RateLimitResponse => {
    const count = matches.length;
    // The store decided admission; statuses only report it.
    const overLimit = batch !== undefined && !batch.admitted;
    // The `metadata` of the rules whose descriptor passed, in request order.
    let passed: JsonObject[] | undefined;
    // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
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
      // A quota rule over its limit keeps OVER_LIMIT in its own status (the reference since
      // #1059); only shadow mode answers OK.
      const code = over && mode !== 'shadow' ? 'OVER_LIMIT' : 'OK';
      if (code === 'OK' && rule.metadata !== undefined) (passed ??= []).push(rule.metadata);
      statuses[i] = {
        code,
        currentLimit: {
          requestsPerUnit: limit.requestsPerUnit,
          unit: limit.unit,
          name: limit.name,
        },
        limitRemaining: over ? 0 : result.remaining,
        // When over: the longest wait of the over-limit limits (reportedLimit chose it), the
        // wait until every limit admits.
        durationUntilResetMs: result.resetMs,
        rule,
        hits: specs[at]!.hits,
        overLimit: over,
        overLimitWithLocalCache: over && result.fromLocalCache === true,
        quota: mode === 'quota',
      };
    }

    return {
      overallCode: overLimit && !shadowMode ? 'OVER_LIMIT' : 'OK',
      statuses,
      responseHeadersToAdd: NO_HEADERS,
      dynamicMetadata: withMetadata ? metadataOf(request, passed) : undefined,
      rejected: overLimit,
    };
  };

  const explain = async (snapshot: ConfigSnapshot, request: RateLimitRequest) => {
    const p = planOf(snapshot, request, globalQuota);
    const { specs, specOf, matches } = p;
    const counted = specs.length > 0;
    const response = finish(p, counted ? await checkBatch(store, specs) : undefined);
    const idle = { ...p, specs: specs.map((spec) => ({ ...spec, hits: 0 })) };
    const now = finish(idle, counted ? await checkBatch(store, idle.specs) : undefined);
    const counterKeys = matches.map((match, i) =>
      match === undefined || specOf[i]! < 0
        ? []
        : specs.slice(specOf[i], specOf[i]! + match.rule.limits.length).map((spec) => spec.key),
    );
    return { snapshot, response, now, matches, counterKeys };
  };

  const applyNow = store.applyNow?.bind(store);
  if (applyNow !== undefined) {
    const decideNow = (snapshot: ConfigSnapshot, request: RateLimitRequest) => {
      const p = planOf(snapshot, request, globalQuota);
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
      explain,
    };
  }
  return {
    async decide(snapshot, request) {
      const p = planOf(snapshot, request, globalQuota);
      return finish(p, p.specs.length > 0 ? await store.apply(p.specs) : undefined);
    },
    explain,
  };
}

/**
 * The reference's `dynamic_metadata` (docs/semantics.md §5): the domain, each descriptor's
 * entries as `key=value` with its override and hits_addend, the request's hits_addend when not 0,
 * and `metadata`: the rule `metadata` of every descriptor that passed (status OK), merged in
 * request order, the first value of a name winning and mappings merged name by name.
 */
function metadataOf(
  request: RateLimitRequest,
  passed: readonly JsonObject[] | undefined,
): Record<string, JsonValue> {
  const descriptors: JsonValue[] = request.descriptors.map((descriptor) => {
    const fields: Record<string, JsonValue> = {
      entries: descriptor.entries.map((entry) => `${entry.key}=${entry.value}`),
    };
    if (descriptor.limit !== undefined) {
      // Protobuf text form, which leaves out fields at their zero value (0, UNKNOWN).
      const { requestsPerUnit, unit } = descriptor.limit;
      const parts: string[] = [];
      if (requestsPerUnit !== 0) parts.push(`requests_per_unit:${requestsPerUnit}`);
      if (unit !== undefined) parts.push(`unit:${unit.toUpperCase()}`);
      fields.limit = parts.join(' ');
    }
    if (descriptor.hitsAddend !== undefined) fields.hitsAddend = descriptor.hitsAddend;
    return fields;
  });
  const metadata: Record<string, JsonValue> = { domain: request.domain, descriptors };
  if (request.hitsAddend !== 0) metadata.hitsAddend = request.hitsAddend;
  if (passed !== undefined) {
    const merged: Record<string, JsonValue> = {};
    for (const source of passed) mergeMetadata(merged, source);
    if (Object.keys(merged).length > 0) metadata.metadata = merged;
  }
  return metadata;
}

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Add `source`'s names missing from `into`; a name present in both as mappings is merged. */
function mergeMetadata(into: Record<string, JsonValue>, source: JsonObject): void {
  for (const name of Object.keys(source)) {
    const value = source[name]!;
    const existing = into[name];
    if (existing === undefined) {
      // Copied, so a later merge into it never changes the rule's own metadata.
      into[name] = isObject(value) ? copyObject(value) : value;
    } else if (isObject(existing) && isObject(value)) {
      mergeMetadata(existing, value);
    }
  }
}

function copyObject(value: JsonObject): Record<string, JsonValue> {
  const out: Record<string, JsonValue> = {};
  for (const name of Object.keys(value)) {
    const inner = value[name]!;
    out[name] = isObject(inner) ? copyObject(inner) : inner;
  }
  return out;
}
