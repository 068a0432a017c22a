/**
 * Files on disk -> snapshot: finding the rule files, reading them, and `sluice check`.
 */
import { readFile, readdir, realpath, stat } from 'node:fs/promises';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { ConfigError, SluiceError, type ConfigProblem } from '../errors.js';
import type { ConfigSnapshot } from './types.js';
import {
  buildSnapshotFrom,
  type BuildJob,
  type BuildOptions,
  type PreparedRuleSets,
} from './offthread.js';
import { compareNames } from './snapshot.js';
import {
  MAX_RULE_FILE_LENGTH,
  validateFiles,
  type ConfigFileInput,
  type ConfigOptions,
  type DescriptorConfig,
} from './validate.js';

/** The result of `checkConfig`: what `sluice check` prints. */
export interface CheckResult {
  /** True when every file was found, read and is valid. */
  readonly ok: boolean;
  /** Every problem, in file order (missing paths first). */
  readonly problems: readonly ConfigProblem[];
  /** Non-fatal findings (misplaced reference keys, ignored as the reference does). */
  readonly warnings: readonly ConfigProblem[];
  /** The rule files found, sorted. */
  readonly files: readonly string[];
  /** The domains the files declare (also those of files with problems), sorted, unique. */
  readonly domains: readonly string[];
  /**
   * Limits that name no `algorithm` (as every limit of a reference file): they count with the
   * `DEFAULT_ALGORITHM`, where the reference counts fixed windows. `sluice check` says so.
   */
  readonly limitsWithDefaultAlgorithm: number;
}

/**
 * True for names a rule directory ignores: dot files and dot directories (which also skips
 * Kubernetes' `..data` and `..2024_...` entries of a mounted ConfigMap) and editor swap, backup
 * and lock files (`x.swp`, `x~`, `#x#`, vim's `4913` probe).
 */
export function isIgnoredName(name: string): boolean {
  return name.startsWith('.') || isEditorTempName(name);
}

/** True for editor swap, backup and lock files: `x.swp`, `x~`, `#x#`, `.#x`, vim's `4913` probe. */
export function isEditorTempName(name: string): boolean {
  return (
    name.endsWith('~') ||
    /\.sw[a-p]$/.test(name) ||
    (name.startsWith('#') && name.endsWith('#')) ||
    name.startsWith('.#') ||
    name === '4913'
  );
}

/** True for a rule file name inside a directory: `*.yaml` or `*.yml`, not ignored. */
export function isRuleFileName(name: string): boolean {
  return !isIgnoredName(name) && (name.endsWith('.yaml') || name.endsWith('.yml'));
}

/**
 * The rule files under `paths`, sorted and without duplicates. A path naming a file is taken as
 * is, whatever its extension. A directory contributes every `*.yaml`/`*.yml` file in it and,
 * recursively, in its subdirectories, skipping ignored names (see `isIgnoredName`).
 *
 * Recursion matches the reference: its loader (lyft/goruntime) walks the whole
 * `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config` tree with Go's filepath.Walk. Like Walk, symbolic
 * links to files are followed but symbolic links to directories are not descended into (no
 * loops). A symbolic link is followed only to a file inside the configured directory it was
 * found under (after resolving every link, so a Kubernetes ConfigMap's `x.yaml -> ..data/x.yaml`
 * links, which stay inside the mount, load); a link to anywhere else is a problem naming it, so a
 * rule directory cannot be used to read other files of the host. The reference loads every file whatever its name and, unless RUNTIME_IGNOREDOTFILES is
 * set, dot files too; sluice takes only YAML files and always skips dot entries (docs/configuration.md, "Files"), which
 * is what Kubernetes deployments of the reference configure anyway.
 *
 * Throws a ConfigError naming every path that does not exist or cannot be read.
 */
export async function collectConfigFiles(paths: readonly string[]): Promise<string[]> {
  const { files, problems } = await scanConfigPaths(paths);
  if (problems.length > 0) throw new ConfigError(problems);
  return files;
}

/**
 * Read and build the rule files under `paths` (see `collectConfigFiles`). Throws a ConfigError
 * with every problem: missing paths, unreadable files and every validation problem of every file.
 */
export async function loadSnapshot(
  paths: readonly string[],
  options: BuildOptions = {},
): Promise<ConfigSnapshot> {
  const scan = await scanConfigPaths(paths);
  return snapshotOfFiles(scan.files, scan.problems, options);
}

/**
 * Rule files read into memory -> snapshot: validated in a worker thread (./build-worker.ts) when
 * large (see ./offthread.ts). The problems of paths and files that could not be read come along
 * and refuse the set with those of the files that could.
 */
export const FILES_JOB: BuildJob<PreparedRuleSets> = {
  worker: new URL('./build-worker.js', import.meta.url),
  prepare: (data) => data,
};

/**
 * Read `files` and build a snapshot, without stalling the event loop for a large set (see
 * ./offthread.ts). Throws one ConfigError with `pathProblems` (from the scan), every unreadable
 * file and every validation problem of the files that could be read.
 */
export async function snapshotOfFiles(
  files: readonly string[],
  pathProblems: readonly ConfigProblem[],
  options: BuildOptions = {},
): Promise<ConfigSnapshot> {
  const read = await readConfigFiles(files);
  const size = read.inputs.reduce((sum, input) => sum + input.content.length, 0);
  const prepared: PreparedRuleSets = {
    inputs: read.inputs,
    problems: [...pathProblems, ...read.problems],
  };
  return buildSnapshotFrom(FILES_JOB, prepared, size, options);
}

/** Validate the rule files under `paths` the way `loadSnapshot` does, without throwing. */
export async function checkConfig(
  paths: readonly string[],
  options: ConfigOptions = {},
): Promise<CheckResult> {
  try {
    const { inputs, problems: readProblems } = await readAll(paths);
    const { configs, problems, warnings } = validateFiles(inputs, options);
    const all = [...readProblems, ...problems];
    const domains = new Set<string>();
    let limitsWithDefaultAlgorithm = 0;
    for (const config of configs) {
      if (config === undefined) continue;
      if (config.domain !== '') domains.add(config.domain);
      limitsWithDefaultAlgorithm += countDefaultAlgorithm(config.descriptors);
    }
    return {
      ok: all.length === 0,
      problems: all,
      warnings,
      files: inputs.map((input) => input.name),
      domains: [...domains].sort(compareNames),
      limitsWithDefaultAlgorithm,
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      problems: [{ file: paths.join(', '), path: '', message: `cannot check config: ${message}` }],
      warnings: [],
      files: [],
      domains: [],
      limitsWithDefaultAlgorithm: 0,
    };
  }
}

/** The counted limits under `descriptors` (nested too) that name no algorithm. */
function countDefaultAlgorithm(descriptors: readonly DescriptorConfig[]): number {
  let count = 0;
  for (const descriptor of descriptors) {
    for (const limit of descriptor.rateLimits ?? [descriptor.rateLimit]) {
      if (limit !== undefined && !limit.unlimited && limit.algorithm === undefined) count++;
    }
    count += countDefaultAlgorithm(descriptor.descriptors);
  }
  return count;
}

/** Find and read every rule file; unreadable ones become problems. */
async function readAll(
  paths: readonly string[],
): Promise<{ inputs: ConfigFileInput[]; problems: ConfigProblem[] }> {
  const { files, problems } = await scanConfigPaths(paths);
  const read = await readConfigFiles(files);
  return { inputs: read.inputs, problems: [...problems, ...read.problems] };
}

/** Read files as UTF-8; a file that cannot be read becomes a problem naming it. */
async function readConfigFiles(
  files: readonly string[],
): Promise<{ inputs: ConfigFileInput[]; problems: ConfigProblem[] }> {
  const inputs: ConfigFileInput[] = [];
  const problems: ConfigProblem[] = [];
  // A file too large to be a rule file is not read into memory at all.
  const contents = await Promise.allSettled(
    files.map(async (file) => {
      const info = await stat(file);
      if (info.size > MAX_RULE_FILE_LENGTH) {
        throw new SluiceError(
          'INVALID_CONFIG',
          `the file is ${info.size} bytes long; at most ${MAX_RULE_FILE_LENGTH} are allowed; split it into several files`,
        );
      }
      return readFile(file, 'utf8');
    }),
  );
  contents.forEach((content, index) => {
    const name = files[index]!;
    if (content.status === 'fulfilled') {
      inputs.push({ name, content: content.value });
    } else {
      problems.push({
        file: name,
        path: '',
        message: `error reading config file: ${reason(content.reason)}`,
      });
    }
  });
  return { inputs, problems };
}

/** What `scanConfigPaths` found. */
export interface ConfigScan {
  /** Rule files, sorted, unique. */
  readonly files: string[];
  /** Missing or unreadable paths. */
  readonly problems: ConfigProblem[];
  /** Every directory walked (the configured ones and their subdirectories). */
  readonly dirs: string[];
}

/** Find the rule files under `paths` as `collectConfigFiles` does, reporting problems instead of throwing. */
export async function scanConfigPaths(paths: readonly string[]): Promise<ConfigScan> {
  const found = new Map<string, string>();
  const problems: ConfigProblem[] = [];
  const dirs: string[] = [];
  const add = (file: string): void => {
    const key = resolve(file);
    if (!found.has(key)) found.set(key, file);
  };
  for (const path of paths) {
    let info;
    try {
      info = await stat(path);
    } catch (error) {
      problems.push({ file: path, path: '', message: missingPathMessage(error) });
      continue;
    }
    if (info.isFile()) {
      add(path);
    } else if (info.isDirectory()) {
      // Links are checked against the directory as resolved, so a configured path that is
      // itself a link (RUNTIME_ROOT/current -> a release directory) keeps working.
      const root = await realpath(path).catch(() => resolve(path));
      await walk(path, root, add, problems, dirs);
    } else {
      problems.push({
        file: path,
        path: '',
        message: 'config path is neither a file nor a directory',
      });
    }
  }
  return { files: [...found.values()].sort(compareNames), problems, dirs };
}

async function walk(
  dir: string,
  root: string,
  add: (file: string) => void,
  problems: ConfigProblem[],
  dirs: string[],
): Promise<void> {
  dirs.push(dir);
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    problems.push({
      file: dir,
      path: '',
      message: `cannot read config directory: ${reason(error)}`,
    });
    return;
  }
  entries.sort((a, b) => compareNames(a.name, b.name));
  for (const entry of entries) {
    if (isIgnoredName(entry.name)) continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      await walk(full, root, add, problems, dirs);
    } else if (isRuleFileName(entry.name)) {
      if (entry.isFile()) {
        add(full);
      } else if (entry.isSymbolicLink()) {
        // A dangling link (e.g. mid-swap in a ConfigMap volume) is skipped; the swap's own event
        // triggers the next reload.
        const target = await stat(full).catch(() => undefined);
        if (target?.isFile() !== true) continue;
        const real = await realpath(full).catch(() => undefined);
        if (real === undefined) continue;
        if (isInside(real, root)) {
          add(full);
        } else {
          problems.push({
            file: full,
            path: '',
            message:
              'rule file is a symbolic link to a file outside the config directory; only links ' +
              `that stay inside ${root} are followed (copy the file into the directory, or name ` +
              'it in the config paths itself)',
          });
        }
      }
    }
  }
}

/** True when `path` is `dir` or below it (both absolute and resolved). */
function isInside(path: string, dir: string): boolean {
  const rel = relative(dir, path);
  // Not `startsWith('..')`: a ConfigMap's `..2024_01_01...` directory is inside.
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
}

function missingPathMessage(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT' || code === 'ENOTDIR') {
    return 'config path does not exist; check --config / RUNTIME_ROOT, RUNTIME_SUBDIRECTORY and RUNTIME_APPDIRECTORY';
  }
  return `cannot read config path: ${reason(error)}`;
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
