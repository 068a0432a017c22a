/**
 * The Fastify 5 plugin: an `onRequest` hook on the scope it is registered in and below, with
 * per-route options in the route's `config.rateLimit` as @fastify/rate-limit reads them. Typed
 * structurally, so sluice does not depend on fastify.
 */
import type { RateLimitDecision } from '../decision.js';
import { checkOptions, evaluate, PROBLEM_JSON, type RateLimitOptions } from './core.js';
import type { RequestLike } from './descriptors.js';

/** What the plugin reads of a Fastify request. */
export interface FastifyRequestLike extends RequestLike {
  /** The matched route: its pattern and its `config` (where `rateLimit` is read). */
  readonly routeOptions?: { readonly url?: string | undefined; readonly config?: unknown };
}

/** What the plugin uses of a Fastify reply. */
export interface FastifyReplyLike {
  header(name: string, value: string): unknown;
  code(statusCode: number): FastifyReplyLike;
  type(contentType: string): unknown;
  send(payload?: unknown): unknown;
}

/** What the plugin uses of a Fastify instance. */
export interface FastifyInstanceLike {
  addHook(
    name: 'onRequest',
    hook: (request: FastifyRequestLike, reply: FastifyReplyLike) => Promise<unknown>,
  ): unknown;
}

/** What a rejection handler gets besides the request and reply. */
export interface FastifyRejectionInfo {
  /** The status the default answer would have (429, or 503 when failed closed). */
  readonly status: number;
  /** The decision (with `failure` set when the limiter failed closed). */
  readonly decision: RateLimitDecision;
  /** Seconds the client should wait (`Retry-After`); 0 when failed closed. */
  readonly retryAfter: number;
  /** The problem+json body the default answer would send. */
  readonly body: Uint8Array;
}

/**
 * A route's own options, in `config: { rateLimit: ... }`: `false` skips the route; an object
 * replaces the plugin's options of the same names for that route.
 */
export type FastifyRouteRateLimit =
  | false
  | Partial<
      Pick<
        FastifyRateLimitOptions,
        'domain' | 'descriptors' | 'hitsAddend' | 'skip' | 'headers' | 'statusCode' | 'onRejected'
      >
    >;

/** Options of {@link fastifyRateLimit}. */
export interface FastifyRateLimitOptions extends RateLimitOptions<FastifyRequestLike> {
  /**
   * Limit every route of the scope (default true); false limits only the routes with a
   * `config.rateLimit` object, as @fastify/rate-limit's `global: false`.
   */
  readonly global?: boolean | undefined;
  /**
   * The app's own answer to a rejection (instead of the problem+json body), as a Fastify handler
   * returns one: the rate limit headers are already on `reply`; send and return it.
   */
  readonly onRejected?:
    | ((
        request: FastifyRequestLike,
        reply: FastifyReplyLike,
        info: FastifyRejectionInfo,
      ) => unknown)
    | undefined;
}

/** The route's `config.rateLimit`, `undefined` when it has none. */
function routeOption(request: FastifyRequestLike): FastifyRouteRateLimit | undefined {
  const config = request.routeOptions?.config;
  if (config === null || typeof config !== 'object' || !('rateLimit' in config)) return undefined;
  return config.rateLimit as FastifyRouteRateLimit;
}

/**
 * The plugin: `await app.register(fastifyRateLimit, { limiter, domain, descriptors })`. It
 * applies to the scope it is registered in (it is not encapsulated, as fastify-plugin would
 * mark it), so register it in a child scope to limit only that scope's routes.
 */
export function fastifyRateLimit(
  instance: FastifyInstanceLike,
  options: FastifyRateLimitOptions,
  done: (err?: Error) => void,
): void {
  try {
    checkOptions(options);
  } catch (err) {
    return done(err as Error);
  }
  const merged = new WeakMap<object, FastifyRateLimitOptions>();
  instance.addHook('onRequest', async (request, reply) => {
    const own = routeOption(request);
    if (own === false || (own === undefined && options.global === false)) return;
    let effective = options;
    if (own !== undefined) {
      effective = merged.get(own) ?? { ...options, ...own };
      merged.set(own, effective);
    }
    const outcome = await evaluate(effective, request);
    if (outcome.kind === 'pass') return;
    for (const h of outcome.headers) reply.header(h.key, h.value);
    if (outcome.kind === 'allow') return;
    const info: FastifyRejectionInfo = {
      status: outcome.status,
      decision: outcome.decision,
      retryAfter: outcome.retryAfter,
      body: outcome.body,
    };
    if (effective.onRejected !== undefined) return effective.onRejected(request, reply, info);
    reply.code(outcome.status).type(PROBLEM_JSON);
    return reply.send(Buffer.from(outcome.body));
  });
  done();
}

// As fastify-plugin marks a plugin: its hook applies to the scope it is registered in.
Object.assign(fastifyRateLimit, {
  [Symbol.for('skip-override')]: true,
  [Symbol.for('fastify.display-name')]: 'sluice-rate-limit',
});
