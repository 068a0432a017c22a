/**
 * Node tree -> validated, typed file configs. Checks every key, type and rule of the reference's
 * format and collects every problem (never stops at the first), then checks the file set as a
 * whole (duplicate domains, duplicate composite keys, merging).
 *
 * Messages follow the reference's texts (src/config/config_impl.go in envoyproxy/ratelimit) and
 * add where the problem is and what to write instead.
 */
import { isMap, isScalar, isSeq, type Node as YamlAnyNode, type YAMLMap } from 'yaml';
import {
  MAX_UINT32,
  RATE_LIMIT_UNITS,
  type JsonObject,
  type JsonValue,
  type RateLimitUnit,
} from '../model.js';
import type { ConfigProblem } from '../errors.js';
import {
  describeNode,
  quote,
  shortText,
  formatPosition,
  goParseInt,
  goScalarKind,
  isMergeKey,
  mapEntries,
  parseConfigYaml,
  type MapEntry,
  type ParsedFile,
  type ProblemSink,
  type RepeatedKey,
  type SourcePosition,
  type YamlNode,
} from './parse.js';
import { isWildcard } from './glob.js';
import {
  ALGORITHM_BY_NAME,
  ALGORITHM_DESCRIPTORS,
  ALGORITHMS,
  DEFAULT_ALGORITHM,
  type Algorithm,
} from '../algorithms/index.js';
import { UNIT_MS } from '../model.js';

/** The algorithms whose limits may set `burst`, as the error message names them. */
const BURST_ALGORITHMS = ALGORITHM_DESCRIPTORS.filter((algorithm) => algorithm.bounds.acceptsBurst)
  .map((algorithm) => algorithm.name)
  .join(' or ');

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

/** Options for validating and building a file set. */
export interface ConfigOptions {
  /**
   * Merge files that name the same domain instead of rejecting them (the reference's
   * `MERGE_DOMAIN_CONFIG`). Default false. Duplicate composite keys stay an error either way.
   */
  readonly mergeDomainConfigs?: boolean;
  /**
   * The algorithm of limits that name none (the `DEFAULT_ALGORITHM` setting); default
   * `sliding_window`.
   */
  readonly defaultAlgorithm?: Algorithm;
  /**
   * Most rules (descriptor nodes, nested ones included) one file may hold
   * (`CONFIG_MAX_RULES_PER_FILE`); default {@link DEFAULT_MAX_RULES_PER_FILE}.
   */
  readonly maxRulesPerFile?: number;
  /** Most rules all files together may hold (`CONFIG_MAX_RULES`); default {@link DEFAULT_MAX_RULES}. */
  readonly maxRules?: number;
}

/** Default of `ConfigOptions.maxRulesPerFile`. */
export const DEFAULT_MAX_RULES_PER_FILE = 20_000;

/** Default of `ConfigOptions.maxRules`. */
export const DEFAULT_MAX_RULES = 100_000;

/**
 * Longest rule file, in characters (bytes when read from disk): 8 MiB, several times the size of
 * {@link DEFAULT_MAX_RULES_PER_FILE} rules, so parsing time stays bounded.
 */
export const MAX_RULE_FILE_LENGTH = 8 * 1_048_576;

/** A configuration file's name and text. */
export interface ConfigFileInput {
  /** The file name, used in problems and in the snapshot's file list. */
  readonly name: string;
  /** The file's YAML text. */
  readonly content: string;
}

/** The result of validating a file set. */
export interface FileSetValidation {
  /** One entry per input file (same order); `undefined` for a file whose YAML is broken. */
  readonly configs: readonly (FileConfig | undefined)[];
  /** Every problem, in file order. Empty when the set is valid. */
  readonly problems: readonly ConfigProblem[];
  /** Misplaced reference keys: accepted and ignored (as the reference does), but reported. */
  readonly warnings: readonly ConfigProblem[];
}

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
const REPLACES_KEYS = ['name'] as const;

const ALL_DESCRIPTOR_KEYS: readonly string[] = [...DESCRIPTOR_KEYS, ...DESCRIPTOR_EXTENSION_KEYS];
const ALL_RATE_LIMIT_KEYS: readonly string[] = [...RATE_LIMIT_KEYS, ...RATE_LIMIT_EXTENSION_KEYS];

/** Where each key belongs, to tell a misplaced key from an unknown one. */
const PLACES: readonly { readonly keys: readonly string[]; readonly description: string }[] = [
  { keys: ROOT_KEYS, description: 'at the top level of the file' },
  { keys: ALL_DESCRIPTOR_KEYS, description: "on a descriptor, next to 'key'" },
  { keys: ALL_RATE_LIMIT_KEYS, description: 'inside rate_limit' },
  { keys: REPLACES_KEYS, description: 'inside a replaces entry' },
];

// Sluice-only keys: a misplaced one is an error (a reference file never has them), not a warning.
const EXTENSION_KEYS: ReadonlySet<string> = new Set([
  ...DESCRIPTOR_EXTENSION_KEYS,
  ...RATE_LIMIT_EXTENSION_KEYS,
]);

const UNIT_BY_UPPER_NAME: ReadonlyMap<string, RateLimitUnit> = new Map(
  RATE_LIMIT_UNITS.map((unit) => [unit.toUpperCase(), unit]),
);
const UNIT_CHOICES = 'second, minute, hour, day, week, month or year';

// Guards against runaway nesting (e.g. an alias that refers to its own ancestor).
const MAX_DEPTH = 64;

/** Parse and validate every file, then check the set as a whole. Never throws. */
export function validateFiles(
  files: readonly ConfigFileInput[],
  options: ConfigOptions = {},
): FileSetValidation {
  const perFile: ConfigProblem[][] = [];
  const configs: (FileConfig | undefined)[] = [];
  const warnings: ConfigProblem[] = [];
  const maxRules = options.maxRules ?? DEFAULT_MAX_RULES;
  const maxPerFile = options.maxRulesPerFile ?? DEFAULT_MAX_RULES_PER_FILE;
  let rules = 0;
  for (const { name, content } of files) {
    if (content.length > MAX_RULE_FILE_LENGTH) {
      perFile.push([tooLong(name, content.length)]);
      configs.push(undefined);
      continue;
    }
    if (rules > maxRules) {
      // Past the total, later files are not even parsed: the set is refused anyway.
      perFile.push([]);
      configs.push(undefined);
      continue;
    }
    const parsed = parseConfigYaml(name, content);
    if (parsed.root === undefined) {
      configs.push(undefined);
    } else {
      // The file may hold up to what is left of the total, and at most its own bound.
      const allowed = Math.min(maxPerFile, maxRules - rules);
      const walker = new Walker(parsed, options.defaultAlgorithm ?? DEFAULT_ALGORITHM, allowed);
      configs.push(walker.root(parsed.root));
      rules += walker.rules;
      if (walker.rules > maxPerFile) {
        parsed.sink.add(
          '',
          `the file holds more than ${maxPerFile} rules (descriptors, nested ones included); ` +
            'split it into several files or raise CONFIG_MAX_RULES_PER_FILE',
        );
      } else if (rules > maxRules) {
        parsed.sink.add(
          '',
          `the rule files hold more than ${maxRules} rules in all (descriptors, nested ones ` +
            'included) with this file; remove rules or raise CONFIG_MAX_RULES',
        );
      }
    }
    perFile.push(parsed.sink.problems);
    warnings.push(...parsed.sink.warnings);
  }
  checkFileSet(configs, perFile, options.mergeDomainConfigs === true);
  return { configs, problems: perFile.flat(), warnings };
}

/** The problem of a file longer than {@link MAX_RULE_FILE_LENGTH}. */
function tooLong(file: string, length: number): ConfigProblem {
  return {
    file,
    path: '',
    message:
      `error loading config file: the file is ${length} characters long; at most ` +
      `${MAX_RULE_FILE_LENGTH} are allowed; split it into several files`,
  };
}

class Walker {
  private readonly sink: ProblemSink;
  private readonly resolve: (node: unknown) => YamlNode | null;
  /** Descriptor nodes walked; the walk stops one past `maxRules`. */
  rules = 0;

  constructor(
    private readonly parsed: ParsedFile,
    private readonly defaultAlgorithm: Algorithm,
    private readonly maxRules: number,
  ) {
    this.sink = parsed.sink;
    this.resolve = parsed.resolve;
  }

  root(node: YamlNode | null): FileConfig {
    const file = this.parsed.file;
    if (node !== null && !isMap(node)) {
      this.sink.add(
        '',
        `error loading config file: the file must be a mapping with 'domain' and 'descriptors' keys, not ${describeNode(node)}`,
        node,
      );
      return { file, domain: '', domainPosition: undefined, descriptors: [] };
    }
    let domain = '';
    let domainNode: YamlAnyNode | null = node;
    let domainIsString = true;
    let descriptors: readonly DescriptorConfig[] = [];
    for (const entry of this.entries(node, '')) {
      switch (entry.key) {
        case 'domain': {
          domainNode = entry.value ?? entry.keyNode;
          const text = this.string(entry, 'domain', 'domain: edge');
          domainIsString = text !== undefined;
          domain = text ?? '';
          break;
        }
        case 'descriptors':
          descriptors = this.descriptorList(entry.value, 'descriptors', 0);
          break;
        default:
          this.unknownKey(entry, '', ROOT_KEYS);
      }
    }
    if (domain === '' && domainIsString) {
      this.sink.add('domain', 'config file cannot have empty domain', domainNode);
    }
    return { file, domain, domainPosition: this.sink.position(domainNode), descriptors };
  }

  private descriptorList(
    node: YamlNode | null,
    path: string,
    depth: number,
  ): readonly DescriptorConfig[] {
    if (node === null) return [];
    if (!isSeq(node)) {
      this.sink.add(
        path,
        `descriptors must be a list whose items start with '- key: ...', not ${describeNode(node)}`,
        node,
      );
      return [];
    }
    if (depth >= MAX_DEPTH) {
      this.sink.add(path, `descriptors are nested more than ${MAX_DEPTH} levels deep`, node);
      return [];
    }
    const result: DescriptorConfig[] = [];
    node.items.forEach((item, index) => {
      // Past the bound the file is refused (validateFiles says so); walking on costs only time.
      if (this.rules > this.maxRules) return;
      this.rules++;
      const itemPath = `${path}[${index}]`;
      const resolved = this.resolve(item);
      if (!isMap(resolved)) {
        this.listItemNotMap(itemPath, resolved, item);
        return;
      }
      const descriptor = this.descriptor(resolved, itemPath, depth);
      if (descriptor !== undefined) result.push(descriptor);
    });
    return result;
  }

  private descriptor(node: YAMLMap, path: string, depth: number): DescriptorConfig | undefined {
    let key = '';
    let keyNode: YamlAnyNode | null = node;
    let keyIsString = true;
    let value = '';
    let rateLimit: RateLimitConfig | undefined;
    let rateLimitEntry: MapEntry | undefined;
    let rateLimits: readonly RateLimitConfig[] | undefined;
    let rateLimitsEntry: MapEntry | undefined;
    let children: readonly DescriptorConfig[] = [];
    let shadowMode = false;
    let detailedMetric = false;
    let valueToMetric = false;
    let shareThreshold: MapEntry | undefined;
    let quotaMode = false;
    let metadata: JsonObject | undefined;
    for (const entry of this.entries(node, path)) {
      const entryPath = `${path}.${entry.key}`;
      switch (entry.key) {
        case 'key': {
          keyNode = entry.value ?? entry.keyNode;
          const text = this.string(entry, entryPath, 'key: remote_address');
          keyIsString = text !== undefined;
          key = text ?? '';
          break;
        }
        case 'value':
          value = this.string(entry, entryPath, 'value: /login') ?? '';
          break;
        case 'rate_limit':
          rateLimitEntry = entry;
          rateLimit = this.rateLimit(entry.value, entryPath);
          break;
        case 'rate_limits':
          rateLimitsEntry = entry;
          rateLimits = this.rateLimitList(entry.value, entryPath);
          break;
        case 'descriptors':
          children = this.descriptorList(entry.value, entryPath, depth + 1);
          break;
        case 'shadow_mode':
          shadowMode = this.bool(entry, entryPath);
          break;
        case 'detailed_metric':
          detailedMetric = this.bool(entry, entryPath);
          break;
        case 'value_to_metric':
          valueToMetric = this.bool(entry, entryPath);
          break;
        case 'share_threshold':
          if (this.bool(entry, entryPath)) shareThreshold = entry;
          break;
        case 'quota_mode':
          quotaMode = this.bool(entry, entryPath);
          break;
        case 'metadata':
          // Free-form data returned in dynamic_metadata when the descriptor passes. Anything but
          // a mapping is refused, as the reference refuses it (docs/compatibility.md).
          if (isMap(entry.value)) {
            const json = yamlToJson(entry.value, this.resolve) as JsonObject;
            metadata = Object.keys(json).length > 0 ? json : undefined;
          } else if (entry.value !== null) {
            this.sink.add(
              entryPath,
              `metadata must be a mapping of names to values (for example metadata: {team: payments}), not ${describeNode(entry.value)}`,
              entry.value,
            );
          }
          break;
        default:
          this.unknownKey(entry, path, ALL_DESCRIPTOR_KEYS);
      }
    }
    if (key === '' && keyIsString) {
      this.sink.add(`${path}.key`, 'descriptor has empty key', keyNode);
    }
    // The reference tests the joined `key_value` text for a `*`, so a node with a `*` in its key
    // may share too (docs/compatibility.md, "A `*` in a descriptor key").
    const finalKey = value === '' ? key : `${key}_${value}`;
    if (shareThreshold !== undefined && !isWildcard(finalKey)) {
      this.sink.add(
        `${path}.share_threshold`,
        `share_threshold can only be used with wildcard values (containing '*'), but found key ${quote(finalKey)}`,
        shareThreshold.keyNode,
      );
    }
    if (rateLimitEntry !== undefined && rateLimitsEntry !== undefined) {
      this.sink.add(
        `${path}.rate_limits`,
        "a descriptor has either 'rate_limit' (one limit) or 'rate_limits' (a list), not both; " +
          'move the rate_limit block into the rate_limits list',
        rateLimitsEntry.keyNode,
      );
      rateLimits = undefined;
    }
    if (key === '') return undefined;
    return {
      key,
      value,
      path,
      position: this.sink.position(node),
      rateLimit,
      rateLimits,
      descriptors: children,
      shadowMode,
      detailedMetric,
      valueToMetric,
      shareThreshold: shareThreshold !== undefined,
      quotaMode,
      metadata,
    };
  }

  private rateLimit(node: YamlNode | null, path: string): RateLimitConfig | undefined {
    // `rate_limit:` with nothing after it is no rule at all, as in the reference.
    if (node === null) return undefined;
    if (!isMap(node)) {
      this.sink.add(
        path,
        `rate_limit must be a mapping such as {unit: second, requests_per_unit: 10}, not ${describeNode(node)}`,
        node,
      );
      return undefined;
    }
    let unitEntry: MapEntry | undefined;
    let unitText = '';
    let requestsPerUnit = 0;
    let unlimited = false;
    let name = '';
    let replacesEntry: MapEntry | undefined;
    let algorithm: Algorithm | undefined;
    let algorithmEntry: MapEntry | undefined;
    let unitMultiplier = 1;
    let burst: number | undefined;
    let burstEntry: MapEntry | undefined;
    let valid = true;
    for (const entry of this.entries(node, path)) {
      const entryPath = `${path}.${entry.key}`;
      switch (entry.key) {
        case 'unit': {
          unitEntry = entry;
          const text = this.string(entry, entryPath, 'unit: second');
          if (text === undefined) valid = false;
          else unitText = text;
          break;
        }
        case 'requests_per_unit': {
          const count = this.uint32(entry, entryPath);
          if (count === undefined) valid = false;
          requestsPerUnit = count ?? 0;
          break;
        }
        case 'unlimited':
          unlimited = this.bool(entry, entryPath);
          break;
        case 'name': {
          const text = this.string(entry, entryPath, 'name: per_user');
          if (text === undefined) valid = false;
          else name = text;
          break;
        }
        case 'replaces':
          replacesEntry = entry;
          break;
        case 'algorithm': {
          algorithmEntry = entry;
          const text = this.string(entry, entryPath, 'algorithm: token_bucket');
          algorithm = ALGORITHMS.find((name) => name === text?.toLowerCase());
          if (text !== undefined && algorithm === undefined) {
            this.sink.add(
              entryPath,
              `unknown algorithm ${quote(text)}; use one of ${ALGORITHMS.join(', ')}`,
              entry.value ?? entry.keyNode,
            );
          }
          if (algorithm === undefined) valid = false;
          break;
        }
        case 'unit_multiplier': {
          const count = this.uint32(entry, entryPath);
          if (count === 0) {
            this.sink.add(
              entryPath,
              'unit_multiplier must be a whole number of at least 1 (the window is unit x unit_multiplier)',
              entry.value ?? entry.keyNode,
            );
          }
          if (count === undefined || count === 0) valid = false;
          else unitMultiplier = count;
          break;
        }
        case 'burst': {
          burstEntry = entry;
          const count = this.uint32(entry, entryPath);
          if (count === undefined) valid = false;
          else burst = count;
          break;
        }
        default:
          this.unknownKey(entry, path, ALL_RATE_LIMIT_KEYS);
      }
    }

    let unit: RateLimitUnit | undefined;
    const unitPath = `${path}.unit`;
    const unitNode = unitEntry?.value ?? unitEntry?.keyNode ?? node;
    if (unlimited) {
      // As in the reference, only a real unit conflicts with `unlimited`; anything else is ignored.
      if (UNIT_BY_UPPER_NAME.has(unitText.toUpperCase())) {
        this.sink.add(
          unitPath,
          'should not specify rate limit unit when unlimited; remove the unit line',
          unitNode,
        );
        valid = false;
      }
    } else {
      unit = UNIT_BY_UPPER_NAME.get(unitText.toUpperCase());
      if (unit === undefined && (unitEntry === undefined || this.isScalarEntry(unitEntry))) {
        this.sink.add(
          unitPath,
          `invalid rate limit unit ${quote(unitText)}; use one of ${UNIT_CHOICES}`,
          unitNode,
        );
      }
      if (unit === undefined) valid = false;
    }

    const effective = algorithm ?? this.defaultAlgorithm;
    const bounds = ALGORITHM_BY_NAME[effective].bounds;
    if (burstEntry !== undefined && !bounds.acceptsBurst) {
      this.sink.add(
        `${path}.burst`,
        `burst applies only to algorithm: ${BURST_ALGORITHMS}, but this limit uses ${effective}` +
          (algorithm === undefined ? ' (the default algorithm)' : '') +
          `; remove burst or set algorithm: ${BURST_ALGORITHMS}`,
        burstEntry.keyNode,
      );
      valid = false;
    }
    if (unit !== undefined && !unlimited) {
      // The algorithm's own bounds (its descriptor in src/algorithms/).
      const windowMs = UNIT_MS[unit] * unitMultiplier;
      const problem = bounds.check?.({
        requestsPerUnit,
        burst,
        burstWritten: burstEntry !== undefined,
        windowMs,
      });
      if (problem !== undefined) {
        const at =
          problem.at === 'burst'
            ? burstEntry!.keyNode
            : problem.at === 'algorithm'
              ? algorithmEntry?.keyNode
              : undefined;
        this.sink.add(`${path}.${problem.field}`, problem.message, at ?? node);
        valid = false;
      }
    }

    const replaces = this.replaces(replacesEntry, `${path}.replaces`, name);
    if (!valid || replaces === undefined) return undefined;
    return {
      unit,
      requestsPerUnit,
      unlimited,
      name,
      replaces,
      algorithm,
      unitMultiplier,
      burst,
    };
  }

  /** `rate_limits`: a non-empty list of rate_limit blocks, none unlimited, no window twice. */
  private rateLimitList(
    node: YamlNode | null,
    path: string,
  ): readonly RateLimitConfig[] | undefined {
    if (!isSeq(node) || node.items.length === 0) {
      this.sink.add(
        path,
        'rate_limits must be a non-empty list of limits such as ' +
          '[{unit: second, requests_per_unit: 10}, {unit: day, requests_per_unit: 1000}], not ' +
          (node === null ? 'empty' : isSeq(node) ? 'an empty list' : describeNode(node)),
        node,
      );
      return undefined;
    }
    const limits: RateLimitConfig[] = [];
    const seen = new Map<string, number>();
    let valid = true;
    node.items.forEach((item, index) => {
      const itemPath = `${path}[${index}]`;
      const resolved = this.resolve(item);
      if (!isMap(resolved)) {
        this.listItemNotMap(itemPath, resolved, item);
        valid = false;
        return;
      }
      const limit = this.rateLimit(resolved, itemPath);
      if (limit === undefined) {
        valid = false;
        return;
      }
      if (limit.unlimited) {
        this.sink.add(
          `${itemPath}.unlimited`,
          'unlimited cannot be one of several limits; use rate_limit: {unlimited: true} on its own',
          resolved,
        );
        valid = false;
        return;
      }
      const algorithm = limit.algorithm ?? this.defaultAlgorithm;
      const windowMs = UNIT_MS[limit.unit!] * limit.unitMultiplier;
      const pair = `${algorithm}/${windowMs}`;
      const first = seen.get(pair);
      if (first !== undefined) {
        this.sink.add(
          itemPath,
          `rate_limits[${first}] already has a ${algorithm} limit with a ${windowMs} ms window; ` +
            'keep the stricter one',
          resolved,
        );
        valid = false;
        return;
      }
      seen.set(pair, index);
      limits.push(limit);
    });
    return valid ? limits : undefined;
  }

  private replaces(
    entry: MapEntry | undefined,
    path: string,
    ownName: string,
  ): readonly string[] | undefined {
    if (entry === undefined || entry.value === null) return [];
    const node = entry.value;
    if (!isSeq(node)) {
      this.sink.add(
        path,
        `replaces must be a list such as [{name: other_limit}], not ${describeNode(node)}`,
        node,
      );
      return undefined;
    }
    const names: string[] = [];
    let valid = true;
    node.items.forEach((item, index) => {
      const itemPath = `${path}[${index}]`;
      const resolved = this.resolve(item);
      if (!isMap(resolved)) {
        this.listItemNotMap(itemPath, resolved, item);
        valid = false;
        return;
      }
      let name = '';
      let nameNode: YamlAnyNode | null = resolved;
      for (const nameEntry of this.entries(resolved, itemPath)) {
        if (nameEntry.key === 'name') {
          nameNode = nameEntry.value ?? nameEntry.keyNode;
          name = this.string(nameEntry, `${itemPath}.name`, 'name: other_limit') ?? '';
        } else {
          this.unknownKey(nameEntry, itemPath, REPLACES_KEYS);
        }
      }
      if (name === '') {
        this.sink.add(
          itemPath,
          "should not have an empty replaces entry; write '- name: <name of the rule to replace>'",
          nameNode,
        );
        valid = false;
      } else if (name === ownName) {
        this.sink.add(
          `${itemPath}.name`,
          'replaces should not contain name of same descriptor',
          nameNode,
        );
        valid = false;
      } else {
        names.push(name);
      }
    });
    return valid ? names : undefined;
  }

  private entries(node: YAMLMap | null, path: string): MapEntry[] {
    if (node === null) return [];
    const entries = mapEntries(
      node,
      this.resolve,
      (keyNode, text) => {
        this.sink.add(path, `config error, key is not of type string: ${text}`, keyNode);
      },
      (repeated) => this.warnRepeated(repeated, path),
    );
    for (const entry of entries) this.checkGoScalar(entry, path);
    return entries;
  }

  /** A key written twice loads as in the reference (the last wins), with a warning naming the lines. */
  private warnRepeated(repeated: RepeatedKey, parentPath: string): void {
    // Stryker disable next-line OptionalChaining,StringLiteral: every key node of a parsed document has a position; the '?' only satisfies the type
    const lines = repeated.keyNodes.map((node) => this.sink.position(node)?.line ?? '?');
    const path = parentPath === '' ? repeated.key : `${parentPath}.${repeated.key}`;
    this.sink.warn(
      path,
      `${quote(repeated.key)} is written ${lines.length} times (lines ${lines.join(', ')}); ` +
        (repeated.merged
          ? 'the mappings are merged, later keys over earlier ones,'
          : `only the last one (line ${String(lines[lines.length - 1])}) is used,`) +
        ' as envoyproxy/ratelimit reads it; remove the others',
      repeated.keyNodes[repeated.keyNodes.length - 1],
    );
  }

  /**
   * The reference refuses a file holding a floating-point number, or a whole number above
   * 2^63-1, as a value anywhere ("error checking config"), even where a string is expected.
   */
  private checkGoScalar(entry: MapEntry, parentPath: string): void {
    const node = entry.value;
    if (!isScalar(node)) return;
    const kind = goScalarKind(node);
    if (kind !== 'float' && kind !== 'uint64') return;
    const path = parentPath === '' ? entry.key : `${parentPath}.${entry.key}`;
    this.sink.add(
      path,
      `error checking config: ${entry.key} is ${describeNode(node)}, ` +
        (kind === 'float' ? 'a floating-point number' : 'a whole number above 2^63-1') +
        `, which envoyproxy/ratelimit refuses; write a whole number, or quote it if it is text ("${shortText(node.source ?? '')}")`,
      node,
    );
  }

  private listItemNotMap(path: string, resolved: YamlNode | null, original: unknown): void {
    this.sink.add(
      path,
      `config error, yaml file contains list of type other than map: ${describeNode(resolved)}`,
      resolved ?? (original as YamlAnyNode | null),
    );
  }

  private unknownKey(entry: MapEntry, parentPath: string, validHere: readonly string[]): void {
    const key = entry.key;
    let hint: string;
    // `key` is not valid here (every key valid here has its case), so its home is elsewhere.
    const home = PLACES.find((place) => place.keys.includes(key));
    if (home !== undefined && EXTENSION_KEYS.has(key)) {
      hint = `it belongs ${home.description}`;
    } else if (home !== undefined) {
      // The reference checks keys against one flat list, so a known key in the wrong place loads
      // there and is ignored. A reference file must stay valid here, so this is only a warning.
      const path = parentPath === '' ? key : `${parentPath}.${key}`;
      this.sink.warn(
        path,
        `${quote(key)} is ignored here; it belongs ${home.description}`,
        entry.keyNode,
      );
      return;
    } else {
      const suggestion = closest(key, validHere);
      hint =
        suggestion !== undefined
          ? `did you mean '${suggestion}'?`
          : `valid keys here: ${validHere.join(', ')}`;
    }
    const shown = shortText(key);
    const path = parentPath === '' ? shown : `${parentPath}.${shown}`;
    this.sink.add(path, `config error, unknown key ${quote(key)}; ${hint}`, entry.keyNode);
  }

  private isScalarEntry(entry: MapEntry): boolean {
    return entry.value === null || isScalar(entry.value);
  }

  /** A string field. Plain numbers and booleans keep their source text (`value: 429`). */
  private string(entry: MapEntry, path: string, example: string): string | undefined {
    // An empty value (`key:`, `~`, `null`) is resolved to null, never a Scalar holding null.
    const node = entry.value;
    if (node === null) return '';
    if (isScalar(node)) {
      const value: unknown = node.value;
      if (typeof value === 'string') return value;
      // Numbers, booleans and timestamps keep the text as written, as the reference's decoder does.
      if (typeof value === 'number' || typeof value === 'boolean' || value instanceof Date) {
        return node.source ?? String(value);
      }
    }
    this.sink.add(
      path,
      `${entry.key} must be a string (for example ${example}), not ${describeNode(node)}`,
      node,
    );
    return undefined;
  }

  private bool(entry: MapEntry, path: string): boolean {
    const node = entry.value;
    if (node === null) return false;
    if (isScalar(node) && typeof node.value === 'boolean') return node.value;
    const quoted =
      isScalar(node) && typeof node.value === 'string' && /^(true|false)$/i.test(node.value);
    this.sink.add(
      path,
      `${entry.key} must be true or false, not ${describeNode(node)}` +
        (quoted ? '; write it without quotes' : ''),
      node,
    );
    return false;
  }

  private uint32(entry: MapEntry, path: string): number | undefined {
    const node = entry.value;
    if (node === null) return 0;
    if (isScalar(node)) {
      // Read as the reference's YAML library reads it (so `1:30` is text, `0x10` is 16).
      const kind = goScalarKind(node);
      if (kind === 'float' || kind === 'uint64') return undefined; // reported by checkGoScalar
      const value =
        (kind === 'int' ? goParseInt((node.source ?? '').replace(/_/g, '')) : undefined) ?? -1n;
      if (value >= 0n && value <= BigInt(MAX_UINT32)) return Number(value);
    }
    const quoted = isScalar(node) && typeof node.value === 'string' && /^\d+$/.test(node.value);
    this.sink.add(
      path,
      `${entry.key} must be a whole number from 0 to ${MAX_UINT32}, not ${describeNode(node)}` +
        (quoted ? '; write it without quotes' : ''),
      node,
    );
    return undefined;
  }
}

interface Definition {
  readonly file: string;
  readonly position: SourcePosition | undefined;
}

/** key -> value -> first definition, for one level of one domain. */
/**
 * Definitions of one descriptor level by the reference's composite key `key` or `key_value`: the
 * reference indexes on that joined string, so `key: a_b` and `key: a, value: b` collide there and
 * are rejected here too.
 */
type LevelIndex = Map<string, Definition>;

function checkFileSet(
  configs: readonly (FileConfig | undefined)[],
  perFile: ConfigProblem[][],
  merge: boolean,
): void {
  const domains = new Map<string, { file: string; level: LevelIndex }>();
  configs.forEach((config, index) => {
    if (config === undefined || config.domain === '') return;
    const problems = perFile[index]!;
    const owner = domains.get(config.domain);
    let level: LevelIndex;
    if (owner === undefined) {
      level = new Map();
      domains.set(config.domain, { file: config.file, level });
    } else if (merge) {
      level = owner.level;
    } else {
      problems.push({
        file: config.file,
        path: 'domain',
        message:
          `duplicate domain ${quote(config.domain)} in config file; it is already defined in ${owner.file} ` +
          '(set MERGE_DOMAIN_CONFIG=true to merge files of one domain)' +
          at(config.domainPosition),
      });
      level = new Map();
    }
    checkCompositeKeys(config.file, config.descriptors, level, `${config.domain}.`, problems);
  });
}

function checkCompositeKeys(
  file: string,
  descriptors: readonly DescriptorConfig[],
  level: LevelIndex,
  parentKey: string,
  problems: ConfigProblem[],
): void {
  for (const descriptor of descriptors) {
    const finalKey =
      descriptor.value === '' ? descriptor.key : `${descriptor.key}_${descriptor.value}`;
    const fullKey = parentKey + finalKey;
    const previous = level.get(finalKey);
    if (previous === undefined) {
      level.set(finalKey, { file, position: descriptor.position });
    } else {
      const where = previous.file === file ? '' : ` of ${previous.file}`;
      const first =
        previous.position === undefined ? '' : ` at ${formatPosition(previous.position)}${where}`;
      problems.push({
        file,
        path: descriptor.path,
        message:
          `duplicate descriptor composite key ${quote(fullKey)}; it is first defined${first}` +
          at(descriptor.position),
      });
    }
    checkCompositeKeys(file, descriptor.descriptors, new Map(), `${fullKey}.`, problems);
  }
}

function at(position: SourcePosition | undefined): string {
  return position === undefined ? '' : ` (${formatPosition(position)})`;
}

function closest(key: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  for (const candidate of candidates) {
    const distance = editDistance(key.toLowerCase(), candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * A `metadata` node as the reference hands it to google.protobuf.Struct: mappings with every key
 * as text (merge keys applied, the last of a repeated key winning), lists, and scalars as YAML 1.1
 * reads them; a timestamp stays the text it was written as.
 */
function yamlToJson(node: YamlNode | null, resolve: (node: unknown) => YamlNode | null): JsonValue {
  if (isMap(node)) {
    const out: Record<string, JsonValue> = {};
    for (const pair of node.items) {
      const keyNode = pair.key as YamlAnyNode | null;
      if (isMergeKey(keyNode)) {
        const sources = resolve(pair.value);
        const list = isSeq(sources) ? sources.items.map((item) => resolve(item)) : [sources];
        for (const source of list) {
          if (!isMap(source)) continue;
          const merged = yamlToJson(source, resolve) as Record<string, JsonValue>;
          for (const name of Object.keys(merged)) if (!(name in out)) out[name] = merged[name]!;
        }
        continue;
      }
      const key = isScalar(keyNode) ? String(keyNode.value) : String(keyNode);
      out[key] = yamlToJson(resolve(pair.value), resolve);
    }
    return out;
  }
  if (isSeq(node)) return node.items.map((item) => yamlToJson(resolve(item), resolve));
  if (isScalar(node)) {
    const value: unknown = node.value;
    // An empty value is resolved to null before it gets here, and anything unknown is null below.
    if (typeof value === 'boolean' || typeof value === 'string') return value;
    // Whole numbers too (never a bigint: the file is parsed without `intAsBigInt`).
    if (typeof value === 'number') return value;
    if (value instanceof Date) return node.source ?? value.toISOString();
  }
  return null;
}
