/**
 * The operator console (docs/operations-console.md): an application on top of the service,
 * served by the debug listener. A page at `/` (for a browser; `curl /` still lists the
 * endpoints) and the JSON endpoints behind its panels, one module each: `/api/now` (now.ts),
 * `/api/rules` (rules.ts), `/api/hot` (hot.ts), `POST /api/try` (try.ts, the service's dry run),
 * `POST /api/reset` (reset.ts, off unless `DEBUG_CONSOLE_RESET_ENABLED`) and `/api/rlqs` (rlqs.ts,
 * the quota service's buckets and shares). Everything is read from what sluice already keeps
 * (metrics counters, the store, the snapshot, the quota service); a timer samples the counters,
 * nothing runs per call.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import type { Logger } from '../logging/logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { HealthSignal } from '../service/health.js';
import type { QuotaService } from '../rlqs/quota-service.js';
import type { Explainer } from '../service/rate-limit-service.js';
import type { CounterStore } from '../stores/counter-store.js';
import { isLoopbackHost } from '../transport/http/host-check.js';
import { send, type Route } from '../transport/http/server.js';
import { createAssets } from './assets.js';
import type { ConfigStatus } from './config-status.js';
import { API_PER_SECOND, createApiBudget, resetTokenDigest } from './guards.js';
import { hotPanel } from './hot.js';
import { JSON_TYPE, sendJson, type ConsoleEndpoint } from './http.js';
import { nowPanel } from './now.js';
import { resetPanel } from './reset.js';
import { rlqsPanel } from './rlqs.js';
import { rulesView } from './rules.js';
import { createSampler } from './sampler.js';
import { tryPanel } from './try.js';

/** What the console needs from the app. */
export interface ConsoleOptions {
  /** The snapshot serving now. */
  readonly snapshot: () => ConfigSnapshot;
  /** The service, whose dry run answers "try it". */
  readonly service: Explainer;
  /** The counter store (read by hot keys; `reset` when enabled). */
  readonly store: CounterStore;
  /** The metrics whose counters the console reads. */
  readonly metrics: Metrics;
  /** Health, as `/health` reports it. */
  readonly health: HealthSignal;
  /** Load results of the rules. */
  readonly configStatus: ConfigStatus;
  /** Time source (epoch ms). */
  readonly clock: Clock;
  /** Module logger (resets are logged here, with the remote address). */
  readonly logger: Logger;
  /** Store description for the `now` panel. */
  readonly storeInfo: {
    /** `memory` or `redis` (`BACKEND_TYPE`). */
    readonly backend: string;
    /** `STORE_FAILURE_MODE` (meaningful for redis). */
    readonly failureMode: string;
  };
  /** Global `SHADOW_MODE`, shown with a "try it" answer. */
  readonly shadowMode: boolean;
  /** `DEBUG_CONSOLE_RESET_ENABLED`. */
  readonly resetEnabled: boolean;
  /**
   * `DEBUG_HOST`: off loopback, a reset needs {@link resetToken} (and without one is refused).
   * Default `127.0.0.1`.
   */
  readonly listenHost?: string;
  /**
   * `DEBUG_CONSOLE_RESET_TOKEN`: when set, every reset must carry `Authorization: Bearer <it>`,
   * wherever the listener is. `undefined`: none.
   */
  readonly resetToken?: string | undefined;
  /** Time between samples of the charts, ms (default 5000). */
  readonly sampleIntervalMs?: number;
  /** The Rate Limit Quota Service, for `/api/rlqs`; `undefined`: that endpoint is not served. */
  readonly quota?: QuotaService | undefined;
}

/** The console, ready to mount on the debug server. */
export interface DebugConsole {
  /** JSON endpoints and assets. */
  readonly endpoints: readonly ConsoleEndpoint[];
  /** The page, served at `/` to browsers. */
  readonly page: Route;
  /** Stop the sampler. */
  close(): void;
}

/** The `/api/rules` endpoint: the loaded domains as trees, built once per rule set. */
function rulesPanel(snapshot: () => ConfigSnapshot, configStatus: ConfigStatus): ConsoleEndpoint {
  const bodies = new WeakMap<ConfigSnapshot, { version: number; body: string }>();
  return {
    path: '/api/rules',
    help: 'console: the loaded domains as trees (JSON)',
    route: (_req, res) => {
      const current = snapshot();
      const { version } = configStatus.view();
      let cached = bodies.get(current);
      if (cached === undefined || cached.version !== version) {
        cached = { version, body: JSON.stringify({ version, domains: rulesView(current) }) };
        bodies.set(current, cached);
      }
      res.setHeader('Cache-Control', 'no-store');
      send(res, 200, JSON_TYPE, cached.body);
    },
  };
}

/** `endpoints` with the JSON ones behind one budget for all clients together (guards.ts). */
function withBudget(endpoints: readonly ConsoleEndpoint[], clock: Clock): ConsoleEndpoint[] {
  const admit = createApiBudget(clock);
  return endpoints.map((endpoint): ConsoleEndpoint => {
    if (!endpoint.path.startsWith('/api/')) return endpoint;
    const { route } = endpoint;
    return {
      ...endpoint,
      route: (req, res) => {
        if (admit()) return route(req, res);
        res.setHeader('Retry-After', '1');
        sendJson(res, 429, {
          error: `the console answers at most ${API_PER_SECOND} requests a second (all clients together); retry in a second`,
        });
      },
    };
  });
}

/** Create the console (its sampler starts now). */
export function createDebugConsole(options: ConsoleOptions): DebugConsole {
  const { snapshot, store, metrics, configStatus, clock, logger } = options;
  const listenHost = options.listenHost ?? '127.0.0.1';
  const onLoopback = isLoopbackHost(listenHost);
  const tokenDigest =
    options.resetToken === undefined || options.resetToken === ''
      ? undefined
      : resetTokenDigest(options.resetToken);
  if (options.resetEnabled && !onLoopback) {
    logger.warn(
      { debugHost: listenHost, credential: tokenDigest !== undefined },
      tokenDigest === undefined
        ? 'console: DEBUG_CONSOLE_RESET_ENABLED on a debug listener off loopback without DEBUG_CONSOLE_RESET_TOKEN: resets are refused until it is set'
        : 'console: counter resets are open to the network the debug listener is on; each needs DEBUG_CONSOLE_RESET_TOKEN',
    );
  }
  const sampler = createSampler({
    counters: metrics.service,
    storeSize: () => store.size(),
    storeHealthy: () => store.healthy(),
    clock,
    intervalMs: options.sampleIntervalMs,
  });
  const asset = createAssets();
  const endpoints: ConsoleEndpoint[] = [
    nowPanel({ ...options, sampler, resetEnabled: options.resetEnabled }),
    rulesPanel(snapshot, configStatus),
    hotPanel(options),
    tryPanel(options),
    resetPanel({
      snapshot,
      store,
      logger,
      backend: options.storeInfo.backend,
      enabled: options.resetEnabled,
      tokenDigest,
      onLoopback,
    }),
    ...(options.quota === undefined ? [] : [rlqsPanel(options.quota)]),
    { path: '/console/console.js', help: 'console: the page script', route: asset('console.js') },
    { path: '/console/console.css', help: 'console: the page style', route: asset('console.css') },
  ];
  return {
    endpoints: withBudget(endpoints, clock),
    page: asset('index.html'),
    close: () => sampler.close(),
  };
}
