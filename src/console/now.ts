/**
 * The "now" panel (`/api/now`): calls, store, config status, uptime and the charts' samples,
 * all read from what sluice already keeps.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HealthSignal } from '../service/health.js';
import type { CounterStore } from '../stores/counter-store.js';
import { SLUICE_VERSION } from '../version.js';
import type { ConfigStatus } from './config-status.js';
import { capList, sendJson, type ConsoleEndpoint } from './http.js';
import type { Sampler } from './sampler.js';

/** Most problems of the last load shown, and most characters of each. */
export const PROBLEMS_MAX = 20;
const PROBLEM_MAX_CHARS = 300;
/** Most rule files named. */
const FILES_MAX = 50;

/** What the panel reads. */
export interface NowSources {
  readonly snapshot: () => ConfigSnapshot;
  readonly store: CounterStore;
  readonly metrics: Metrics;
  readonly health: HealthSignal;
  readonly configStatus: ConfigStatus;
  readonly clock: Clock;
  readonly sampler: Sampler;
  readonly storeInfo: { readonly backend: string; readonly failureMode: string };
  readonly resetEnabled: boolean;
}

/** The `/api/now` endpoint. */
export function nowPanel(sources: NowSources): ConsoleEndpoint {
  const { snapshot, store, metrics, health, configStatus, clock, sampler, storeInfo } = sources;
  const startedAt = clock();
  // Per snapshot: its rule count (a walk of every rule).
  const ruleCounts = new WeakMap<ConfigSnapshot, number>();
  const ruleCount = (current: ConfigSnapshot): number => {
    let count = ruleCounts.get(current);
    if (count === undefined) {
      count = current.dump().length;
      ruleCounts.set(current, count);
    }
    return count;
  };

  const now = (): unknown => {
    const counters = metrics.service;
    const current = snapshot();
    const config = configStatus.view();
    return {
      version: SLUICE_VERSION,
      time: clock(),
      uptimeMs: clock() - startedAt,
      health: { serving: health.serving(), reasons: health.reasons() },
      calls: {
        ok: counters.callsOk,
        overLimit: counters.callsOverLimit,
        errors: counters.serviceErrors + counters.storeErrors + counters.internalErrors,
      },
      rates: sampler.live() ?? sampler.points().at(-1) ?? null,
      store: {
        backend: storeInfo.backend,
        failureMode: storeInfo.failureMode,
        healthy: store.healthy(),
        keys: store.size(),
        listsCounters: store.top !== undefined,
        canReset: store.reset !== undefined,
      },
      config: {
        ...config,
        lastLoad:
          config.lastLoad === undefined
            ? undefined
            : {
                ...config.lastLoad,
                problems: capList(config.lastLoad.problems, PROBLEMS_MAX, PROBLEM_MAX_CHARS),
              },
        domains: current.domains.size,
        rules: ruleCount(current),
        files: capList(current.files, FILES_MAX, PROBLEM_MAX_CHARS),
      },
      resetEnabled: sources.resetEnabled,
      series: { intervalMs: sampler.intervalMs, points: sampler.points() },
    };
  };

  return {
    path: '/api/now',
    help: 'console: calls, store, config status, uptime and the last 15 minutes (JSON)',
    route: (_req, res) => sendJson(res, 200, now()),
  };
}
