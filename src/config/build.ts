/**
 * Validated file configs -> the matching tree of each domain. Everything getLimit needs is
 * prepared here, once per snapshot: per-level maps, compiled wildcards, and one frozen LimitMatch
 * per rule node, so matching itself allocates nothing.
 */
import { DEFAULT_ALGORITHM } from '../algorithms/index.js';
import { UNIT_MS, type RateLimitRule, type RateLimitUnit, type RuleLimit } from '../model.js';
import { ConfigLevel, ConfigNode, type Algorithm, type LimitMatch } from './types.js';
import type { DescriptorConfig, FileConfig, RateLimitConfig } from './validate.js';
import { cutText } from '../errors.js';
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
 * One descriptor of a valid file, flattened: what the tree needs of it, without its nested
 * descriptors, which follow it in a {@link BuildRecord} list one `depth` deeper. Plain data, so a
 * rule set validated in a worker thread crosses to the serving thread in slices.
 */
export interface FlatDescriptor extends Omit<
  DescriptorConfig,
  'descriptors' | 'path' | 'position'
> {
  /** 0 for a top-level descriptor, its parent's depth + 1 for a nested one. */
  readonly depth: number;
  /** Whether nested descriptors follow. */
  readonly hasChildren: boolean;
}

/** A file starts: its descriptors follow. */
export interface FileStart {
  /** The file (or xDS resource) name. */
  readonly file: string;
  /** Its domain. */
  readonly domain: string;
}

/** One step of building: a file starts, or one of its descriptors (in depth-first order). */
export type BuildRecord = FileStart | FlatDescriptor;

/** A valid file set as build records: each file's start, then its descriptors, depth first. */
export function flattenConfigs(configs: readonly FileConfig[]): BuildRecord[] {
  const records: BuildRecord[] = [];
  const add = (descriptors: readonly DescriptorConfig[], depth: number): void => {
    for (const {
      descriptors: children,
      path: _path,
      position: _position,
      ...rest
    } of descriptors) {
      records.push({ ...rest, depth, hasChildren: children.length > 0 });
      add(children, depth + 1);
    }
  };
  for (const config of configs) {
    records.push({ file: config.file, domain: config.domain });
    add(config.descriptors, 0);
  }
  return records;
}

/** Where the next descriptor of one depth goes. */
interface Frame {
  readonly level: ConfigLevel;
  readonly parentKey: string;
  readonly sharedByDepth: readonly (string | undefined)[];
}

/**
 * Builds the domains' trees one record at a time, so a caller can stop between records and let
 * the event loop turn. Files of one domain are merged in order (only reached when merging is
 * allowed; validation rejected the duplicates otherwise).
 */
export class DomainsBuilder {
  readonly #domains = new Map<string, BuiltDomain>();
  readonly #defaultAlgorithm: Algorithm;
  #domain: BuiltDomain | undefined;
  /** The frame of each depth on the path to the last descriptor. */
  readonly #frames: Frame[] = [];

  constructor(defaultAlgorithm: Algorithm = DEFAULT_ALGORITHM) {
    this.#defaultAlgorithm = defaultAlgorithm;
  }

  /** Add the next record. */
  add(record: BuildRecord): void {
    if ('file' in record) this.#startFile(record);
    else this.#addDescriptor(record);
  }

  /** The domains built so far (all of them once every record was added). */
  domains(): Map<string, BuiltDomain> {
    return this.#domains;
  }

  #startFile(start: FileStart): void {
    let domain = this.#domains.get(start.domain);
    if (domain === undefined) {
      domain = { name: start.domain, files: [], root: new ConfigLevel(), dumpLines: [] };
      this.#domains.set(start.domain, domain);
    }
    domain.files.push(start.file);
    this.#domain = domain;
    this.#frames.length = 0;
    this.#frames.push({ level: domain.root, parentKey: `${start.domain}.`, sharedByDepth: [] });
  }

  #addDescriptor(descriptor: FlatDescriptor): void {
    const domain = this.#domain;
    const frame = this.#frames[descriptor.depth];
    if (domain === undefined || frame === undefined) {
      throw new Error(`build record out of order: a descriptor at depth ${descriptor.depth}`);
    }
    this.#frames.length = descriptor.depth + 1;
    const { level, parentKey, sharedByDepth } = frame;
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
    if (descriptor.hasChildren) {
      children = new ConfigLevel();
      this.#frames.push({ level: children, parentKey: `${fullKey}.`, sharedByDepth: shared });
    }

    let match: LimitMatch | undefined;
    const configs =
      descriptor.rateLimits ?? (descriptor.rateLimit === undefined ? [] : [descriptor.rateLimit]);
    if (configs.length > 0) {
      const rule = buildRule(descriptor, configs, fullKey, this.#defaultAlgorithm);
      match = buildMatch(rule, shared);
      domain.dumpLines.push(dumpLine(rule));
    }

    const node = new ConfigNode(match, children);
    // Also reachable by its literal text below, as the reference's map lookups reach it.
    if (keyWildcard)
      level.keyWildcards.push(Object.freeze({ glob: compileGlob(finalKey), node, order }));
    if (descriptor.value === '') {
      level.defaults.set(descriptor.key, node);
      return;
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

/** Build the trees of a valid file set in one go (see {@link DomainsBuilder}). */
export function buildDomains(
  configs: readonly FileConfig[],
  defaultAlgorithm: Algorithm = DEFAULT_ALGORITHM,
): Map<string, BuiltDomain> {
  const builder = new DomainsBuilder(defaultAlgorithm);
  for (const record of flattenConfigs(configs)) builder.add(record);
  return builder.domains();
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
  descriptor: FlatDescriptor,
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

/**
 * Longest rule key (`domain.key_value...`) an `/rlconfig` line echoes, in characters: a rule may
 * hold a value of any length (from a file of up to 8 MiB, or an xDS resource), and the console
 * and operators read these lines.
 */
const MAX_DUMPED_KEY_LENGTH = 1_024;

/** The reference's `/rlconfig` line for a rule (its key cut past {@link MAX_DUMPED_KEY_LENGTH}). */
function dumpLine(rule: RateLimitRule): string {
  const unit = rule.unlimited ? 'UNKNOWN' : rule.unit.toUpperCase();
  return `${cutText(rule.fullKey, MAX_DUMPED_KEY_LENGTH)}: unit=${unit} requests_per_unit=${rule.requestsPerUnit}, shadow_mode: ${rule.shadowMode}, quota_mode: ${rule.quotaMode}`;
}
