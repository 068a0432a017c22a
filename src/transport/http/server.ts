/**
 * The HTTP side (docs/operations-http.md): `HOST:PORT` serves `/healthcheck`, `/json` and
 * `/metrics` as envoyproxy/ratelimit does; `DEBUG_HOST:DEBUG_PORT` serves the debug endpoints.
 * Both are plain `node:http` servers over the same RateLimitService the gRPC transport calls.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { HealthSignal } from '../../service/health.js';
import type { RateLimitService } from '../../service/rate-limit-service.js';
import { JsonMappingError, requestFromJson, responseToJson } from './json.js';

/** A listening HTTP server. */
export interface HttpServer {
  /** Bind `host:port` (port 0 picks one); resolves to the bound port. */
  listen(host: string, port: number): Promise<number>;
  /** Stop accepting, close idle connections, wait up to `graceMs` for the rest. */
  close(graceMs: number): Promise<void>;
}

/** A request handler: returns false when it does not serve the path (then 404). */
export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>;

/** Go's `http.Error`: a text body with the status text, as the reference answers errors. */
export function sendError(res: http.ServerResponse, status: number): void {
  const body = `${http.STATUS_CODES[status] ?? 'Error'}\n`;
  res.writeHead(status, {
    'Content-Type': 'text/plain; charset=utf-8',
    'X-Content-Type-Options': 'nosniff',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

/** Send `body` with `status` and content type. */
export function send(
  res: http.ServerResponse,
  status: number,
  contentType: string,
  body: string | Buffer,
): void {
  res.writeHead(status, { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

/** Read a request body up to `maxBytes`; resolves to undefined when it is larger. */
function readBody(req: http.IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Create a `node:http` server over a path -> route table (exact paths). */
export function createRouter(routes: ReadonlyMap<string, Route>, logger: Logger): HttpServer {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const route = routes.get(path);
    if (route === undefined) {
      send(res, 404, 'text/plain; charset=utf-8', '404 page not found\n');
      return;
    }
    Promise.resolve()
      .then(() => route(req, res))
      .catch((err: unknown) => {
        logger.error({ err, path }, 'HTTP handler failed');
        if (!res.headersSent) sendError(res, 500);
        else res.destroy();
      });
  });
  server.keepAliveTimeout = 5_000;
  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        const onError = (err: Error): void => {
          reject(
            new SluiceError(
              'INVALID_SETTINGS',
              `cannot listen on ${host}:${port}: ${err.message}`,
              {
                cause: err,
              },
            ),
          );
        };
        server.once('error', onError);
        server.listen(port, host, () => {
          server.off('error', onError);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    close(graceMs) {
      return new Promise((resolve) => {
        if (!server.listening) {
          resolve();
          return;
        }
        const timer = setTimeout(() => server.closeAllConnections(), graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
    },
  };
}

/** Options for {@link createHttpServer}. */
export interface HttpServerOptions {
  /** The service `/json` calls. */
  readonly service: RateLimitService;
  /** The health `/healthcheck` reports. */
  readonly health: HealthSignal;
  /** The metrics `/metrics` renders. */
  readonly metrics: Metrics;
  /** Largest `/json` body, bytes (larger bodies answer 400). */
  readonly maxBodyBytes: number;
  /** Module logger. */
  readonly logger: Logger;
}

/** HTTP status for each failure of `/json` (the reference answers 400 for all; see docs). */
function jsonErrorStatus(error: SluiceError): number {
  switch (error.code) {
    case 'INVALID_REQUEST':
    case 'INVALID_CONFIG':
    case 'INVALID_SETTINGS':
      return 400;
    case 'STORE_UNAVAILABLE':
    case 'INTERNAL':
      return 500;
    case 'NO_CONFIG':
      return 503;
  }
}

/** The main HTTP server: `/healthcheck`, `/json`, `/metrics`. */
export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { service, health, metrics, maxBodyBytes, logger } = options;
  const routes = new Map<string, Route>();

  routes.set('/healthcheck', (_req, res) => {
    if (health.serving()) {
      send(res, 200, 'text/plain; charset=utf-8', 'OK');
    } else {
      res.writeHead(500, { 'Content-Length': 0 });
      res.end();
    }
  });

  routes.set('/json', async (req, res) => {
    const body = await readBody(req, maxBodyBytes);
    if (body === undefined) {
      logger.warn({ maxBodyBytes }, '/json: body too large');
      sendError(res, 400);
      return;
    }
    let request;
    try {
      request = requestFromJson(body);
    } catch (err) {
      if (!(err instanceof JsonMappingError)) throw err;
      logger.warn({ reason: err.message }, '/json: malformed request');
      sendError(res, 400);
      return;
    }
    let response;
    try {
      response = await service.shouldRateLimit(request);
    } catch (err) {
      const error = SluiceError.from(err);
      const status = jsonErrorStatus(error);
      if (status >= 500) logger.error({ err: error }, '/json: ShouldRateLimit failed');
      else logger.warn({ reason: error.message }, '/json: invalid request');
      sendError(res, status);
      return;
    }
    send(
      res,
      response.overallCode === 'OVER_LIMIT' ? 429 : 200,
      'application/json',
      responseToJson(response),
    );
  });

  routes.set('/metrics', async (_req, res) => {
    send(res, 200, metrics.contentType, await metrics.render());
  });

  return createRouter(routes, logger);
}
