/**
 * The registry of counting algorithms: the one list to extend with a new one. Each module is the
 * definition of its algorithm (docs/semantics.md §4, docs/algorithms.md) and exports one
 * {@link AlgorithmDescriptor}; the name type, the lookups below, the counter key tags
 * (limiter/keys.ts), the config bounds (config/validate.ts) and the Redis apply script
 * (stores/redis/apply-script.ts) are all derived from this list.
 */
import { fixedWindowAlgorithm } from './fixed-window.js';
import { slidingLogAlgorithm } from './sliding-log.js';
import { slidingWindowAlgorithm } from './sliding-window.js';
import { tokenBucketAlgorithm } from './token-bucket.js';
import type { AlgorithmDescriptor, CounterAlgorithm } from './types.js';

export * from './types.js';

/** Every algorithm, in documentation order. */
const REGISTRY = [
  slidingWindowAlgorithm,
  fixedWindowAlgorithm,
  tokenBucketAlgorithm,
  slidingLogAlgorithm,
] as const;

/** Counting algorithms (`rate_limit.algorithm`); see docs/algorithms.md for when to pick which. */
export type Algorithm = (typeof REGISTRY)[number]['name'];

/** The algorithm of a limit that names none, unless `DEFAULT_ALGORITHM` says otherwise. */
export const DEFAULT_ALGORITHM: Algorithm = 'sliding_window';

/**
 * `list` when its names, key tags and Redis codes are well formed and distinct; throws otherwise
 * (at startup: two algorithms sharing a tag would share counters).
 */
export function checkRegistry<D extends AlgorithmDescriptor>(list: readonly D[]): readonly D[] {
  const seen = new Set<string>();
  for (const algorithm of list) {
    const { name, tag, redisCode } = algorithm;
    if (!/^[a-z][a-z0-9_]*$/.test(name)) throw new Error(`algorithm name ${name}: not lower case`);
    // The tag is a counter key part and, upper-cased, a Lua identifier.
    if (!/^[a-z][a-z0-9]*$/.test(tag)) throw new Error(`algorithm ${name}: bad tag ${tag}`);
    if (!Number.isInteger(redisCode) || redisCode < 1) {
      throw new Error(`algorithm ${name}: Redis code ${redisCode} is not a positive integer`);
    }
    for (const id of [`name ${name}`, `tag ${tag}`, `code ${redisCode}`]) {
      if (seen.has(id)) throw new Error(`two algorithms share the ${id}`);
      seen.add(id);
    }
  }
  return list;
}

/** Every algorithm's descriptor, in documentation order. */
export const ALGORITHM_DESCRIPTORS: readonly AlgorithmDescriptor<Algorithm>[] = Object.freeze(
  checkRegistry<AlgorithmDescriptor<Algorithm>>(REGISTRY),
);

/** Every algorithm's name, in documentation order. */
export const ALGORITHMS: readonly Algorithm[] = Object.freeze(
  ALGORITHM_DESCRIPTORS.map((algorithm) => algorithm.name),
);

/** One value per algorithm, `pick`ed from its descriptor, by algorithm name. */
function byName<T>(pick: (algorithm: AlgorithmDescriptor<Algorithm>) => T): Record<Algorithm, T> {
  return Object.fromEntries(
    ALGORITHM_DESCRIPTORS.map((algorithm) => [algorithm.name, pick(algorithm)]),
  ) as Record<Algorithm, T>;
}

/** Each algorithm's descriptor by name. */
export const ALGORITHM_BY_NAME: Readonly<Record<Algorithm, AlgorithmDescriptor<Algorithm>>> =
  Object.freeze(byName((algorithm) => algorithm));

/** The steps of each algorithm. */
export const ALGORITHM_STEPS: Readonly<Record<Algorithm, CounterAlgorithm>> = Object.freeze(
  byName((algorithm) => algorithm.steps),
);
