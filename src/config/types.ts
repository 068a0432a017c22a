/**
 * The validated, immutable configuration: what the rest of sluice reads. Produced by
 * `config/` from the reference's YAML format; never mutated after it is built. The matching tree's
 * node classes live here too (filled in by ./build.ts), so this module imports nothing of config/
 * but the glob type. The rule itself (`RateLimitRule`) is a domain type in ../model.ts.
 */
import type { ConfigProblem } from '../errors.js';
import type { RateLimitRule, RequestDescriptor } from '../model.js';
import type { Glob } from './glob.js';

export type { Algorithm } from '../algorithms/index.js';

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

/** One node of the tree: a configured descriptor. */
export class ConfigNode {
  constructor(
    /** The prepared answer when this node carries a rule, else `undefined`. */
    readonly match: LimitMatch | undefined,
    /** The next level, `undefined` when the node has no nested descriptors. */
    readonly children: ConfigLevel | undefined,
  ) {}
}

/** A node reached through a wildcard value. */
export interface WildcardNode {
  /** The compiled `value` pattern. */
  readonly glob: Glob;
  /** The node. */
  readonly node: ConfigNode;
  /** Declaration index within its level, across merged files: wildcards are tried in this order. */
  readonly order: number;
}

/**
 * A node whose key holds a `*` (`key: "b*"`, with or without a value): like the reference, it
 * matches a request entry whose joined `key_value` text matches `glob`, the node's own joined
 * text (`key_value`, or `key` alone) (docs/compatibility.md).
 */
export interface KeyWildcardNode {
  /** The compiled joined pattern. */
  readonly glob: Glob;
  /** The node. */
  readonly node: ConfigNode;
  /** Declaration index within its level, shared with {@link WildcardNode.order}. */
  readonly order: number;
}

/** The descriptors of one level (a domain's top level, or a node's nested descriptors). */
export class ConfigLevel {
  /** key -> value -> node, for nodes with a value (wildcard patterns too, as literal text). */
  readonly exact = new Map<string, Map<string, ConfigNode>>();
  /** key -> wildcard nodes in declaration order. */
  readonly wildcards = new Map<string, WildcardNode[]>();
  /** key -> the key-only (default) node. */
  readonly defaults = new Map<string, ConfigNode>();
  /** Nodes with a `*` in their key, in declaration order; usually empty. */
  readonly keyWildcards: KeyWildcardNode[] = [];
  /**
   * Descriptors declared at this level so far, by every file merged into it: the next one's
   * `order`. Merged files continue one count, as the reference appends them to one list.
   */
  declared = 0;
}
