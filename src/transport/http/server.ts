/**
 * The HTTP side (docs/operations-http.md): `HOST:PORT` serves `/healthcheck`, `/json` and
 * `/metrics` as envoyproxy/ratelimit does; `DEBUG_HOST:DEBUG_PORT` serves the debug endpoints.
 * Both are plain `node:http` servers over the same RateLimitService the gRPC transport calls.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { SluiceError } from '../../errors.js';
import { createLogLimiter, truncateForLog } from '../../logging/limited.js';
import type { Logger } from '../../logging/logger.js';
import type { Metrics } from '../../metrics/metrics.js';
import type { HealthSignal } from '../../service/health.js';
import type { RateLimitService } from '../../service/rate-limit-service.js';
import {
  NO_TRANSPORT_METRICS,
  createRequestBudget,
  DEFAULT_REQUEST_BUFFER_BYTES,
  sweepIntervalMs,
  type RequestBudget,
} from '../limits.js';
import type { TransportMetricsSink } from '../../metrics/metrics.js';
import { listenOn } from '../listen.js';
import { requestFromJson, responseToJson } from './json.js';

/** A listening HTTP server. */
export interface HttpServer {
  /** Bind `host:port` (port 0 picks one); resolves to the bound port. */
  listen(host: string, port: number): Promise<number>;
  /** Stop accepting, close idle connections, wait up to `graceMs` for the rest. */
  close(graceMs: number): Promise<void>;
}

/**
 * A request handler for one path of a router; a path no route serves is answered 404. It answers
 * through `res` and may be async: a rejection is logged and answered 500 (or the connection cut,
 * when the headers are already sent).
 */
export type Route = (req: http.IncomingMessage, res: http.ServerResponse) => void | Promise<void>;

/** Go's `http.Error`: a text body with the status text, as the reference answers errors. */
function sendError(res: http.ServerResponse, status: number): void {
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

/** Why a body was not read: over the size limit, over the shared budget, or the client left. */
type BodyRefusal = 'too_large' | 'busy' | 'aborted';

/**
 * Read a request body up to `maxBytes`, holding what has arrived in `budget` until it is read
 * whole; resolves to the refusal instead when it is larger, the budget is spent, or the request
 * goes away. Reading stops at the refusal: the caller answers and closes the connection.
 */
function readBody(
  req: http.IncomingMessage,
  maxBytes: number,
  budget: RequestBudget,
): Promise<Buffer | BodyRefusal> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (result: Buffer | BodyRefusal | Error): void => {
      if (settled) return;
      settled = true;
      budget.release(size);
      req.removeListener('data', onData);
      if (result instanceof Error) reject(result);
      else resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > maxBytes) {
        finish('too_large');
        return;
      }
      if (!budget.take(chunk.length)) {
        finish('busy');
        return;
      }
      size += chunk.length;
      chunks.push(chunk);
    };
    req.on('data', onData);
    // One copy at the end: collecting costs time linear in the body's size.
    req.on('end', () => finish(Buffer.concat(chunks, size)));
    req.on('error', (err) => finish(err));
    req.on('close', () => finish('aborted'));
  });
}

/** Answer `status` and close the connection (the rest of the request is not read). */
function sendErrorAndClose(res: http.ServerResponse, status: number): void {
  res.shouldKeepAlive = false;
  res.setHeader('Connection', 'close');
  sendError(res, status);
}

/** Options of {@link createRouter}. */
export interface RouterOptions {
  /** Time a request may take to arrive whole, headers and body, ms (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Where refusals are counted (default: nowhere). */
  readonly metrics?: TransportMetricsSink;
}

/** Create a `node:http` server over a path -> route table (exact paths). */
export function createRouter(
  routes: ReadonlyMap<string, Route>,
  logger: Logger,
  options: RouterOptions = {},
): HttpServer {
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const metrics = options.metrics ?? NO_TRANSPORT_METRICS;
  const timeouts = {
    // Node's defaults are 300 s for a request and a check every 30 s; a slow client holding a
    // body open is cut after the configured time instead.
    requestTimeout: requestTimeoutMs,
    headersTimeout: Math.min(60_000, requestTimeoutMs),
    connectionsCheckingInterval: sweepIntervalMs(requestTimeoutMs),
  };
  const server = http.createServer(timeouts, (req, res) => {
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
  // Node's own answers to broken or slow requests, with the slow ones counted.
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    if (timedOut) metrics.refused('http_timeout');
    if (socket.writable && err.code !== 'ECONNRESET') {
      socket.end(
        timedOut
          ? 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n'
          : 'HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n',
      );
    }
    socket.destroy();
  });
  return {
    listen(host, port) {
      return listenOn(server, host, port);
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
  /** Largest `/json` body, bytes (larger bodies answer 400 and the connection is closed). */
  readonly maxBodyBytes: number;
  /** `HTTP_REQUEST_TIMEOUT`: time a request may take to arrive whole, ms (default 30 s). */
  readonly requestTimeoutMs?: number;
  /**
   * The process-wide budget of unfinished requests' bytes (`MAX_REQUEST_BUFFER_BYTES`), shared
   * with the gRPC port; default: one of its own with the default bound.
   */
  readonly budget?: RequestBudget;
  /** Module logger. */
  readonly logger: Logger;
}

/** HTTP status for each failure of `/json` (the reference answers 400 for all; see docs). */
function jsonErrorStatus(error: SluiceError): number {
  switch (error.code) {
    case 'INVALID_REQUEST':
    case 'MALFORMED_MESSAGE':
    case 'INVALID_UTF8':
    case 'INVALID_JSON':
    case 'INVALID_CONFIG':
    case 'INVALID_SETTINGS':
      return 400;
    case 'STORE_UNAVAILABLE':
    case 'STORE_TIMEOUT':
    case 'INTERNAL':
      return 500;
    case 'NO_CONFIG':
      return 503;
  }
}

/** The main HTTP server: `/healthcheck`, `/json`, `/metrics`. */
export function createHttpServer(options: HttpServerOptions): HttpServer {
  const { service, health, metrics, maxBodyBytes, logger } = options;
  const budget = options.budget ?? createRequestBudget(DEFAULT_REQUEST_BUFFER_BYTES);
  const routes = new Map<string, Route>();
  // Bad /json requests are the client's doing: a few lines per cause and minute, then silence
  // (each written line says how many were dropped); the refusal metrics count them all.
  const logLimit = createLogLimiter();

  routes.set('/healthcheck', (_req, res) => {
    if (health.serving()) {
      send(res, 200, 'text/plain; charset=utf-8', 'OK');
    } else {
      res.writeHead(500, { 'Content-Length': 0 });
      res.end();
    }
  });

  routes.set('/json', async (req, res) => {
    const body = await readBody(req, maxBodyBytes, budget);
    if (body === 'aborted') return;
    if (body === 'too_large') {
      metrics.transport.refused('json_body_size');
      const dropped = logLimit('too_large');
      if (dropped !== undefined) {
        logger.warn(
          { maxBodyBytes, dropped },
          '/json: body larger than GRPC_MAX_RECEIVE_MESSAGE_LENGTH',
        );
      }
      sendErrorAndClose(res, 400);
      return;
    }
    if (body === 'busy') {
      metrics.transport.refused('total_buffer');
      sendErrorAndClose(res, 503);
      return;
    }
    let request;
    try {
      request = requestFromJson(body);
    } catch (err) {
      if (!SluiceError.is(err, 'INVALID_JSON')) throw err;
      const dropped = logLimit('malformed');
      if (dropped !== undefined) {
        logger.warn(
          { reason: truncateForLog(err.message, 200), dropped },
          '/json: malformed request',
        );
      }
      sendError(res, 400);
      return;
    }
    let response;
    try {
      response = await service.shouldRateLimit(request);
    } catch (err) {
      const error = SluiceError.from(err);
      const status = jsonErrorStatus(error);
      const dropped = logLimit(status >= 500 ? 'failed' : 'invalid');
      if (dropped === undefined) {
        // Counted in the ShouldRateLimit metrics; this line is only a sample.
      } else if (status >= 500) {
        logger.error({ err: error, dropped }, '/json: ShouldRateLimit failed');
      } else {
        logger.warn(
          { reason: truncateForLog(error.message, 200), dropped },
          '/json: invalid request',
        );
      }
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

  return createRouter(routes, logger, {
    requestTimeoutMs: options.requestTimeoutMs,
    metrics: metrics.transport,
  });
}
