/**
 * What the console says about the rules: which snapshot serves (a version that counts the
 * snapshots swapped in since the start), when it was loaded, and how the last load ended, with
 * every problem of a refused rule set. The composition root reports each load to it, next to the
 * log line and the `config_load_*` counter it already writes.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import { ConfigError, formatConfigProblem } from '../errors.js';

/** The outcome of one load or reload. */
export interface ConfigLoadResult {
  /** True when the rule set was swapped in. */
  readonly ok: boolean;
  /** When, epoch ms. */
  readonly at: number;
  /** Every problem of a refused rule set (`file: path: reason`), or the snapshot's warnings. */
  readonly problems: readonly string[];
}

/** The serving config as the console shows it. */
export interface ConfigStatusView {
  /** 1 for the first snapshot, +1 for every reload swapped in. */
  readonly version: number;
  /** When the serving snapshot was loaded, epoch ms (`undefined` before the first). */
  readonly loadedAt: number | undefined;
  /** The last load or reload, successful or not. */
  readonly lastLoad: ConfigLoadResult | undefined;
  /** Loads swapped in and loads refused since the start. */
  readonly loads: { readonly ok: number; readonly failed: number };
}

/** Receives every load (the same calls the config source's listener gets). */
export interface ConfigStatus {
  /** A snapshot was swapped in (reporting the same snapshot twice counts once). */
  onSnapshot(snapshot: ConfigSnapshot): void;
  /** A rule set was refused; the previous snapshot keeps serving. */
  onError(error: Error): void;
  /** The status now. */
  view(): ConfigStatusView;
}

/** Create an empty status. */
export function createConfigStatus(clock: Clock): ConfigStatus {
  let serving: ConfigSnapshot | undefined;
  let version = 0;
  let loadedAt: number | undefined;
  let lastLoad: ConfigLoadResult | undefined;
  let ok = 0;
  let failed = 0;
  return {
    onSnapshot(snapshot) {
      if (snapshot === serving) return;
      serving = snapshot;
      version++;
      ok++;
      loadedAt = clock();
      lastLoad = {
        ok: true,
        at: loadedAt,
        problems: snapshot.warnings.map(formatConfigProblem),
      };
    },
    onError(error) {
      failed++;
      lastLoad = {
        ok: false,
        at: clock(),
        problems:
          error instanceof ConfigError ? error.problems.map(formatConfigProblem) : [error.message],
      };
    },
    view: () => ({ version, loadedAt, lastLoad, loads: { ok, failed } }),
  };
}
