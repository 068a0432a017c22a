/**
 * Node tree -> validated, typed file configs. Checks every key, type and rule of the reference's
 * format and collects every problem (never stops at the first), then checks the file set as a
 * whole (duplicate domains, duplicate composite keys, merging).
 *
 * Messages follow the reference's texts (src/config/config_impl.go in envoyproxy/ratelimit) and
 * add where the problem is and what to write instead.
 */
import type { ConfigProblem } from '../errors.js';
import { DEFAULT_ALGORITHM, type Algorithm } from '../algorithms/index.js';
import type { AlgorithmRefusal, DescriptorConfig, FileConfig } from './file-config.js';
import { formatPosition, parseConfigYaml, quote, type SourcePosition } from './parse.js';
import { Walker } from './validate-descriptor.js';

// The validated types and the format's keys live in file-config.ts; the rest of sluice imports
// them from here, the entry to validation.
export type {
  AlgorithmRefusal,
  DescriptorConfig,
  FileConfig,
  RateLimitConfig,
} from './file-config.js';
export { DESCRIPTOR_KEYS, RATE_LIMIT_KEYS } from './file-config.js';

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
  /**
   * Algorithms the store cannot count (e.g. `REDIS_MODE=cached`, docs/cached-mode.md): a limit
   * using one, named or by default, is refused. `undefined`: every algorithm is accepted.
   */
  readonly algorithmRefusal?: AlgorithmRefusal | undefined;
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
      const walker = new Walker(
        parsed,
        options.defaultAlgorithm ?? DEFAULT_ALGORITHM,
        allowed,
        options.algorithmRefusal,
      );
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

interface Definition {
  readonly file: string;
  readonly position: SourcePosition | undefined;
}

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
