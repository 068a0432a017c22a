/**
 * getLimit: which rule applies to one request descriptor. Follows the reference's GetLimit
 * (envoyproxy/ratelimit src/config/config_impl.go) rule by rule; see `findLimit`.
 *
 * This is the hot path: the common case (no override) walks prebuilt maps and returns a LimitMatch
 * built with the snapshot, allocating nothing.
 */
import { DEFAULT_ALGORITHM } from '../algorithms/index.js';
import { UNIT_MS, type RateLimitRule, type RequestDescriptor } from '../model.js';
import type { Algorithm, ConfigLevel, ConfigNode, LimitMatch, WildcardNode } from './types.js';
import { matchGlob } from './glob.js';

/**
 * The configured rule for `descriptor` in a domain's tree, or `undefined`.
 *
 * For each request entry, at the current level: the node for exactly `key`+`value`; else the
 * first declared wildcard node that matches (a value pattern of that key, or a node with a `*` in
 * its key, whose joined `key_value` pattern is tested against the entry's joined `key_value`
 * text); else the key-only (default) node. A rule counts only when found at the descriptor's last
 * entry. The walk goes
 * down into a node's nested descriptors when it has some and stops otherwise; it never backtracks
 * (when the exact node has no matching child, its wildcard or default siblings are not tried).
 * A node with neither rule nor nested descriptors therefore whitelists: no limit.
 */
export function findLimit(
  root: ConfigLevel,
  descriptor: RequestDescriptor,
): LimitMatch | undefined {
  const entries = descriptor.entries;
  const last = entries.length - 1;
  let level = root;
  let result: LimitMatch | undefined;
  for (let i = 0; i <= last; i++) {
    const entry = entries[i]!;
    const node = lookup(level, entry.key, entry.value);
    if (node === undefined) break;
    if (i === last) result = node.match;
    if (node.children === undefined) break;
    level = node.children;
  }
  return result;
}

/** The node one request entry reaches at `level` (exact, then wildcards, then default). */
export function lookup(level: ConfigLevel, key: string, value: string): ConfigNode | undefined {
  const exact = level.exact.get(key)?.get(value);
  if (exact !== undefined) return exact;
  let found: WildcardNode | undefined;
  const wildcards = level.wildcards.get(key);
  if (wildcards !== undefined) {
    for (let i = 0; i < wildcards.length; i++) {
      const candidate = wildcards[i]!;
      if (matchGlob(candidate.glob, value)) {
        found = candidate;
        break;
      }
    }
  }
  // Key wildcards compete with value wildcards in declaration order, as all of a level's
  // wildcards do in the reference; the joined text is built only when one is tried.
  const keyWildcards = level.keyWildcards;
  let joined: string | undefined;
  for (let i = 0; i < keyWildcards.length; i++) {
    const candidate = keyWildcards[i]!;
    if (found !== undefined && candidate.order > found.order) break;
    joined ??= `${key}_${value}`;
    if (matchGlob(candidate.glob, joined)) return candidate.node;
  }
  if (found !== undefined) return found.node;
  return level.defaults.get(key);
}

/**
 * The rule for a descriptor that carries Envoy's `limit` override, in a known domain (counted
 * with `algorithm`, the `DEFAULT_ALGORITHM`): the
 * override's numbers, never shadow mode, no name, keyed like the reference's `descriptorKey`
 * (`domain.key_value.key2`, a key alone where the value is empty). The configured tree is not
 * consulted.
 *
 * An override whose unit is UNKNOWN (or a value sluice does not know) yields `undefined`: no
 * limit. The reference builds a rule with the UNKNOWN unit and fails later when it computes the
 * window; answering OK with no limit is the fail-open reading of a limit that cannot be applied.
 */
export function overrideLimit(
  domain: string,
  descriptor: RequestDescriptor,
  algorithm: Algorithm = DEFAULT_ALGORITHM,
): LimitMatch | undefined {
  const override = descriptor.limit;
  if (override === undefined || override.unit === undefined) return undefined;
  const unit = override.unit;
  const rule: RateLimitRule = {
    requestsPerUnit: override.requestsPerUnit,
    unit,
    windowMs: UNIT_MS[unit],
    name: '',
    unlimited: false,
    shadowMode: false,
    replaces: NO_REPLACES,
    algorithm,
    limits: [
      {
        requestsPerUnit: override.requestsPerUnit,
        unit,
        unitMultiplier: 1,
        windowMs: UNIT_MS[unit],
        algorithm,
        burst: override.requestsPerUnit,
        name: '',
      },
    ],
    fullKey: descriptorKey(domain, descriptor),
    detailedMetric: false,
    valueToMetric: false,
    shareThreshold: false,
    quotaMode: false,
    fromOverride: true,
  };
  return { rule, sharedPatterns: undefined };
}

const NO_REPLACES: readonly string[] = Object.freeze([]);

/** The reference's descriptorKey: `domain.` + entries as `key_value` (or `key`), dot-joined. */
export function descriptorKey(domain: string, descriptor: RequestDescriptor): string {
  let key = `${domain}.`;
  const entries = descriptor.entries;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    if (i > 0) key += '.';
    key += entry.value === '' ? entry.key : `${entry.key}_${entry.value}`;
  }
  return key;
}
