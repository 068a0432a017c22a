/**
 * Building a large rule set without stalling the serving path. Parsing and validating YAML is
 * synchronous and slow (about 7 s for 100,000 rules), so above {@link INLINE_MAX_BYTES} it runs
 * in a worker thread (node:worker_threads), one per load, which ends with the load and takes its
 * memory with it. The worker hands the valid set over as plain build records, one slice of
 * {@link RECORDS_PER_SLICE} at a time and only when asked for the next, and the serving thread
 * adds each slice to the tree (`DomainsBuilder`); between two slices the event loop turns, so
 * calls are answered while the tree grows. The new snapshot is swapped in only once complete, and
 * a refused set never replaces the serving one, exactly as with the inline build.
 *
 * The worker's module is the caller's (`BuildJob.worker`): `config/build-worker.ts` for rule
 * files, `transport/xds/build-worker.ts` for xDS resources, which also decodes the protobuf
 * there. Both run {@link serveBuildJob} with the job's own `prepare`.
 */
import { parentPort, Worker, workerData } from 'node:worker_threads';
import { DEFAULT_ALGORITHM } from '../algorithms/index.js';
import { ConfigError, MAX_LISTED_PROBLEMS, type ConfigProblem } from '../errors.js';
import { DomainsBuilder, flattenConfigs, type BuildRecord } from './build.js';
import { compareNames, createSnapshot } from './snapshot.js';
import type { ConfigSnapshot } from './types.js';
import {
  validateFiles,
  type ConfigFileInput,
  type ConfigOptions,
  type FileConfig,
} from './validate.js';

/**
 * Largest input, in bytes (rule file text, or xDS resource bytes), built on the serving thread
 * itself: about 300 rules, validated in well under 100 ms, where starting a worker would cost
 * more than it saves.
 */
const INLINE_MAX_BYTES = 32 * 1024;

/**
 * Build records per slice the worker sends: about 10 ms of tree building on the serving thread
 * (100,000 rules take about 400 ms), plus the cost of receiving them.
 */
export const RECORDS_PER_SLICE = 2_000;

/** What a job's `prepare` makes of its input: rule sets to validate, and problems found so far. */
export interface PreparedRuleSets {
  /** Rule sets in the rule file format. */
  readonly inputs: readonly ConfigFileInput[];
  /** Problems found before validation (unreadable files, undecodable resources). */
  readonly problems: readonly ConfigProblem[];
}

/** How one kind of source turns its input into a snapshot. */
export interface BuildJob<T> {
  /** The worker module: it calls {@link serveBuildJob} with this job's `prepare`. */
  readonly worker: URL;
  /** Input -> rule sets; runs in the worker (or inline for a small input). Never throws. */
  prepare(data: T): PreparedRuleSets;
  /** Rewrites each validation problem before it is reported (default: as is). */
  readonly mapProblem?: (problem: ConfigProblem) => ConfigProblem;
}

/** Options of {@link buildSnapshotFrom}. */
export interface BuildOptions extends ConfigOptions {
  /** Stops the build: the worker ends and the promise rejects. */
  readonly signal?: AbortSignal | undefined;
  /**
   * Called after each slice is added to the tree, with the number of build records added so far
   * (files and descriptors), and once more with the total when the tree is complete.
   */
  readonly onProgress?: ((recordsBuilt: number) => void) | undefined;
}

/** The worker's answer to the job: refused with problems, or valid with this many records. */
type Verdict =
  | { readonly kind: 'invalid'; readonly problems: ConfigProblem[]; readonly total: number }
  | {
      readonly kind: 'valid';
      readonly files: string[];
      readonly warnings: ConfigProblem[];
      readonly warningCount: number;
      readonly records: number;
    };

/** A message from the worker. */
type WorkerMessage =
  Verdict | { readonly kind: 'slice'; readonly records: BuildRecord[] } | { readonly kind: 'done' };

/** What the worker starts with. */
interface WorkerInput {
  readonly data: unknown;
  readonly options: ConfigOptions;
}

/**
 * Build a snapshot from `data`: inline when `sizeBytes` is at most {@link INLINE_MAX_BYTES}, else
 * in a worker thread, handed over in slices. Rejects with a ConfigError listing the problems of a
 * refused set, or with an Error when the worker fails or `signal` aborts.
 */
export async function buildSnapshotFrom<T>(
  job: BuildJob<T>,
  data: T,
  sizeBytes: number,
  options: BuildOptions = {},
): Promise<ConfigSnapshot> {
  options.signal?.throwIfAborted();
  const configOptions = plainOptions(options);
  if (sizeBytes <= INLINE_MAX_BYTES) {
    const verdict = judge(job, data, configOptions);
    if (verdict.kind === 'invalid') throw new ConfigError(verdict.problems, verdict.total);
    const builder = new DomainsBuilder(options.defaultAlgorithm);
    for (const record of verdict.valid) builder.add(record);
    options.onProgress?.(verdict.valid.length);
    return createSnapshot(verdict.files, builder.domains(), verdict.warnings, defaultOf(options));
  }
  return buildInWorker(job.worker, data, configOptions, options);
}

/** The ConfigOptions part of `options` (what crosses to the worker). */
function plainOptions(options: ConfigOptions): ConfigOptions {
  return {
    mergeDomainConfigs: options.mergeDomainConfigs,
    defaultAlgorithm: options.defaultAlgorithm,
    maxRulesPerFile: options.maxRulesPerFile,
    maxRules: options.maxRules,
    algorithmRefusal: options.algorithmRefusal,
  };
}

function defaultOf(options: ConfigOptions): NonNullable<ConfigOptions['defaultAlgorithm']> {
  return options.defaultAlgorithm ?? DEFAULT_ALGORITHM;
}

/** Prepare and validate: the problems of a refused set, or the records of a valid one. */
function judge<T>(
  job: Omit<BuildJob<T>, 'worker'>,
  data: T,
  options: ConfigOptions,
):
  | { kind: 'invalid'; problems: ConfigProblem[]; total: number }
  | { kind: 'valid'; files: string[]; warnings: ConfigProblem[]; valid: BuildRecord[] } {
  const prepared = job.prepare(data);
  const sorted = [...prepared.inputs].sort((a, b) => compareNames(a.name, b.name));
  const validation = validateFiles(sorted, options);
  const map = job.mapProblem ?? ((problem: ConfigProblem) => problem);
  const total = prepared.problems.length + validation.problems.length;
  if (total > 0) {
    // Only the listed ones cross to the serving thread; the rest are counted.
    const problems = [...prepared.problems, ...validation.problems]
      .slice(0, MAX_LISTED_PROBLEMS)
      .map(map);
    return { kind: 'invalid', problems, total };
  }
  const configs = validation.configs.filter((c): c is FileConfig => c !== undefined);
  return {
    kind: 'valid',
    files: sorted.map((input) => input.name),
    warnings: validation.warnings.map(map),
    valid: flattenConfigs(configs),
  };
}

/** The serving thread's side: start the worker, take the slices as they come, build. */
function buildInWorker(
  url: URL,
  data: unknown,
  configOptions: ConfigOptions,
  options: BuildOptions,
): Promise<ConfigSnapshot> {
  return new Promise<ConfigSnapshot>((resolve, reject) => {
    const input: WorkerInput = { data, options: configOptions };
    const worker = new Worker(url, { workerData: input });
    const builder = new DomainsBuilder(options.defaultAlgorithm);
    let verdict: Extract<Verdict, { kind: 'valid' }> | undefined;
    let built = 0;
    let settled = false;
    const finish = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      options.signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      outcome();
    };
    const askNext = (): void => {
      if (!settled) worker.postMessage('next');
    };
    const onAbort = (): void => {
      finish(() => reject(new Error('the rule set build was stopped')));
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    worker.on('message', (message: WorkerMessage) => {
      if (settled) return;
      try {
        switch (message.kind) {
          case 'invalid':
            finish(() => reject(new ConfigError(message.problems, message.total)));
            return;
          case 'valid':
            verdict = message;
            worker.postMessage('next');
            return;
          case 'slice':
            for (const record of message.records) builder.add(record);
            built += message.records.length;
            options.onProgress?.(built);
            // Asked for only after the event loop has turned: a slice that came in while this
            // one was built would be handled in the same turn, and so would the next.
            setImmediate(askNext);
            return;
          case 'done': {
            const valid = verdict;
            if (valid === undefined || built !== valid.records) {
              throw new Error(`the build worker sent ${built} of ${valid?.records ?? 0} records`);
            }
            const snapshot = createSnapshot(
              valid.files,
              builder.domains(),
              valid.warnings,
              defaultOf(options),
              valid.warningCount,
            );
            finish(() => resolve(snapshot));
            return;
          }
        }
      } catch (error) {
        finish(() => reject(error instanceof Error ? error : new Error(String(error))));
      }
    });
    worker.on('error', (error) => {
      finish(() => reject(new Error(`the rule set build failed: ${error.message}`)));
    });
    worker.on('exit', (code) => {
      finish(() => reject(new Error(`the rule set build stopped early (worker exit ${code})`)));
    });
  });
}

/**
 * The worker's side: prepare and validate the job's input, send the verdict, then the build
 * records one slice per `next` asked, then `done`. Call it from the job's worker module.
 */
export function serveBuildJob<T>(job: Omit<BuildJob<T>, 'worker'>): void {
  const port = parentPort;
  if (port === null) throw new Error('serveBuildJob runs in a worker thread');
  const input = workerData as WorkerInput;
  const verdict = judge(job, input.data as T, input.options);
  if (verdict.kind === 'invalid') {
    port.postMessage(verdict satisfies Verdict);
    port.close();
    return;
  }
  const { valid } = verdict;
  port.postMessage({
    kind: 'valid',
    files: verdict.files,
    warnings: verdict.warnings.slice(0, MAX_LISTED_PROBLEMS),
    warningCount: verdict.warnings.length,
    records: valid.length,
  } satisfies Verdict);
  let next = 0;
  port.on('message', () => {
    if (next >= valid.length) {
      port.postMessage({ kind: 'done' } satisfies WorkerMessage);
      port.close();
      return;
    }
    const records = valid.slice(next, next + RECORDS_PER_SLICE);
    next += records.length;
    port.postMessage({ kind: 'slice', records } satisfies WorkerMessage);
  });
}
