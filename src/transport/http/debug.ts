/**
 * The debug server on `DEBUG_HOST:DEBUG_PORT` (loopback by default): `/` lists the endpoints,
 * `/rlconfig` prints the loaded rules in the reference's format, `/counters` the busiest live
 * counters, `/health` why the instance is (not) serving, `/metrics` the Prometheus text.
 * docs/operations-http.md describes each.
 */
import type http from 'node:http';
import type { ConfigSnapshot } from '../../config/types.js';
import type { Logger } from '../../logging/logger.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { HealthSignal } from '../../service/health.js';
import type { CounterStore } from '../../stores/counter-store.js';
import { createLogLimiter, truncateForLog } from '../../logging/limited.js';
import type { HostCheck } from './host-check.js';
import { createRouter, send, type HttpServer, type Route } from './server.js';

/**
 * What the debug server mounts of an operator application (the console, src/console/): its
 * endpoints, each listed at `/`, and a page served at `/` to browsers.
 */
export interface MountedApp {
  /** Endpoints by path, with one line of help each for the list at `/`. */
  readonly endpoints: readonly {
    readonly path: string;
    readonly help: string;
    readonly route: Route;
  }[];
  /** The page a browser gets at `/`. */
  readonly page: Route;
}

/** Whether `req` asks for a page (a browser) rather than text (curl). */
function wantsHtml(req: http.IncomingMessage): boolean {
  return (req.headers.accept ?? '').includes('text/html');
}

/** Options for {@link createDebugServer}. */
export interface DebugServerOptions {
  /** The snapshot serving now. */
  readonly snapshot: () => ConfigSnapshot;
  /** The counter store (its optional `top()` feeds `/counters`). */
  readonly store: CounterStore;
  /** Health, for `/health`. */
  readonly health: HealthSignal;
  /** Metrics, for `/metrics`. */
  readonly metrics: Metrics;
  /** Module logger. */
  readonly logger: Logger;
  /** The operator console (docs/operations-console.md): its page at `/` and its endpoints. */
  readonly console?: MountedApp;
  /**
   * Which `Host` headers are answered (src/transport/http/host-check.ts); others get 403, so a
   * page elsewhere cannot read or drive the listener through DNS rebinding. `undefined`: any.
   */
  readonly hostCheck?: HostCheck;
}

/** Default and largest `n` of `/counters?n=`. */
const COUNTERS_DEFAULT = 50;
const COUNTERS_MAX = 1000;

const TEXT = 'text/plain; charset=utf-8';

/** Whether `text` holds a control character (such keys are printed JSON-quoted). */
function hasControl(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) < 0x20) return true;
  return false;
}

/** Create the debug server (not yet listening). */
export function createDebugServer(options: DebugServerOptions): HttpServer {
  const { snapshot, store, health, metrics, logger } = options;
  const help = new Map<string, string>();
  const routes = new Map<string, Route>();
  const add = (path: string, text: string, route: Route): void => {
    help.set(path, text);
    routes.set(path, route);
  };

  add('/rlconfig', 'print out the currently loaded configuration for debugging', (_req, res) => {
    const lines = snapshot().dump();
    send(res, 200, TEXT, lines.map((line) => `${line}\n`).join(''));
  });

  add(
    '/counters',
    `the busiest live counters (?n=N, default ${COUNTERS_DEFAULT}, at most ${COUNTERS_MAX}): key, count, limit, remaining, reset`,
    (req, res) => {
      if (store.top === undefined) {
        send(res, 501, TEXT, 'this store does not list its counters\n');
        return;
      }
      const url = new URL(req.url ?? '/', 'http://debug');
      const asked = Number(url.searchParams.get('n') ?? COUNTERS_DEFAULT);
      const n =
        Number.isInteger(asked) && asked > 0 ? Math.min(asked, COUNTERS_MAX) : COUNTERS_DEFAULT;
      const rows = store.top(n);
      let out = `# ${rows.length} of ${store.size()} counters, busiest first\n`;
      out += '# count limit remaining reset_s key\n';
      for (const row of rows) {
        const remaining = Math.max(0, row.limit - row.count);
        const reset = (row.expiresInMs / 1000).toFixed(3);
        const key = hasControl(row.key) ? JSON.stringify(row.key) : row.key;
        out += `${row.count} ${row.limit} ${remaining} ${reset} ${key}\n`;
      }
      send(res, 200, TEXT, out);
    },
  );

  add('/health', 'serving, or why not (config, store, draining)', (_req, res) => {
    const reasons = health.reasons();
    send(
      res,
      reasons.length === 0 ? 200 : 500,
      TEXT,
      reasons.length === 0 ? 'serving\n' : `not serving: ${reasons.join(', ')}\n`,
    );
  });

  add('/metrics', 'the Prometheus metrics (as on the HTTP port)', async (_req, res) => {
    send(res, 200, metrics.contentType, await metrics.render());
  });

  for (const endpoint of options.console?.endpoints ?? []) {
    add(endpoint.path, endpoint.help, endpoint.route);
  }

  routes.set('/', (req, res) => {
    // A browser gets the console; curl and scripts keep the list of endpoints.
    if (options.console !== undefined && wantsHtml(req)) return options.console.page(req, res);
    const paths = [...help.keys()].sort();
    send(res, 200, TEXT, paths.map((path) => `${path}: ${help.get(path)!}\n`).join(''));
  });

  const hostCheck = options.hostCheck;
  if (hostCheck === undefined) return createRouter(routes, logger);
  const logLimit = createLogLimiter();
  const checked = new Map<string, Route>();
  for (const [path, route] of routes) {
    checked.set(path, (req, res) => {
      if (hostCheck(req.headers.host)) return route(req, res);
      const host = truncateForLog(req.headers.host ?? '', 100);
      const dropped = logLimit('host');
      if (dropped !== undefined) {
        logger.warn({ host, path, dropped }, 'debug listener: request for another Host refused');
      }
      send(
        res,
        403,
        TEXT,
        `Host ${JSON.stringify(host)} is not a name this debug listener serves (it answers IP addresses, localhost, DEBUG_HOST and the names in DEBUG_ALLOWED_HOSTS); if you reach sluice by this name, add it to DEBUG_ALLOWED_HOSTS\n`,
      );
    });
  }
  return createRouter(checked, logger);
}
