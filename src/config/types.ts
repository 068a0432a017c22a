/**
 * The validated, immutable configuration: what the rest of sluice reads. Produced by
 * `config/` from the reference's YAML format; never mutated after it is built.
 */
import type { ConfigProblem } from '../errors.js';
import type { Algorithm } from '../algorithms/index.js';
import type { JsonObject, RateLimitUnit, RequestDescriptor } from '../model.js';
import type { ConfigLevel } from './build.js';

export type { Algorithm } from '../algorithms/index.js';

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

/** Where a matched rule came from and how its counter is keyed. */
export interface LimitMatch {
  /** The rule to apply. */
  readonly rule: RateLimitRule;
  /**
   * Counter-key patterns from `share_threshold` wildcards, one slot per request entry: where a
   * slot holds a pattern (e.g. `user_*`), every value matching it shares one counter; `undefined`
   * slots keep the request value. `undefined` as a whole when no entry is shared (the common case).
   */
  readonly sharedPatterns: readonly (string | undefined)[] | undefined;
}

/** One domain's rules (one or more files merged). */
export interface DomainInfo {
  /** The domain name. */
  readonly name: string;
  /** Files that contributed to it. */
  readonly files: readonly string[];
}

/** An immutable, validated set of rules for every loaded domain. */
export interface ConfigSnapshot {
  /** Every file the snapshot was built from, sorted. */
  readonly files: readonly string[];
  /** Non-fatal findings (misplaced reference keys that are ignored), for the logs. */
  readonly warnings: readonly ConfigProblem[];
  /** Loaded domains by name. */
  readonly domains: ReadonlyMap<string, DomainInfo>;
  /**
   * The rule for one request descriptor, following the reference's matching rules, or
   * `undefined` when none applies (unknown domain, no match, whitelisted node, rule not at the
   * descriptor's last entry). A descriptor's `limit` override wins for any known domain.
   */
  getLimit(domain: string, descriptor: RequestDescriptor): LimitMatch | undefined;
  /** One line per configured rule (`/rlconfig`), in the reference's format, sorted. */
  dump(): string[];
  /**
   * The matching tree of a loaded domain, read-only, for the debug console's rules view and
   * "try it"; `undefined` for an unknown domain. Optional: a snapshot without rules has none.
   */
  tree?(domain: string): ConfigLevel | undefined;
}
