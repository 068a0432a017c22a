/**
 * The types shared by the Node client, the embedded limiter and the HTTP middleware
 * (docs/node.md): a ShouldRateLimit call and its answer as plain values, with the failure policy
 * folded in, so the middleware cannot tell a remote sluice (or the reference) from the limiter in
 * process.
 */

/** One `key=value` entry of a descriptor, as Envoy's rate limit actions produce them. */
export interface CallEntry {
  /** The descriptor key (`remote_address`, `header_match`, `api_key`, ...). */
  readonly key: string;
  /** Its value; `''` for a key-only entry. */
  readonly value: string;
}

/** One descriptor of a call: what to count. */
export interface CallDescriptor {
  /** The entries, in order; the rule that matches the last one applies. */
  readonly entries: readonly CallEntry[];
  /**
   * A limit that replaces the configured rule for this descriptor (Envoy's RateLimitOverride);
   * `undefined`: the configured rule.
   */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: CallUnit } | undefined;
  /** Hits this descriptor adds (0 = look without charging); `undefined`: the call's. */
  readonly hitsAddend?: number | undefined;
}

/** A ShouldRateLimit call. */
export interface RateLimitCall {
  /** The rate limit domain (the `domain:` of a rule file). */
  readonly domain: string;
  /** The descriptors; each gets one status in the answer, in order. */
  readonly descriptors: readonly CallDescriptor[];
  /** Hits each descriptor adds unless it sets its own; `undefined` or 0 counts 1. */
  readonly hitsAddend?: number | undefined;
}

/** A rate limit unit, lower case as in the rule files. */
export type CallUnit = 'second' | 'minute' | 'hour' | 'day' | 'week' | 'month' | 'year';

/** The limit a status reports (`current_limit`). */
export interface ReportedLimit {
  /** Requests per unit. */
  readonly requestsPerUnit: number;
  /** The unit. */
  readonly unit: CallUnit;
  /** The rule's `name`, `''` when it has none. */
  readonly name: string;
}

/** The answer for one descriptor. */
export interface DescriptorResult {
  /** `OVER_LIMIT` when this descriptor lacked room (a shadow rule answers `OK`). */
  readonly code: 'OK' | 'OVER_LIMIT';
  /** The rule that applied; `undefined` when none did (no rule, unknown domain, unlimited). */
  readonly limit: ReportedLimit | undefined;
  /** Room left after this call (0 when over). */
  readonly remaining: number;
  /**
   * Milliseconds until the same call would be admitted (over limit) or until `remaining` next
   * grows (OK); `undefined` when the server sent none.
   */
  readonly resetMs: number | undefined;
  /**
   * The rule's window in ms when known (the embedded limiter knows `unit_multiplier`); remote
   * answers carry only the unit, so `undefined` there and the unit's length applies.
   */
  readonly windowMs?: number | undefined;
}

/** What a failure policy answers when the limiter could not decide. */
export type FailureMode = 'open' | 'closed';

/** Why no decision could be had: for the caller's log, never for the HTTP client. */
export interface RateLimitFailure {
  /**
   * The gRPC status name of a remote call (`UNAVAILABLE`, `DEADLINE_EXCEEDED`, ...), or the
   * embedded limiter's error code (`STORE_UNAVAILABLE`, `INVALID_REQUEST`, ...).
   */
  readonly code: string;
  /** One line saying what failed, where, and what the policy did. */
  readonly reason: string;
  /** The error itself. */
  readonly error: Error;
}

/** The answer to a call, after the failure policy. */
export interface RateLimitDecision {
  /**
   * Let the request through: the overall code was OK, or no decision could be had and the
   * failure mode is `open`.
   */
  readonly allowed: boolean;
  /** The overall code; `undefined` when the call failed (see `failure`). */
  readonly overallCode: 'OK' | 'OVER_LIMIT' | undefined;
  /** One per call descriptor, in order; empty when the call failed. */
  readonly statuses: readonly DescriptorResult[];
  /** Headers the server asks to add to the client's response (`response_headers_to_add`). */
  readonly responseHeaders: readonly CallEntry[];
  /** Set when the call failed and the failure policy answered. */
  readonly failure?: RateLimitFailure | undefined;
}

/** Anything that decides calls: the remote client or the embedded limiter. */
export interface RateLimitBackend {
  /** Decide one call; never rejects: a failure is answered by the failure policy. */
  shouldRateLimit(call: RateLimitCall): Promise<RateLimitDecision>;
}

/** The decision a failure policy gives. */
export function failureDecision(
  mode: FailureMode,
  code: string,
  what: string,
  error: Error,
): RateLimitDecision {
  const reason = `${what}: ${error.message}; failing ${mode}`;
  return {
    allowed: mode === 'open',
    overallCode: undefined,
    statuses: [],
    responseHeaders: [],
    failure: { code, reason, error },
  };
}
