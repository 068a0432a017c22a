/**
 * The rule file format's vocabulary: the validated, typed shape of a file (what validate.ts
 * produces and build.ts consumes) and the keys each YAML level may hold.
 */
import type { JsonObject, RateLimitUnit } from '../model.js';
import type { Algorithm } from '../algorithms/index.js';
import type { SourcePosition } from './parse.js';

/** A validated `rate_limit` block. */
export interface RateLimitConfig {
  /** The unit; `undefined` only for an unlimited rule (which must not name one). */
  readonly unit: RateLimitUnit | undefined;
  /** `requests_per_unit`, 0 when absent (as in the reference). */
  readonly requestsPerUnit: number;
  /** `unlimited`. */
  readonly unlimited: boolean;
  /** `name`, `''` when absent. */
  readonly name: string;
  /** The names listed under `replaces`. */
  readonly replaces: readonly string[];
  /** `algorithm` (sluice extension); `undefined` when absent: the `DEFAULT_ALGORITHM` applies. */
  readonly algorithm: Algorithm | undefined;
  /** `unit_multiplier` (sluice extension), 1 when absent. */
  readonly unitMultiplier: number;
  /** `burst` (sluice extension, token_bucket only); `undefined` when absent. */
  readonly burst: number | undefined;
}

/** A validated descriptor node of a file. */
export interface DescriptorConfig {
  /** `key`; never empty in a valid file. */
  readonly key: string;
  /** `value`, `''` for a key-only (default) node; may contain `*` wildcards. */
  readonly value: string;
  /** YAML path, e.g. `descriptors[1].descriptors[0]`. */
  readonly path: string;
  /** Where the descriptor starts in its file. */
  readonly position: SourcePosition | undefined;
  /** The rule, `undefined` when the node has none (or it was invalid). */
  readonly rateLimit: RateLimitConfig | undefined;
  /**
   * `rate_limits` (sluice extension): several limits on this node, all applied; `undefined` when
   * absent. Never set together with `rateLimit`.
   */
  readonly rateLimits: readonly RateLimitConfig[] | undefined;
  /** Nested descriptors, matched against the request's next entry. */
  readonly descriptors: readonly DescriptorConfig[];
  /** `shadow_mode`. */
  readonly shadowMode: boolean;
  /** `detailed_metric`. */
  readonly detailedMetric: boolean;
  /** `value_to_metric`. */
  readonly valueToMetric: boolean;
  /** `share_threshold`. */
  readonly shareThreshold: boolean;
  /** `quota_mode`. */
  readonly quotaMode: boolean;
  /** `metadata` as JSON; `undefined` when absent or empty (as the reference drops it). */
  readonly metadata?: JsonObject | undefined;
}

/** One validated file. */
export interface FileConfig {
  /** The file name as given. */
  readonly file: string;
  /** `domain`; `''` when missing (then the file has a problem). */
  readonly domain: string;
  /** Where `domain` is written. */
  readonly domainPosition: SourcePosition | undefined;
  /** Top-level descriptors. */
  readonly descriptors: readonly DescriptorConfig[];
}

export /** Keys of the top level of a rule file. */
const ROOT_KEYS = ['domain', 'descriptors'] as const;
/** Keys sluice adds to a descriptor node (docs/configuration.md, "Extensions"). */
const DESCRIPTOR_EXTENSION_KEYS = ['rate_limits'] as const;
/** Keys sluice adds to a `rate_limit` block. */
const RATE_LIMIT_EXTENSION_KEYS = ['algorithm', 'unit_multiplier', 'burst'] as const;
/** Keys of a descriptor node in the reference's format (what a reference file may use). */
export const DESCRIPTOR_KEYS = [
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'quota_mode',
  'metadata',
] as const;
/** Keys of a `rate_limit` block in the reference's format. */
export const RATE_LIMIT_KEYS = [
  'unit',
  'requests_per_unit',
  'unlimited',
  'name',
  'replaces',
] as const;
export const REPLACES_KEYS = ['name'] as const;

export const ALL_DESCRIPTOR_KEYS: readonly string[] = [
  ...DESCRIPTOR_KEYS,
  ...DESCRIPTOR_EXTENSION_KEYS,
];
export const ALL_RATE_LIMIT_KEYS: readonly string[] = [
  ...RATE_LIMIT_KEYS,
  ...RATE_LIMIT_EXTENSION_KEYS,
];

/** Where each key belongs, to tell a misplaced key from an unknown one. */
export const PLACES: readonly { readonly keys: readonly string[]; readonly description: string }[] =
  [
    { keys: ROOT_KEYS, description: 'at the top level of the file' },
    { keys: ALL_DESCRIPTOR_KEYS, description: "on a descriptor, next to 'key'" },
    { keys: ALL_RATE_LIMIT_KEYS, description: 'inside rate_limit' },
    { keys: REPLACES_KEYS, description: 'inside a replaces entry' },
  ];

// Sluice-only keys: a misplaced one is an error (a reference file never has them), not a warning.
export const EXTENSION_KEYS: ReadonlySet<string> = new Set([
  ...DESCRIPTOR_EXTENSION_KEYS,
  ...RATE_LIMIT_EXTENSION_KEYS,
]);

/** Algorithms a setting rules out, and why (a plain object: it crosses to the build worker). */
export interface AlgorithmRefusal {
  /** The algorithms refused. */
  readonly algorithms: readonly Algorithm[];
  /** The setting that rules them out, as the message names it (`REDIS_MODE=cached`). */
  readonly setting: string;
  /** Why, in a few words, for the message. */
  readonly reason: string;
  /** The other way out the message offers besides another algorithm (`set REDIS_MODE=exact`). */
  readonly otherwise: string;
}
