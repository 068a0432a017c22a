/**
 * The config-source seam: where rule sets come from (files on disk, or an xDS management server)
 * behind one small interface, and the one place that swaps a new snapshot in, counts
 * `config_load_success` / `config_load_error` and logs. Every source validates with the same
 * `buildSnapshot` (every problem of every rule set), so a rule set means the same whatever brought
 * it. A new source implements {@link RuleSource} and is chosen in app.ts.
 */
import { ConfigError, cutText, formatConfigProblem, SluiceError } from '../errors.js';
import type { Logger } from '../logging/logger.js';
import { loadSnapshot } from './load.js';
import type { ConfigSnapshot, DomainInfo, LimitMatch } from './types.js';
import type { ConfigOptions } from './validate.js';
import { watchConfig, type ConfigWatcher } from './watch.js';

/** Receives what a source delivers. Never throws back into the source. */
export interface RuleSourceListener {
  /** A new rule set passed validation: serve it from now on. */
  onSnapshot(snapshot: ConfigSnapshot): void;
  /**
   * A rule set failed validation (a ConfigError with every problem) or could not be read: the
   * rules serving now keep serving.
   */
  onError(error: ConfigError | Error): void;
}

/** A source of rule sets. */
export interface RuleSource {
  /** What the logs call it: `file` or `xds`. */
  readonly kind: 'file' | 'xds';
  /**
   * Start delivering to `listener`. Resolves once the first update was delivered: for files, the
   * first load (rejects with a ConfigError when it is invalid, which stops the start); for xDS,
   * the first response from the server, valid or not (never rejects).
   */
  start(listener: RuleSourceListener): Promise<void>;
  /** Stop: no callback afterwards. Idempotent. */
  close(): void;
}

/** Options of {@link createFileSource}. */
export interface FileSourceOptions extends ConfigOptions {
  /** Rule files and directories. */
  readonly paths: readonly string[];
  /** Watch them and reload on change (default true). */
  readonly watch?: boolean;
  /** The watcher's safety-net poll in ms (see WatchOptions.pollIntervalMs). */
  readonly pollIntervalMs?: number;
  /** `BuildOptions.onProgress` of every load's build (see ./offthread.ts). */
  readonly onBuildProgress?: ((recordsBuilt: number) => void) | undefined;
}

/**
 * Rules from files (`CONFIG_TYPE=FILE`): the first load, then a hot reload on every change. The
 * watcher is in place before the first load, so a change made during that load is seen; a
 * snapshot it builds is never older than the first's.
 */
export function createFileSource(options: FileSourceOptions): RuleSource {
  let watcher: ConfigWatcher | undefined;
  let closed = false;
  // Stops the first load's build when the source closes during it.
  const abort = new AbortController();
  return {
    kind: 'file',
    async start(listener) {
      let reloaded = false;
      watcher =
        options.watch === false
          ? undefined
          : watchConfig({
              paths: options.paths,
              mergeDomainConfigs: options.mergeDomainConfigs,
              defaultAlgorithm: options.defaultAlgorithm,
              maxRulesPerFile: options.maxRulesPerFile,
              maxRules: options.maxRules,
              algorithmRefusal: options.algorithmRefusal,
              pollIntervalMs: options.pollIntervalMs,
              onBuildProgress: options.onBuildProgress,
              onSnapshot(snapshot) {
                reloaded = true;
                listener.onSnapshot(snapshot);
              },
              onError: (error) => listener.onError(error),
            });
      try {
        await watcher?.ready;
        const initial = await loadSnapshot(options.paths, {
          mergeDomainConfigs: options.mergeDomainConfigs,
          defaultAlgorithm: options.defaultAlgorithm,
          maxRulesPerFile: options.maxRulesPerFile,
          maxRules: options.maxRules,
          algorithmRefusal: options.algorithmRefusal,
          signal: abort.signal,
          onProgress: options.onBuildProgress,
        });
        if (closed) return;
        // A reload that finished during the first load is newer: keep it.
        if (!reloaded) listener.onSnapshot(initial);
      } catch (error) {
        watcher?.close();
        throw error;
      }
    },
    close() {
      closed = true;
      abort.abort();
      watcher?.close();
    },
  };
}

/** The message calls get before any rule set arrived (the reference's words). */
const NO_CONFIG_MESSAGE = 'no rate limit configuration loaded';

/**
 * The snapshot that serves before the first rule set of an xDS source (with
 * `FORCE_START_WITHOUT_INITIAL_CONFIG`): no domains, and every lookup fails with NO_CONFIG, so a
 * call is answered with an error as the reference answers it, never with a silent OK.
 */
export const NO_RULES: ConfigSnapshot = Object.freeze({
  files: [],
  warnings: [],
  domains: new Map<string, DomainInfo>(),
  getLimit(): LimitMatch | undefined {
    throw new SluiceError('NO_CONFIG', NO_CONFIG_MESSAGE);
  },
  dump: () => [],
});

/** Counters the swap updates (`Metrics.service`). */
export interface ConfigLoadCounters {
  /** `config_load_success`. */
  configLoadSuccess: number;
  /** `config_load_error`. */
  configLoadError: number;
}

/** Options of {@link createServingConfig}. */
export interface ServingConfigOptions {
  /** The `config` module logger. */
  readonly logger: Logger;
  /** Updated on every delivery. */
  readonly counters: ConfigLoadCounters;
  /** Names the source in the first load's log line (`file`, `xds`, or the file origin). */
  readonly origin: string;
  /** The rule paths a file source reads, named when a rule set has no domains; `undefined`: xDS. */
  readonly paths?: readonly string[] | undefined;
}

/** The serving rules and the listener that swaps them. */
export interface ServingConfig extends RuleSourceListener {
  /** The snapshot serving now ({@link NO_RULES} until the first valid rule set). */
  current(): ConfigSnapshot;
  /** Whether any rule set was loaded yet. */
  loaded(): boolean;
}

/** Hold the serving snapshot: swap atomically, count, log (every problem of a refused set). */
export function createServingConfig(options: ServingConfigOptions): ServingConfig {
  const { logger, counters } = options;
  let current: ConfigSnapshot = NO_RULES;
  let loaded = false;
  return {
    current: () => current,
    loaded: () => loaded,
    onSnapshot(snapshot) {
      counters.configLoadSuccess++;
      current = snapshot;
      const msg = loaded
        ? 'rate limit config reloaded'
        : `rate limit config loaded from ${options.origin} source`;
      loaded = true;
      const fields = {
        files: boundNames(snapshot.files),
        domains: boundNames([...snapshot.domains.keys()]),
      };
      if (snapshot.domains.size === 0) {
        // Every call is answered OK from now on: say so loudly (sluice_config_domains is 0 too).
        logger.warn(
          options.paths === undefined ? fields : { ...fields, paths: options.paths },
          `${msg} with no domains: nothing is rate limited until a rule file is added`,
        );
      } else {
        logger.info(fields, msg);
      }
      if (snapshot.warnings.length > 0) {
        logger.warn(
          { warnings: snapshot.warnings.map(formatConfigProblem) },
          'rate limit config warnings',
        );
      }
    },
    onError(error) {
      counters.configLoadError++;
      const problems =
        error instanceof ConfigError
          ? error.problems.map(formatConfigProblem)
          : [cutText(error.message, MAX_LOGGED_MESSAGE_LENGTH)];
      logger.error(
        { problems },
        loaded
          ? 'rate limit config reload failed; the previous config keeps serving'
          : 'rate limit config refused; no rules are serving yet',
      );
    },
  };
}

/** Longest message of an unexpected load failure a log line echoes, in characters. */
const MAX_LOGGED_MESSAGE_LENGTH = 4096;

/** Most file or domain names one log line lists. */
const MAX_LOGGED_NAMES = 20;

/** Longest name a log line echoes, in characters (an xDS resource name can be a megabyte). */
const MAX_LOGGED_NAME_LENGTH = 256;

/** The first names of a list for a log line, each cut, then `and N more` when some are left out. */
function boundNames(names: readonly string[]): string[] {
  const listed = names
    .slice(0, MAX_LOGGED_NAMES)
    .map((name) => cutText(name, MAX_LOGGED_NAME_LENGTH));
  if (names.length > listed.length) listed.push(`and ${names.length - listed.length} more`);
  return listed;
}
