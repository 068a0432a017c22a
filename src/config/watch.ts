/**
 * Hot reload: watch the rule directories and rebuild a whole new snapshot when they change.
 */
import type { Algorithm } from '../algorithms/index.js';
import { watch, type FSWatcher } from 'node:fs';
import { lstat, realpath, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import type { ConfigError } from '../errors.js';
import type { ConfigSnapshot } from './types.js';
import type { ConfigOptions } from './validate.js';
import { isEditorTempName, isRuleFileName, scanConfigPaths, snapshotOfFiles } from './load.js';

/** Options of `watchConfig`. */
export interface WatchOptions {
  /** Files and directories to watch, as given to `loadSnapshot`. */
  readonly paths: readonly string[];
  /** Merge files of one domain (`MERGE_DOMAIN_CONFIG`); default false. */
  readonly mergeDomainConfigs?: boolean;
  /** The algorithm of limits that name none (`DEFAULT_ALGORITHM`); default sliding_window. */
  readonly defaultAlgorithm?: Algorithm;
  /** `ConfigOptions.maxRulesPerFile` (`CONFIG_MAX_RULES_PER_FILE`). */
  readonly maxRulesPerFile?: number;
  /** `ConfigOptions.maxRules` (`CONFIG_MAX_RULES`). */
  readonly maxRules?: number;
  /** `ConfigOptions.algorithmRefusal` (`REDIS_MODE=cached`). */
  readonly algorithmRefusal?: ConfigOptions['algorithmRefusal'];
  /** Quiet time after the first event of a burst before reloading, in ms; default 100. */
  readonly debounceMs?: number;
  /**
   * Safety net against missed file system events, in ms; default 5000, 0 disables. Every
   * interval the rule files are listed and stat'ed (no reading) and a reload happens only if that
   * fingerprint changed.
   */
  readonly pollIntervalMs?: number;
  /** `BuildOptions.onProgress` of every reload's build (tests watch the build advance with it). */
  readonly onBuildProgress?: ((recordsBuilt: number) => void) | undefined;
  /** Called with each new, valid snapshot. */
  onSnapshot(snapshot: ConfigSnapshot): void;
  /**
   * Called when a reload fails (a ConfigError listing every problem, or an unexpected Error, or
   * whatever `onSnapshot` threw). The caller keeps serving its current snapshot.
   */
  onError(error: ConfigError | Error): void;
}

/** A running watch. */
export interface ConfigWatcher {
  /**
   * Settles once the first scan is done and the watchers are in place (never rejects: failures go
   * to `onError`). A change made after this is seen by an event, not only by the poll.
   */
  readonly ready: Promise<void>;
  /** Stop watching; no callback is called afterwards. Idempotent. */
  close(): void;
}

/** How an event for a name inside a watched directory is handled. */
type Relevance = 'reload' | 'check' | 'ignore';

interface WatchSpec {
  /** The directory to watch. */
  readonly dir: string;
  /** True for a rule directory (or one of its subdirectories). */
  tree: boolean;
  /** Configured paths inside this directory whose own replacement must trigger a reload. */
  readonly names: Set<string>;
}

/**
 * Watch `paths` and call `onSnapshot` with a freshly built snapshot after every change of a rule
 * file: added, edited, removed or renamed, in a configured directory or any of its
 * subdirectories. Reports only changes: load the first snapshot with `loadSnapshot` (start the
 * watch first to never miss a change made during that load).
 *
 * How: node:fs `watch` on every rule directory (never on file inodes, which editors and
 * Kubernetes replace), on the parent of each configured path, and on the parent of every
 * symlink above a configured path, so swapping a symlinked directory (the reference's
 * RUNTIME_ROOT style, e.g. `current -> v2` by rename) or a ConfigMap's `..data` link is seen. Events
 * are debounced; editor swap/backup files are ignored; events for other non-rule names (dot
 * files such as `..data`, new subdirectories) only trigger a cheap check that reloads if the set
 * of rule files or their stat (inode, size, times) changed. The poll (see `pollIntervalMs`) runs
 * the same check, so a missed inotify event delays a reload by at most one interval.
 *
 * Nothing here throws out of a watcher or timer callback: every failure goes to `onError`.
 */
export function watchConfig(options: WatchOptions): ConfigWatcher {
  return new Watch(options);
}

class Watch implements ConfigWatcher {
  readonly ready: Promise<void>;
  private readonly debounceMs: number;
  private readonly watchers = new Map<string, { watcher: FSWatcher; spec: WatchSpec }>();
  private timer: NodeJS.Timeout | undefined;
  private readonly poll: NodeJS.Timeout | undefined;
  private closed = false;
  /** Stops a build in progress on close (its worker thread ends). */
  private readonly abort = new AbortController();
  private running = false;
  private pending = false;
  private forceNext = false;
  private fingerprint: string | undefined;

  constructor(private readonly options: WatchOptions) {
    this.debounceMs = Math.max(0, options.debounceMs ?? 100);
    const pollMs = options.pollIntervalMs ?? 5000;
    if (pollMs > 0) {
      this.poll = setInterval(() => this.schedule(false), pollMs);
      this.poll.unref();
    }
    // The first pass only records the baseline and starts the watchers.
    this.running = true;
    this.ready = this.reload(false, false);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.abort.abort();
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.poll !== undefined) clearInterval(this.poll);
    for (const { watcher } of this.watchers.values()) closeQuietly(watcher);
    this.watchers.clear();
  }

  private schedule(force: boolean): void {
    if (this.closed) return;
    this.forceNext ||= force;
    // Not reset by later events: a steady stream of writes cannot postpone the reload forever.
    if (this.timer !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const forced = this.forceNext;
      this.forceNext = false;
      if (this.running) {
        this.pending = true;
        this.forceNext ||= forced;
        return;
      }
      this.running = true;
      void this.reload(forced, true);
    }, this.debounceMs);
    this.timer.unref();
  }

  /** One pass: rescan, rewatch, and rebuild when forced or when the fingerprint changed. */
  private async reload(force: boolean, emit: boolean): Promise<void> {
    try {
      const scan = await scanConfigPaths(this.options.paths);
      if (this.closed) return;
      await this.rewatch(scan.dirs);
      const fingerprint = await fingerprintOf(
        scan.files,
        scan.problems.map((p) => p.message),
      );
      if (this.closed) return;
      const changed = fingerprint !== this.fingerprint;
      this.fingerprint = fingerprint;
      if (!emit || (!force && !changed)) return;

      let snapshot: ConfigSnapshot;
      try {
        snapshot = await snapshotOfFiles(scan.files, scan.problems, {
          mergeDomainConfigs: this.options.mergeDomainConfigs === true,
          defaultAlgorithm: this.options.defaultAlgorithm,
          maxRulesPerFile: this.options.maxRulesPerFile,
          maxRules: this.options.maxRules,
          algorithmRefusal: this.options.algorithmRefusal,
          signal: this.abort.signal,
          onProgress: this.options.onBuildProgress,
        });
      } catch (error) {
        this.fail(error);
        return;
      }
      if (this.closed) return;
      try {
        this.options.onSnapshot(snapshot);
      } catch (error) {
        this.fail(error);
      }
    } catch (error) {
      this.fail(error);
    } finally {
      this.running = false;
      if (this.pending && !this.closed) {
        this.pending = false;
        this.schedule(false);
      }
    }
  }

  private fail(error: unknown): void {
    if (this.closed) return;
    try {
      this.options.onError(error instanceof Error ? error : new Error(String(error)));
    } catch {
      // The caller's error handler failed too; nothing sensible is left to report it to.
    }
  }

  /** Watch exactly the directories the last scan needs; drop the others. */
  private async rewatch(treeDirs: readonly string[]): Promise<void> {
    const specs = new Map<string, WatchSpec>();
    const want = async (dir: string, tree: boolean, name: string | undefined): Promise<void> => {
      const real = await realpath(dir).catch(() => undefined);
      if (real === undefined) return;
      // Keyed by the resolved directory too, so a swapped symlink gets a new watcher.
      const key = `${dir}\0${real}`;
      let spec = specs.get(key);
      if (spec === undefined) {
        spec = { dir, tree: false, names: new Set() };
        specs.set(key, spec);
      }
      spec.tree ||= tree;
      if (name !== undefined) spec.names.add(name);
    };
    for (const dir of treeDirs) await want(dir, true, undefined);
    for (const path of this.options.paths) {
      await want(dirname(path), false, basename(path));
      // A symlink higher up (the reference's `RUNTIME_ROOT=/srv/runtime_data/current`, swapped by
      // rename to publish a new version) changes every file below it without touching them.
      for (const link of await symlinkAncestors(path)) {
        await want(dirname(link), false, basename(link));
      }
    }
    if (this.closed) return;

    for (const [key, entry] of this.watchers) {
      if (!specs.has(key)) {
        closeQuietly(entry.watcher);
        this.watchers.delete(key);
      }
    }
    for (const [key, spec] of specs) {
      const current = this.watchers.get(key);
      if (current !== undefined) {
        current.spec.tree = spec.tree;
        for (const name of spec.names) current.spec.names.add(name);
        continue;
      }
      const watcher = this.startWatcher(key, spec);
      if (watcher !== undefined) this.watchers.set(key, { watcher, spec });
    }
  }

  private startWatcher(key: string, spec: WatchSpec): FSWatcher | undefined {
    try {
      const watcher = watch(spec.dir, { persistent: false, encoding: 'utf8' }, (_event, name) => {
        try {
          const relevance = classify(spec, name);
          if (relevance !== 'ignore') this.schedule(relevance === 'reload');
        } catch (error) {
          this.fail(error);
        }
      });
      watcher.on('error', () => {
        // The directory went away or the watch broke: rescan, which rewatches what exists.
        closeQuietly(watcher);
        if (this.watchers.get(key)?.watcher === watcher) this.watchers.delete(key);
        this.schedule(true);
      });
      return watcher;
    } catch {
      // Out of inotify watches, or the directory vanished: the poll still covers it.
      return undefined;
    }
  }
}

/** Decide what an event for `name` in a watched directory means. */
function classify(spec: WatchSpec, name: string | null): Relevance {
  if (name === null) return 'check';
  if (isEditorTempName(name)) return 'ignore';
  if (spec.names.has(name)) return 'reload';
  if (spec.tree && isRuleFileName(name)) return 'reload';
  // Dot entries (a ConfigMap's `..data` swap) and other names (a new subdirectory) may or may not
  // change the rule files; the fingerprint check decides.
  if (spec.tree || name.startsWith('.')) return 'check';
  return 'ignore';
}

/** Names, inodes, sizes and times of the rule files (following symlinks), plus path problems. */
async function fingerprintOf(
  files: readonly string[],
  problems: readonly string[],
): Promise<string> {
  const parts = await Promise.all(
    files.map(async (file) => {
      const info = await stat(file, { bigint: true }).catch(() => undefined);
      return info === undefined
        ? `${file}|gone`
        : `${file}|${info.dev}:${info.ino}:${info.size}:${info.mtimeNs}:${info.ctimeNs}`;
    }),
  );
  return parts.concat(problems).join('\n');
}

/** The ancestors of `path` (absolute, nearest first) that are symbolic links; missing ones are skipped. */
async function symlinkAncestors(path: string): Promise<string[]> {
  const links: string[] = [];
  let current = dirname(resolve(path));
  for (;;) {
    const parent = dirname(current);
    if (parent === current) return links;
    const info = await lstat(current).catch(() => undefined);
    if (info?.isSymbolicLink() === true) links.push(current);
    current = parent;
  }
}

function closeQuietly(watcher: FSWatcher): void {
  try {
    watcher.close();
  } catch {
    // Already closed.
  }
}
