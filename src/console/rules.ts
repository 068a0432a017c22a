/**
 * The console's view of the rules: each loaded domain's matching tree as plain JSON, and the path
 * one request descriptor takes through it (the same `lookup` getLimit walks, step by step).
 */
import { isWildcard } from '../config/glob.js';
import { lookup } from '../config/match.js';
import type { ConfigLevel, ConfigNode, ConfigSnapshot } from '../config/types.js';
import type { RateLimitRule, RequestDescriptor } from '../model.js';

/** One limit of a rule, as the console shows it. */
export interface RuleLimitView {
  readonly requestsPerUnit: number;
  readonly unit: string;
  readonly unitMultiplier: number;
  /** Window length, ms. */
  readonly windowMs: number;
  readonly algorithm: string;
  readonly burst: number;
  readonly name: string;
}

/** A rule, as the console shows it. */
export interface RuleView {
  /** The reference's stats key, e.g. `edge.path_/login.remote_address`. */
  readonly fullKey: string;
  readonly unlimited: boolean;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly replaces: readonly string[];
  readonly shareThreshold: boolean;
  readonly detailedMetric: boolean;
  /** One entry per limit (a `rate_limits` list has several). */
  readonly limits: readonly RuleLimitView[];
}

/** One configured descriptor. */
export interface RuleNodeView {
  readonly key: string;
  /** The configured value; `''` for a key-only (default) node. */
  readonly value: string;
  /** How a request entry reaches it: `exact` value, value `wildcard`, `key-wildcard`, `default`. */
  readonly kind: 'exact' | 'wildcard' | 'key-wildcard' | 'default';
  /** The node's rule; `undefined` when it has none (a node with no children then whitelists). */
  readonly rule: RuleView | undefined;
  /** Nested descriptors. */
  readonly children: readonly RuleNodeView[];
}

/** One domain's tree. */
export interface DomainView {
  readonly domain: string;
  readonly files: readonly string[];
  readonly descriptors: readonly RuleNodeView[];
}

/** The JSON shape of a rule. */
export function ruleView(rule: RateLimitRule): RuleView {
  return {
    fullKey: rule.fullKey,
    unlimited: rule.unlimited,
    shadowMode: rule.shadowMode,
    quotaMode: rule.quotaMode,
    replaces: rule.replaces,
    shareThreshold: rule.shareThreshold,
    detailedMetric: rule.detailedMetric,
    limits: rule.limits.map((limit) => ({
      requestsPerUnit: limit.requestsPerUnit,
      unit: limit.unit,
      unitMultiplier: limit.unitMultiplier,
      windowMs: limit.windowMs,
      algorithm: limit.algorithm,
      burst: limit.burst,
      name: limit.name,
    })),
  };
}

function nodeView(
  level: ConfigLevel,
  key: string,
  value: string,
  node: ConfigNode,
  kind: RuleNodeView['kind'],
): RuleNodeView {
  const keyWildcard = level.keyWildcards.some((candidate) => candidate.node === node);
  return {
    key,
    value,
    kind: keyWildcard ? 'key-wildcard' : kind,
    rule: node.match === undefined ? undefined : ruleView(node.match.rule),
    children: node.children === undefined ? [] : levelView(node.children),
  };
}

function compare(a: RuleNodeView, b: RuleNodeView): number {
  if (a.key !== b.key) return a.key < b.key ? -1 : 1;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

function levelView(level: ConfigLevel): RuleNodeView[] {
  const out: RuleNodeView[] = [];
  for (const [key, byValue] of level.exact) {
    for (const [value, node] of byValue) {
      out.push(nodeView(level, key, value, node, isWildcard(value) ? 'wildcard' : 'exact'));
    }
  }
  for (const [key, node] of level.defaults) out.push(nodeView(level, key, '', node, 'default'));
  return out.sort(compare);
}

/** Every loaded domain's tree, domains in name order. */
export function rulesView(snapshot: ConfigSnapshot): DomainView[] {
  const out: DomainView[] = [];
  const names = [...snapshot.domains.keys()].sort();
  for (const name of names) {
    const level = snapshot.tree?.(name);
    out.push({
      domain: name,
      files: snapshot.domains.get(name)?.files ?? [],
      descriptors: level === undefined ? [] : levelView(level),
    });
  }
  return out;
}

/** One step of a descriptor's walk: the request entry and the node it reached, if any. */
export interface PathStep {
  /** The request entry. */
  readonly entry: { readonly key: string; readonly value: string };
  /** How it matched; `none` when no node matched (the walk stops, no rule). */
  readonly matched: RuleNodeView['kind'] | 'none';
  /** The configured node it reached (key, value as configured). */
  readonly node: { readonly key: string; readonly value: string } | undefined;
  /** Whether the node has a rule. */
  readonly hasRule: boolean;
  /** Whether the node has nested descriptors (the walk goes on only then). */
  readonly hasChildren: boolean;
}

function describeMatch(
  level: ConfigLevel,
  key: string,
  value: string,
  node: ConfigNode,
): { kind: RuleNodeView['kind']; key: string; value: string } {
  if (level.exact.get(key)?.get(value) === node) {
    const keyWildcard = level.keyWildcards.some((candidate) => candidate.node === node);
    return { kind: keyWildcard ? 'key-wildcard' : 'exact', key, value };
  }
  const keyWildcard = level.keyWildcards.find((candidate) => candidate.node === node);
  if (keyWildcard !== undefined) {
    // The joined pattern: recover the configured key and value from the exact map.
    for (const [configKey, byValue] of level.exact) {
      for (const [configValue, candidate] of byValue) {
        if (candidate === node) return { kind: 'key-wildcard', key: configKey, value: configValue };
      }
    }
    for (const [configKey, candidate] of level.defaults) {
      if (candidate === node) return { kind: 'key-wildcard', key: configKey, value: '' };
    }
    return { kind: 'key-wildcard', key: keyWildcard.glob.pattern, value: '' };
  }
  const wildcard = level.wildcards.get(key)?.find((candidate) => candidate.node === node);
  if (wildcard !== undefined) return { kind: 'wildcard', key, value: wildcard.glob.pattern };
  return { kind: 'default', key, value: '' };
}

/**
 * The walk of `descriptor` through `domain`'s tree, one step per entry reached, in the order
 * getLimit takes them (it stops where no node matches or the node has no children). An unknown
 * domain or a snapshot without trees gives no steps.
 */
export function explainPath(
  snapshot: ConfigSnapshot,
  domain: string,
  descriptor: RequestDescriptor,
): PathStep[] {
  let level = snapshot.tree?.(domain);
  const steps: PathStep[] = [];
  for (const entry of descriptor.entries) {
    if (level === undefined) break;
    const node = lookup(level, entry.key, entry.value);
    if (node === undefined) {
      steps.push({
        entry: { key: entry.key, value: entry.value },
        matched: 'none',
        node: undefined,
        hasRule: false,
        hasChildren: false,
      });
      break;
    }
    const how = describeMatch(level, entry.key, entry.value, node);
    steps.push({
      entry: { key: entry.key, value: entry.value },
      matched: how.kind,
      node: { key: how.key, value: how.value },
      hasRule: node.match !== undefined,
      hasChildren: node.children !== undefined,
    });
    level = node.children;
  }
  return steps;
}
