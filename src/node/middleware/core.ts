/**
 * What every middleware (node:http, Express, Fastify) does with a request before the framework's
 * own part: skip it or not, ask the limiter (remote or embedded, one interface), and turn the
 * decision into the response headers and, for a rejection, a status and a body
 * (docs/node.md). The header and body formats are the service's own (service/headers.ts).
 */
import { UNIT_MS, type HeaderValue } from '../../model.js';
import { ietfHeaders, problemBody, type IetfLimitItem } from '../../service/headers.js';
import type {
  CallDescriptor,
  RateLimitBackend,
  RateLimitCall,
  RateLimitDecision,
  RateLimitFailure,
} from '../decision.js';
import { descriptorsFor, type DescriptorsOption } from './descriptors.js';

/** Options every middleware takes. */
export interface RateLimitOptions<Req> {
  /** Decides: `createRateLimitClient(...)` (remote) or `createEmbeddedLimiter(...)`. */
  readonly limiter: RateLimitBackend;
  /** The rate limit domain, or a function of the request. */
  readonly domain: string | ((req: Req) => string);
  /**
   * The request's descriptors; none (every descriptor dropped, or an empty list) lets the
   * request through without a call.
   */
  readonly descriptors: DescriptorsOption<Req>;
  /** Hits this request adds (default 1 each descriptor); 0 looks without charging. */
  readonly hitsAddend?: ((req: Req) => number) | undefined;
  /** Let a request through without a call when this answers true. */
  readonly skip?: ((req: Req) => boolean | Promise<boolean>) | undefined;
  /**
   * Write `RateLimit-Policy` and `RateLimit` on admitted responses too (default true); rejected
   * ones always carry them and `Retry-After`.
   */
  readonly headers?: boolean | undefined;
  /**
   * Also write the headers the server asks for (`response_headers_to_add`, e.g. the reference's
   * `x-ratelimit-*` with `LIMIT_RESPONSE_HEADERS_ENABLED`), as Envoy does (default true).
   */
  readonly serverHeaders?: boolean | undefined;
  /** Status of a rejection (default 429). */
  readonly statusCode?: number | undefined;
  /** Status when the limiter failed and its failure mode is `closed` (default 503). */
  readonly failureStatusCode?: number | undefined;
  /**
   * Called on every failed call, whatever the failure mode, with the reason to log (the
   * middleware logs nothing itself, and never tells the HTTP client the reason).
   */
  readonly onFailure?: ((failure: RateLimitFailure, req: Req) => void) | undefined;
}

/** What the middleware does with one request. */
export type Outcome =
  /** Skipped, or no descriptors: no call was made, nothing to write. */
  | { readonly kind: 'pass' }
  /** Admitted (or failed open): write `headers`, go on. */
  | {
      readonly kind: 'allow';
      readonly headers: readonly HeaderValue[];
      readonly decision: RateLimitDecision;
    }
  /** Rejected (over limit, or failed closed): write `headers`, answer `status` with `body`. */
  | {
      readonly kind: 'reject';
      readonly status: number;
      readonly headers: readonly HeaderValue[];
      readonly body: Uint8Array;
      readonly decision: RateLimitDecision;
      /** Seconds the client should wait (`Retry-After`). */
      readonly retryAfter: number;
    };

/** The problem+json body of a fail-closed answer. */
const UNAVAILABLE_BODY = new TextEncoder().encode(
  JSON.stringify({
    type: 'about:blank',
    title: 'Service Unavailable',
    status: 503,
    detail: 'the rate limit service could not decide; try again later',
  }),
);

/** The content type of every body the middleware writes. */
export const PROBLEM_JSON = 'application/problem+json';

/**
 * A policy's name in the headers: the rule's `name`, else the domain and the descriptor's keys
 * (`edge.remote_address`): a remote answer does not say which rule matched, so this is what both
 * modes can name alike, and it never carries a client's value.
 */
function policyName(domain: string, descriptor: CallDescriptor | undefined, name: string): string {
  if (name !== '') return name;
  let out = domain;
  for (const entry of descriptor?.entries ?? []) out += `.${entry.key}`;
  return out;
}

/** The IETF items of a decision, one per status that carries a limit. */
function itemsOf(call: RateLimitCall, decision: RateLimitDecision): IetfLimitItem[] {
  const items: IetfLimitItem[] = [];
  const statuses = decision.statuses;
  for (let i = 0; i < statuses.length; i++) {
    const status = statuses[i]!;
    const limit = status.limit;
    if (limit === undefined) continue;
    const windowS = Math.max(1, Math.ceil((status.windowMs ?? UNIT_MS[limit.unit]) / 1000));
    items.push({
      name: policyName(call.domain, call.descriptors[i], limit.name),
      quota: limit.requestsPerUnit,
      windowS,
      remaining: status.remaining,
      resetS: status.resetMs === undefined ? windowS : Math.ceil(status.resetMs / 1000),
      overLimit: status.code === 'OVER_LIMIT',
    });
  }
  return items;
}

/**
 * Check a middleware's options when it is created, so a mistake shows at start-up instead of on
 * every request; throws a TypeError naming the option.
 */
export function checkOptions<Req>(options: RateLimitOptions<Req>): void {
  const problem = (text: string): never => {
    throw new TypeError(`sluice middleware: ${text}`);
  };
  if (typeof options?.limiter?.shouldRateLimit !== 'function') {
    problem('limiter must be createRateLimitClient(...) or createEmbeddedLimiter(...)');
  }
  if (
    typeof options.domain !== 'function' &&
    (typeof options.domain !== 'string' || options.domain === '')
  ) {
    problem('domain must be a non-empty string or a function of the request');
  }
  const d = options.descriptors;
  if (typeof d !== 'function' && !(Array.isArray(d) && d.every((list) => Array.isArray(list)))) {
    problem(
      'descriptors must be a function of the request or a list of entry lists, e.g. [[remoteAddress()]]',
    );
  }
  for (const name of ['statusCode', 'failureStatusCode'] as const) {
    const code = options[name];
    if (code !== undefined && !(Number.isInteger(code) && code >= 400 && code <= 599)) {
      problem(`${name} must be an HTTP error status (400-599), not ${String(code)}`);
    }
  }
}

/** Decide what to do with `req`. Rejects only when an option's function throws. */
export async function evaluate<Req>(options: RateLimitOptions<Req>, req: Req): Promise<Outcome> {
  // Await only what is a promise: each await is a turn of the microtask queue on every request.
  if (options.skip !== undefined) {
    const skip = options.skip(req);
    if (skip === true || (skip !== false && (await skip))) return { kind: 'pass' };
  }
  const found = descriptorsFor(options.descriptors, req);
  const descriptors = Array.isArray(found) ? found : await found;
  if (descriptors.length === 0) return { kind: 'pass' };
  const call: RateLimitCall = {
    domain: typeof options.domain === 'function' ? options.domain(req) : options.domain,
    descriptors,
    hitsAddend: options.hitsAddend?.(req),
  };
  const decision = await options.limiter.shouldRateLimit(call);
  if (decision.failure !== undefined) options.onFailure?.(decision.failure, req);
  const headers: HeaderValue[] =
    options.serverHeaders === false ? [] : [...decision.responseHeaders];
  const rejected = !decision.allowed;
  if (rejected || options.headers !== false) {
    headers.push(...ietfHeaders(itemsOf(call, decision), rejected));
  }
  if (!rejected) return { kind: 'allow', headers, decision };
  if (decision.failure !== undefined) {
    return {
      kind: 'reject',
      status: options.failureStatusCode ?? 503,
      headers,
      body: UNAVAILABLE_BODY,
      decision,
      retryAfter: 0,
    };
  }
  const retry = headers.find((h) => h.key === 'Retry-After');
  const retryAfter = retry === undefined ? 1 : Number(retry.value);
  const over = decision.statuses.find((s) => s.code === 'OVER_LIMIT');
  return {
    kind: 'reject',
    status: options.statusCode ?? 429,
    headers,
    body: problemBody(over?.limit, retryAfter),
    decision,
    retryAfter,
  };
}
