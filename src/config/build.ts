/**
 * Validated file configs -> the matching tree of each domain. Everything getLimit needs is
 * prepared here, once per snapshot: per-level maps, compiled wildcards, and one frozen LimitMatch
 * per rule node, so matching itself allocates nothing.
 */
import { DEFAULT_ALGORITHM } from '../algorithms/index.js';
import { UNIT_MS, type RateLimitRule, type RateLimitUnit, type RuleLimit } from '../model.js';
import { ConfigLevel, ConfigNode, type Algorithm, type LimitMatch } from './types.js';
import type { DescriptorConfig, FileConfig, RateLimitConfig } from './validate.js';
import { compileGlob, isKeyWildcard, isWildcard } from './glob.js';

/** A built domain: its tree and its rules for `/rlconfig`. */
export interface BuiltDomain {
  /** The domain name. */
  readonly name: string;
  /** Files that contributed, in load order. */
  readonly files: string[];
  /** The top level. */
  readonly root: ConfigLevel;
  /** One `/rlconfig` line per rule. */
  readonly dumpLines: string[];
}

/**
 * Placeholder unit of an unlimited rule. The reference leaves it UNKNOWN; RateLimitRule needs a
 * unit, and an unlimited rule is never counted nor reported, so any unit will do. `/rlconfig`
 * still prints UNKNOWN for it, as the reference does.
 */
const UNLIMITED_PLACEHOLDER_UNIT: RateLimitUnit = 'second';

/**
 * Build the trees of a valid file set. Files of one domain are merged in order (only reached
 * when merging is allowed; validation rejected the duplicates otherwise).
 */
export function buildDomains(
  configs: readonly FileConfig[],
  defaultAlgorithm: Algorithm = DEFAULT_ALGORITHM,
): Map<string, BuiltDomain> {
  const domains = new Map<string, BuiltDomain>();
  for (const config of configs) {
    let domain = domains.get(config.domain);
    if (domain === undefined) {
      domain = { name: config.domain, files: [], root: new ConfigLevel(), dumpLines: [] };
      domains.set(config.domain, domain);
    }
    domain.files.push(config.file);
    addDescriptors(
      domain,
      domain.root,
      config.descriptors,
      `${config.domain}.`,
      [],
      defaultAlgorithm,
    );
  }
  return domains;
}

function addDescriptors(
  domain: BuiltDomain,
  level: ConfigLevel,
  descriptors: readonly DescriptorConfig[],
  parentKey: string,
  sharedByDepth: readonly (string | undefined)[],
  defaultAlgorithm: Algorithm,
): void {
  for (const descriptor of descriptors) {
    const order = level.declared++;
    const keyWildcard = isKeyWildcard(descriptor.key);
    const wildcard = !keyWildcard && descriptor.value !== '' && isWildcard(descriptor.value);
    const finalKey =
      descriptor.value === '' ? descriptor.key : `${descriptor.key}_${descriptor.value}`;
    const fullKey = parentKey + finalKey;
    // A shared key wildcard counts under its joined pattern, as the reference's does.
    const sharedPattern = keyWildcard ? finalKey : wildcard ? descriptor.value : undefined;
    const shared = sharedByDepth.concat(descriptor.shareThreshold ? sharedPattern : undefined);

    let children: ConfigLevel | undefined;
    if (descriptor.descriptors.length > 0) {
      children = new ConfigLevel();
      addDescriptors(
        domain,
        children,
        descriptor.descriptors,
        `${fullKey}.`,
        shared,
        defaultAlgorithm,
      );
    }

    let match: LimitMatch | undefined;
    const configs =
      descriptor.rateLimits ?? (descriptor.rateLimit === undefined ? [] : [descriptor.rateLimit]);
    if (configs.length > 0) {
      const rule = buildRule(descriptor, configs, fullKey, defaultAlgorithm);
      match = buildMatch(rule, shared);
      domain.dumpLines.push(dumpLine(rule));
    }

    const node = new ConfigNode(match, children);
    // Also reachable by its literal text below, as the reference's map lookups reach it.
    if (keyWildcard)
      level.keyWildcards.push(Object.freeze({ glob: compileGlob(finalKey), node, order }));
    if (descriptor.value === '') {
      level.defaults.set(descriptor.key, node);
      continue;
    }
    let byValue = level.exact.get(descriptor.key);
    if (byValue === undefined) {
      byValue = new Map();
      level.exact.set(descriptor.key, byValue);
    }
    // A request value equal to the pattern text finds the wildcard node here first, like the
    // reference's exact `key_value` lookup does.
    byValue.set(descriptor.value, node);
    if (wildcard) {
      let list = level.wildcards.get(descriptor.key);
      if (list === undefined) {
        list = [];
        level.wildcards.set(descriptor.key, list);
      }
      list.push(Object.freeze({ glob: compileGlob(descriptor.value), node, order }));
    }
  }
}

/** One limit of a rule, with the default algorithm applied. */
function buildLimit(config: RateLimitConfig, defaultAlgorithm: Algorithm): RuleLimit {
  const unit = config.unit ?? UNLIMITED_PLACEHOLDER_UNIT;
  return Object.freeze({
    requestsPerUnit: config.requestsPerUnit,
    unit,
    unitMultiplier: config.unitMultiplier,
    windowMs: UNIT_MS[unit] * config.unitMultiplier,
    algorithm: config.algorithm ?? defaultAlgorithm,
    burst: config.burst ?? config.requestsPerUnit,
    name: config.name,
  });
}

/**
 * The rule of a descriptor with one or more limits. Rule-level fields come from the first limit
 * (its name is the one `replaces` refers to); `replaces` is the union over every limit.
 */
function buildRule(
  descriptor: DescriptorConfig,
  configs: readonly RateLimitConfig[],
  fullKey: string,
  defaultAlgorithm: Algorithm,
): RateLimitRule {
  const limits = Object.freeze(configs.map((config) => buildLimit(config, defaultAlgorithm)));
  const first = limits[0]!;
  const config = configs[0]!;
  const replaces = [...new Set(configs.flatMap((c) => c.replaces))];
  return Object.freeze({
    requestsPerUnit: first.requestsPerUnit,
    unit: first.unit,
    windowMs: first.windowMs,
    name: first.name,
    unlimited: config.unlimited,
    shadowMode: descriptor.shadowMode,
    replaces: Object.freeze(replaces),
    algorithm: first.algorithm,
    limits,
    fullKey,
    detailedMetric: descriptor.detailedMetric,
    valueToMetric: descriptor.valueToMetric,
    shareThreshold: descriptor.shareThreshold,
    quotaMode: descriptor.quotaMode,
    metadata: descriptor.metadata,
    fromOverride: false,
  });
}

function buildMatch(
  rule: RateLimitRule,
  sharedByDepth: readonly (string | undefined)[],
): LimitMatch {
  const shared = sharedByDepth.some((pattern) => pattern !== undefined);
  return Object.freeze({
    rule,
    sharedPatterns: shared ? Object.freeze([...sharedByDepth]) : undefined,
  });
}

/** The reference's `/rlconfig` line for a rule. */
function dumpLine(rule: RateLimitRule): string {
  const unit = rule.unlimited ? 'UNKNOWN' : rule.unit.toUpperCase();
  return `${rule.fullKey}: unit=${unit} requests_per_unit=${rule.requestsPerUnit}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}`;
}
