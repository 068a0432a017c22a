/**
 * The batch rule (docs/semantics.md §3), once for every store: one request is one batch of
 * counter specs, decided all or nothing.
 *
 * - Specs sharing a key are checked cumulatively, in order: spec `i` has room iff its counter
 *   fits the hits of every spec up to `i` on that key ({@link BatchKeys}).
 * - The batch is admitted iff every `enforced` spec has room and the quota rule does not reject
 *   ({@link admits}, {@link quotaRejects}).
 * - An admitted batch charges every spec with hits, `shadow` ones even when over, `quota` ones
 *   only when they had room ({@link charges}); a rejected one charges nothing.
 *
 * The memory store runs the whole rule through these functions. The Redis store uses them on
 * its client side (the local over-limit cache's cumulative hits, the merge of several script
 * calls); the check and charge themselves must run inside one Lua script to be atomic, so
 * apply-script.ts keeps a server-side copy of this rule in Lua. The store contract tests run
 * both stores through the same batches to keep the two copies in step. A dry run of a batch (the
 * console's "try it") is decided here too: {@link checkBatch}.
 */
import { SluiceError } from '../errors.js';
import type { BatchResult, CounterResult, CounterSpec, CounterStore } from './counter-store.js';

/** Batches longer than this find each spec's first spec with a map, shorter ones with a scan. */
const SCAN_LIMIT = 16;

/**
 * How the specs of one batch share keys, with reusable arrays (a store keeps one instance and
 * calls {@link BatchKeys.group} per batch; only the first `specs.length` entries are meaningful).
 */
export class BatchKeys {
  /** Index of the first spec of the batch with the same key as each spec (itself when none). */
  // Stryker disable next-line ArrayDeclaration: group() writes every entry it makes meaningful.
  readonly firstOf: number[] = [];
  /** Each spec's hits plus those of the earlier specs on its key: what it is checked with. */
  readonly cumHits: number[] = [];
  /** Running hits on the key of each first spec (indexed by first spec). */
  // Stryker disable next-line ArrayDeclaration: group() writes each entry before it reads it.
  private readonly keyHits: number[] = [];

  /** Fill {@link firstOf} and {@link cumHits} for `specs`. */
  group(specs: readonly CounterSpec[]): void {
    const { firstOf, cumHits, keyHits } = this;
    const count = specs.length;
    // A scan is quadratic, and MAX_DESCRIPTORS_PER_REQUEST allows up to 100,000 descriptors.
    // Stryker disable next-line ConditionalExpression,EqualityOperator: the map and the scan find the same first spec.
    const firstByKey = count > SCAN_LIMIT ? new Map<string, number>() : undefined;
    for (let i = 0; i < count; i++) {
      const spec = specs[i]!;
      const key = spec.key;
      let first = i;
      // Stryker disable next-line ConditionalExpression: the map and the scan find the same first spec.
      if (firstByKey === undefined) {
        // Stryker disable next-line EqualityOperator: j = i finds spec i itself, the default.
        for (let j = 0; j < i; j++) {
          if (specs[j]!.key === key) {
            first = j;
            break;
          }
        }
      } else {
        first = firstByKey.get(key) ?? i;
        if (first === i) firstByKey.set(key, i);
      }
      firstOf[i] = first;
      const hits = first === i ? spec.hits : keyHits[first]! + spec.hits;
      keyHits[first] = hits;
      cumHits[i] = hits;
    }
  }
}

/** Each spec's cumulative hits (see {@link BatchKeys.cumHits}), in a new array. */
export function cumulativeHits(specs: readonly CounterSpec[]): number[] {
  const keys = new BatchKeys();
  keys.group(specs);
  // A fresh instance: its array holds exactly one entry per spec.
  return keys.cumHits;
}

/**
 * The quota rule of a batch: true when at least one spec has a `quotaGroup` and every group
 * holds a spec that lacks room (`over[i]`).
 */
export function quotaRejects(specs: readonly CounterSpec[], over: readonly boolean[]): boolean {
  let groups: Map<number, boolean> | undefined;
  for (let i = 0; i < specs.length; i++) {
    const group = specs[i]!.quotaGroup;
    if (group === undefined) continue;
    groups ??= new Map();
    if (over[i] === true) groups.set(group, true);
    else if (!groups.has(group)) groups.set(group, false);
  }
  if (groups === undefined) return false;
  for (const isOver of groups.values()) if (!isOver) return false;
  return true;
}

/**
 * Whether a batch is admitted, given which specs lack room (`over[i]`, checked with their
 * cumulative hits): every `enforced` spec has room and {@link quotaRejects} is false.
 */
export function admits(specs: readonly CounterSpec[], over: readonly boolean[]): boolean {
  // Stryker disable next-line BooleanLiteral: only saves the quota pass (see the return)
  let grouped = false;
  for (let i = 0; i < specs.length; i++) {
    const spec = specs[i]!;
    if (spec.mode === 'enforced' && over[i] === true) return false;
    // Stryker disable next-line ConditionalExpression: only saves the quota pass (see the return)
    if (spec.quotaGroup !== undefined) grouped = true;
  }
  // Most batches have no quota group: the second pass would find none (a few % of the memory
  // store's hot path, BENCHMARKS.md "Change from the previous run").
  // Stryker disable next-line ConditionalExpression: only saves the call; quotaRejects answers false without a group
  return !grouped || !quotaRejects(specs, over);
}

/** Whether an admitted batch charges `spec`, which lacked room when `over`. */
export function charges(spec: CounterSpec, over: boolean): boolean {
  return spec.hits > 0 && !(spec.mode === 'quota' && over);
}

/**
 * `store.apply(specs)` as a dry run (`CounterStore.check`): what the store would answer now,
 * charging nothing. A store without `check` (Redis: only its Lua reads its counters, and that
 * folder keeps one script) is asked with every spec's hits set to 0, which checks without
 * charging, and the batch rule above then decides in process on the room each counter reported.
 * The decision and each counter's room are the script's own as long as nothing else charges
 * those counters in between (test/unit/stores/dry-run.test.ts holds them equal to the memory store's
 * `check` for every algorithm); `resetMs` is the counter's as the peek read it, before this
 * request's hits (docs/operations-console.md, "Try it").
 */
export async function checkBatch(
  store: CounterStore,
  specs: readonly CounterSpec[],
): Promise<BatchResult> {
  if (store.check !== undefined) return store.check(specs);
  const peek = await store.apply(specs.map((spec) => ({ ...spec, hits: 0 })));
  const keys = new BatchKeys();
  keys.group(specs);
  const { firstOf, cumHits } = keys;
  const over = specs.map(
    (_spec, i) => peek.results[i]!.overLimit || peek.results[i]!.remaining < cumHits[i]!,
  );
  const admitted = admits(specs, over);
  // What each key is charged in all, as a result reads its counter after the whole batch.
  const charged = specs.map(() => 0);
  if (admitted) {
    specs.forEach((spec, i) => {
      if (charges(spec, over[i]!)) charged[firstOf[i]!]! += spec.hits;
    });
  }
  const results = specs.map((_spec, i): CounterResult => {
    const { remaining, resetMs } = peek.results[i]!;
    return over[i]!
      ? { overLimit: true, remaining: 0, resetMs }
      : { overLimit: false, remaining: Math.max(0, remaining - charged[firstOf[i]!]!), resetMs };
  });
  return { admitted, results };
}

/**
 * `apply()` of a store that decides synchronously (`applyNow`): its answer as a promise, and
 * what it throws as a rejected `SluiceError` instead of an exception at the call.
 */
export function applyThroughNow(
  store: Required<Pick<CounterStore, 'applyNow'>>,
  specs: readonly CounterSpec[],
): Promise<BatchResult> {
  try {
    return Promise.resolve(store.applyNow(specs));
  } catch (error) {
    return Promise.reject(SluiceError.from(error));
  }
}
