/**
 * The reference's Prometheus listener (`USE_PROMETHEUS=true`): the same metrics as the HTTP
 * port's `/metrics`, served at `PROMETHEUS_PATH` on `PROMETHEUS_ADDR` (default `:9090`), so scrape
 * configs and pod annotations written for envoyproxy/ratelimit find them.
 */
import type { Logger } from '../../logging/logger.js';
import type { Metrics } from '../../metrics/metrics.js';
import { createRouter, send, type HttpServer, type Route } from './server.js';

/** Options for {@link createPrometheusServer}. */
export interface PrometheusServerOptions {
  /** The metrics to render. */
  readonly metrics: Metrics;
  /** `PROMETHEUS_PATH` (default `/metrics`); every other path answers 404. */
  readonly path: string;
  /** Module logger. */
  readonly logger: Logger;
}

/** Create the Prometheus listener (not yet listening). */
export function createPrometheusServer(options: PrometheusServerOptions): HttpServer {
  const { metrics } = options;
  const routes = new Map<string, Route>([
    [
      options.path,
      async (_req, res) => {
        send(res, 200, metrics.contentType, await metrics.render());
      },
    ],
  ]);
  return createRouter(routes, options.logger);
}
