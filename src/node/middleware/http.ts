/**
 * The middleware for node:http and Express 5 (and any framework with `(req, res, next)`
 * middleware): {@link rateLimit} is the middleware, {@link withRateLimit} wraps a plain
 * node:http request listener.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RateLimitDecision } from '../decision.js';
import {
  checkOptions,
  evaluate,
  PROBLEM_JSON,
  type Outcome,
  type RateLimitOptions,
} from './core.js';
import type { RequestLike } from './descriptors.js';

/** What a rejection handler gets besides the request and response. */
export interface RejectionInfo {
  /** The status the default answer would have (429, or 503 when failed closed). */
  readonly status: number;
  /** The decision (with `failure` set when the limiter failed closed). */
  readonly decision: RateLimitDecision;
  /** Seconds the client should wait (`Retry-After`); 0 when failed closed. */
  readonly retryAfter: number;
  /** The problem+json body the default answer would send. */
  readonly body: Uint8Array;
}

/** Options of the node:http and Express middleware. */
export interface HttpRateLimitOptions<
  Req extends IncomingMessage = IncomingMessage,
> extends RateLimitOptions<Req> {
  /**
   * The app's own answer to a rejection, instead of the problem+json body. The rate limit headers
   * are already set when it is called; it must end the response (or call `next`).
   */
  readonly onRejected?:
    | ((req: Req, res: ServerResponse, next: (err?: unknown) => void, info: RejectionInfo) => void)
    | undefined;
}

/** A connect-style middleware, as node:http routers and Express use them. */
export type HttpMiddleware<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  next: (err?: unknown) => void,
) => void;

function writeHeaders(res: ServerResponse, outcome: Outcome): void {
  if (outcome.kind === 'pass' || res.headersSent) return;
  for (const h of outcome.headers) res.setHeader(h.key, h.value);
}

/**
 * Rate limit middleware: asks the limiter for each request and answers a rejection with 429,
 * `RateLimit-Policy`, `RateLimit`, `Retry-After` and an RFC 9457 problem+json body (or the
 * app's `onRejected`); admitted requests go on with the headers set. An option function that
 * throws is passed to `next` as an error. Throws a TypeError naming an invalid option.
 */
export function rateLimit<Req extends IncomingMessage & RequestLike = IncomingMessage>(
  options: HttpRateLimitOptions<Req>,
): HttpMiddleware<Req> {
  checkOptions(options);
  return (req, res, next) => {
    evaluate(options, req).then(
      (outcome) => {
        writeHeaders(res, outcome);
        if (outcome.kind !== 'reject') return next();
        const info: RejectionInfo = {
          status: outcome.status,
          decision: outcome.decision,
          retryAfter: outcome.retryAfter,
          body: outcome.body,
        };
        if (options.onRejected !== undefined) return options.onRejected(req, res, next, info);
        res.statusCode = outcome.status;
        res.setHeader('content-type', PROBLEM_JSON);
        res.end(outcome.body);
      },
      (err: unknown) => next(err),
    );
  };
}

/**
 * A node:http request listener that rate limits before `listener`:
 * `http.createServer(withRateLimit(options, (req, res) => ...))`. An option function that throws
 * gets a 500.
 */
export function withRateLimit<Req extends IncomingMessage & RequestLike = IncomingMessage>(
  options: HttpRateLimitOptions<Req>,
  listener: (req: Req, res: ServerResponse) => void,
): (req: Req, res: ServerResponse) => void {
  const middleware = rateLimit(options);
  return (req, res) =>
    middleware(req, res, (err) => {
      if (err === undefined) return listener(req, res);
      if (!res.headersSent) res.statusCode = 500;
      res.end();
    });
}
