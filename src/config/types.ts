/**
 * The validated, immutable configuration: what the rest of sluice reads. Produced by
 * `config/` from the reference's YAML format; never mutated after it is built.
 */
import type { ConfigProblem } from '../errors.js';
import type { RateLimitUnit, RequestDescriptor } from '../model.js';

/** Counting algorithms. Only `sliding_window` exists until the extensions issue lands. */
export type Algorithm = 'sliding_window';

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
  /** How hits are counted. */
  readonly algorithm: Algorithm;
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
  /** `quota_mode`: parsed and kept; sluice counts it like any rule for now. */
  readonly quotaMode: boolean;
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
}
