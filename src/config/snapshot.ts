/**
 * The immutable ConfigSnapshot: files -> parse -> validate -> build, in one call.
 */
import { DEFAULT_ALGORITHM } from '../algorithms/index.js';
import type { RequestDescriptor } from '../model.js';
import { boundProblems, ConfigError, type ConfigProblem } from '../errors.js';
import type { Algorithm, ConfigLevel, ConfigSnapshot, DomainInfo, LimitMatch } from './types.js';
import { buildDomains, type BuiltDomain } from './build.js';
import { findLimit, overrideLimit } from './match.js';
import {
  validateFiles,
  type ConfigFileInput,
  type ConfigOptions,
  type FileConfig,
} from './validate.js';

/**
 * Build a snapshot from file contents. Files are taken in name order (which decides the order of
 * merged domains' wildcards). Throws a ConfigError listing every problem of every file.
 */
export function buildSnapshot(
  files: readonly ConfigFileInput[],
  options: ConfigOptions = {},
): ConfigSnapshot {
  const sorted = [...files].sort((a, b) => compareNames(a.name, b.name));
  const { configs, problems, warnings } = validateFiles(sorted, options);
  if (problems.length > 0) throw new ConfigError(problems);
  const valid = configs.filter((config): config is FileConfig => config !== undefined);
  return new Snapshot(
    sorted.map((file) => file.name),
    buildDomains(valid, options.defaultAlgorithm),
    warnings,
    options.defaultAlgorithm ?? DEFAULT_ALGORITHM,
    warnings.length,
  );
}

/**
 * The snapshot of built domains (see `DomainsBuilder`): `files` sorted, `warnings` the first of
 * `warningCount` (only the first are kept, see `boundProblems`).
 */
export function createSnapshot(
  files: readonly string[],
  built: ReadonlyMap<string, BuiltDomain>,
  warnings: readonly ConfigProblem[],
  defaultAlgorithm: Algorithm,
  warningCount: number = warnings.length,
): ConfigSnapshot {
  return new Snapshot(files, built, warnings, defaultAlgorithm, warningCount);
}

/** Plain code-unit order, so the order never depends on the locale. */
export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

class Snapshot implements ConfigSnapshot {
  readonly files: readonly string[];
  readonly warnings: readonly ConfigProblem[];
  readonly domains: ReadonlyMap<string, DomainInfo>;
  readonly #roots: ReadonlyMap<string, ConfigLevel>;
  readonly #dump: readonly string[];
  readonly #defaultAlgorithm: Algorithm;

  constructor(
    files: readonly string[],
    built: ReadonlyMap<string, BuiltDomain>,
    warnings: readonly ConfigProblem[],
    defaultAlgorithm: Algorithm,
    warningCount: number,
  ) {
    this.#defaultAlgorithm = defaultAlgorithm;
    this.files = Object.freeze([...files]);
    // Bounded like a refused set's problems: they go to the log and the console.
    this.warnings = Object.freeze(boundProblems(warnings, warningCount, 'warnings'));
    const infos = new Map<string, DomainInfo>();
    const roots = new Map<string, ConfigLevel>();
    const lines: string[] = [];
    for (const [name, domain] of built) {
      infos.set(name, Object.freeze({ name, files: Object.freeze([...domain.files]) }));
      roots.set(name, domain.root);
      lines.push(...domain.dumpLines);
    }
    this.domains = new ReadonlyMapView(infos);
    this.#roots = roots;
    this.#dump = Object.freeze(lines.sort(compareNames));
    Object.freeze(this);
  }

  getLimit(domain: string, descriptor: RequestDescriptor): LimitMatch | undefined {
    const root = this.#roots.get(domain);
    if (root === undefined) return undefined;
    if (descriptor.limit !== undefined)
      return overrideLimit(domain, descriptor, this.#defaultAlgorithm);
    return findLimit(root, descriptor);
  }

  dump(): string[] {
    return [...this.#dump];
  }

  tree(domain: string): ConfigLevel | undefined {
    return this.#roots.get(domain);
  }
}

/** A read-only view of a Map: no `set`/`delete`/`clear` to reach, even through a cast. */
class ReadonlyMapView<K, V> implements ReadonlyMap<K, V> {
  readonly #map: Map<K, V>;

  constructor(map: Map<K, V>) {
    this.#map = map;
    Object.freeze(this);
  }

  get size(): number {
    return this.#map.size;
  }

  get(key: K): V | undefined {
    return this.#map.get(key);
  }

  has(key: K): boolean {
    return this.#map.has(key);
  }

  forEach(callback: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    this.#map.forEach((value, key) => callback.call(thisArg, value, key, this));
  }

  entries(): MapIterator<[K, V]> {
    return this.#map.entries();
  }

  keys(): MapIterator<K> {
    return this.#map.keys();
  }

  values(): MapIterator<V> {
    return this.#map.values();
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.#map[Symbol.iterator]();
  }
}
