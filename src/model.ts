/**
 * Plain domain types shared by every layer below `transport/`. Nothing here knows about protobuf.
 */

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
  /** Milliseconds; `undefined` when no rule applies. See SPEC §3 for its meaning. */
  readonly durationUntilResetMs: number | undefined;
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
}

/** Largest uint32: the `limit_remaining` of an unlimited rule. */
export const MAX_UINT32 = 4_294_967_295;
