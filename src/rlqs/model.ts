/**
 * The Rate Limit Quota Service's messages as plain domain types (docs/rlqs.md). transport/ maps
 * `envoy.service.rate_limit_quota.v3` protobuf to and from these; nothing below it sees protobuf.
 */

/** One entry of a bucket id (`BucketId.bucket`, a map of strings). */
export interface BucketEntry {
  /** The map key. */
  readonly key: string;
  /** The map value. */
  readonly value: string;
}

/** One bucket's usage in a report (`BucketQuotaUsage`). */
export interface BucketUsage {
  /** The bucket id's entries, in wire order (the map has none: docs/rlqs.md, "Mapping"). */
  readonly bucketId: readonly BucketEntry[];
  /** Time the counts cover (`time_elapsed`), ms. */
  readonly elapsedMs: number;
  /** Requests Envoy let through in that time. */
  readonly allowed: number;
  /** Requests Envoy refused in that time. */
  readonly denied: number;
}

/** One message of the report stream (`RateLimitQuotaUsageReports`). */
export interface UsageReports {
  /** The filter's `domain`: the rule file's domain. */
  readonly domain: string;
  /** One entry per bucket. */
  readonly usages: readonly BucketUsage[];
}

/** How Envoy enforces an assignment (`envoy.type.v3.RateLimitStrategy`). */
export type QuotaStrategy =
  /** `blanket_rule: ALLOW_ALL`. */
  | { readonly kind: 'allow_all' }
  /** `blanket_rule: DENY_ALL`. */
  | { readonly kind: 'deny_all' }
  /** `token_bucket`: `maxTokens` capacity, `tokensPerFill` added every `fillIntervalMs`. */
  | {
      readonly kind: 'token_bucket';
      readonly maxTokens: number;
      readonly tokensPerFill: number;
      readonly fillIntervalMs: number;
    };

/** One bucket's action in a response (`BucketAction`). */
export type BucketAction =
  /** `quota_assignment_action`: enforce `strategy` for `ttlMs`. */
  | {
      readonly kind: 'assign';
      readonly bucketId: readonly BucketEntry[];
      readonly ttlMs: number;
      readonly strategy: QuotaStrategy;
    }
  /** `abandon_action`: the server no longer serves the bucket. */
  | { readonly kind: 'abandon'; readonly bucketId: readonly BucketEntry[] };
