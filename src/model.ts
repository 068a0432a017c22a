/**
 * Plain domain types shared by every layer below `transport/`. Nothing here knows about protobuf.
 * This is the bottom layer (ARCHITECTURE.md, "Layers"): it imports only the algorithm names.
 */
import type { Algorithm } from './algorithms/index.js';

/** Time units of a rate limit, lower-case as written in the reference's YAML. */
export type RateLimitUnit = 'second' | 'minute' | 'hour' | 'day' | 'week' | 'month' | 'year';

/** Every unit, in wire order (SECOND=1 ... YEAR=6, WEEK=7). */
export const RATE_LIMIT_UNITS: readonly RateLimitUnit[] = [
  'second',
  'minute',
  'hour',
  'day',
  'month',
  'year',
  'week',
];

/** Length of one unit in milliseconds; month is 30 days and year 365 days, as in the reference. */
export const UNIT_MS: Readonly<Record<RateLimitUnit, number>> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
};

/**
 * One limit of a rule: a `rate_limit` block, or one item of a `rate_limits` list. A rule with
 * several limits is over limit when any of them is (docs/semantics.md §3).
 */
export interface RuleLimit {
  /** Requests admitted per window (token bucket: tokens refilled per window). */
  readonly requestsPerUnit: number;
  /** The unit as configured (lower case); reported as `current_limit.unit`. */
  readonly unit: RateLimitUnit;
  /** `unit_multiplier` (1 when absent). */
  readonly unitMultiplier: number;
  /** Window length in ms: unit length x unit multiplier. */
  readonly windowMs: number;
  /** How hits are counted (`algorithm`, else the `DEFAULT_ALGORITHM` setting). */
  readonly algorithm: Algorithm;
  /** Token bucket capacity (`burst`, default `requestsPerUnit`); equals `requestsPerUnit` otherwise. */
  readonly burst: number;
  /** The limit's `name`, `''` when absent; reported as `current_limit.name`. */
  readonly name: string;
}

/** One configured (or overridden) rate limit. */
export interface RateLimitRule {
  /** Requests admitted per window. */
  readonly requestsPerUnit: number;
  /** The unit as configured (lower case). */
  readonly unit: RateLimitUnit;
  /** Window length in ms: unit length x unit multiplier (1 for reference config). */
  readonly windowMs: number;
  /** `rate_limit.name`, `''` when absent. */
  readonly name: string;
  /** `rate_limit.unlimited`: always OK, nothing counted. */
  readonly unlimited: boolean;
  /** The descriptor's `shadow_mode`: counted, reported, never blocks. */
  readonly shadowMode: boolean;
  /** Names of rules this rule replaces within the same request (`replaces: [{name}]`). */
  readonly replaces: readonly string[];
  /** How hits are counted (of the first limit). */
  readonly algorithm: Algorithm;
  /**
   * Every limit of the rule, at least one: `[the rate_limit block]`, or the `rate_limits` list in
   * order. The fields above (`requestsPerUnit`, `unit`, `windowMs`, `algorithm`, `name`) repeat
   * the first one.
   */
  readonly limits: readonly RuleLimit[];
  /**
   * The rule's full key as the reference builds it for stats and `/rlconfig`, e.g.
   * `edge.path_/login.remote_address` (domain, then each level's `key` or `key_value`).
   */
  readonly fullKey: string;
  /** `detailed_metric`: stats keyed by the request's values, not the rule's. */
  readonly detailedMetric: boolean;
  /** `value_to_metric`: include the matched descriptor value in the stats key. */
  readonly valueToMetric: boolean;
  /** `share_threshold` (wildcard rules only): all values matching the wildcard share one counter. */
  readonly shareThreshold: boolean;
  /**
   * `quota_mode` (or the `QUOTA_MODE` setting): over its limit the descriptor says OVER_LIMIT but
   * rejects the request only when every quota descriptor of the request is over
   * (docs/semantics.md §3).
   */
  readonly quotaMode: boolean;
  /**
   * The descriptor's `metadata` mapping, returned in `dynamic_metadata.metadata` when the
   * descriptor passes (`RESPONSE_DYNAMIC_METADATA`); `undefined` when it has none.
   */
  readonly metadata?: JsonObject | undefined;
  /** True when built from a request's RateLimitOverride rather than from a file. */
  readonly fromOverride: boolean;
}

/** One `key=value` entry of a request descriptor. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** A limit sent by Envoy inside the descriptor (RateLimitOverride); replaces the configured rule. */
export interface LimitOverride {
  readonly requestsPerUnit: number;
  /** `undefined` when the wire carried UNKNOWN or a value sluice does not know. */
  readonly unit: RateLimitUnit | undefined;
}

/** One descriptor of a request: what to count. */
export interface RequestDescriptor {
  readonly entries: readonly DescriptorEntry[];
  /** Envoy's per-route override, `undefined` when absent. */
  readonly limit: LimitOverride | undefined;
  /** Per-descriptor hits (0 = check only); `undefined` when absent, then the request's applies. */
  readonly hitsAddend: number | undefined;
}

/** A ShouldRateLimit call in domain form. */
export interface RateLimitRequest {
  readonly domain: string;
  readonly descriptors: readonly RequestDescriptor[];
  /** The request-level hits_addend as sent (0 when absent). */
  readonly hitsAddend: number;
}

/** Response codes, named as on the wire. `UNKNOWN` is never answered. */
export type Code = 'OK' | 'OVER_LIMIT';

/** The rule reported back in a status (`current_limit`). */
export interface CurrentLimit {
  readonly requestsPerUnit: number;
  readonly unit: RateLimitUnit;
  /** The rule's `name`, `''` when it has none. */
  readonly name: string;
}

/** The answer for one request descriptor. */
export interface DescriptorStatus {
  readonly code: Code;
  /** `undefined` when no rule applies (no rule, unknown domain, replaced, unlimited). */
  readonly currentLimit: CurrentLimit | undefined;
  /** Room left after this request; 0 when over limit; 4294967295 when unlimited. */
  readonly limitRemaining: number;
  /** Milliseconds; `undefined` when no rule applies. See docs/semantics.md §5 for its meaning. */
  readonly durationUntilResetMs: number | undefined;
  /**
   * Not on the wire (for metrics and headers): the rule that was counted, `undefined` when none
   * was (no rule, unknown domain, replaced, unlimited).
   */
  readonly rule: RateLimitRule | undefined;
  /** Not on the wire: the hits this descriptor asked for (0 when no rule was counted). */
  readonly hits: number;
  /**
   * Not on the wire: the counted rule lacked room, whatever the code says (a shadow or quota rule
   * over its limit answers OK).
   */
  readonly overLimit: boolean;
  /** Not on the wire: the store's local over-limit cache answered for this descriptor. */
  readonly overLimitWithLocalCache?: boolean;
  /**
   * Not on the wire: the descriptor was counted in quota mode (`quota_mode` or `QUOTA_MODE`), so
   * its OVER_LIMIT alone does not reject the request.
   */
  readonly quota?: boolean;
}

/** A header Envoy adds to the client's response or the upstream request. */
export interface HeaderValue {
  readonly key: string;
  readonly value: string;
}

/** A ShouldRateLimit answer in domain form. */
export interface RateLimitResponse {
  readonly overallCode: Code;
  /** Exactly one per request descriptor, in request order. */
  readonly statuses: readonly DescriptorStatus[];
  readonly responseHeadersToAdd: readonly HeaderValue[];
  /**
   * `dynamic_metadata` (a google.protobuf.Struct as plain JSON values); `undefined` when not sent
   * (`RESPONSE_DYNAMIC_METADATA` off).
   */
  readonly dynamicMetadata?: Readonly<Record<string, JsonValue>> | undefined;
  /** `raw_body` bytes for Envoy to send on rejection; `undefined` when not sent. */
  readonly rawBody?: Uint8Array | undefined;
  /**
   * Not on the wire: the request was rejected, so nothing was charged (also under global
   * `SHADOW_MODE`, whose overall code stays OK). `undefined`: rejected exactly when the overall
   * code is OVER_LIMIT.
   */
  readonly rejected?: boolean | undefined;
}

/** A JSON value, as carried by a google.protobuf.Struct. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | JsonObject;

/** A JSON object (a google.protobuf.Struct). */
export interface JsonObject {
  readonly [key: string]: JsonValue;
}

/** Largest uint32: the `limit_remaining` of an unlimited rule. */
export const MAX_UINT32 = 4_294_967_295;
