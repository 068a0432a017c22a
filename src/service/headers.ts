/**
 * Rate limit response headers and the problem+json body (docs/operations-headers.md):
 * - `reference`: envoyproxy/ratelimit's three headers (`LIMIT_LIMIT_HEADER`,
 *   `LIMIT_REMAINING_HEADER`, `LIMIT_RESET_HEADER`) for the descriptor it would pick;
 * - `ietf`: `RateLimit-Policy` and `RateLimit` as structured-field lists
 *   (draft-ietf-httpapi-ratelimit-headers), one item per limited descriptor, plus `Retry-After`
 *   on OVER_LIMIT;
 * - an RFC 9457 `application/problem+json` body for rejections.
 */
import { ALGORITHM_BY_NAME } from '../algorithms/index.js';
import {
  MAX_UINT32,
  type DescriptorStatus,
  type HeaderValue,
  type RateLimitResponse,
  type RuleLimit,
} from '../model.js';

/** How headers are written; `undefined` in the service options means no headers. */
export interface HeaderOptions {
  /** `reference` or `ietf`. */
  readonly format: 'reference' | 'ietf';
  /** Reference mode header names. */
  readonly limitHeader: string;
  readonly remainingHeader: string;
  readonly resetHeader: string;
}

/**
 * The status the reference reports in its headers: the last OVER_LIMIT one that is not in quota
 * mode when any, else the first with a limit and the least `limit_remaining`; `undefined` when no
 * status has a limit.
 */
function referenceHeaderStatus(
  statuses: readonly DescriptorStatus[],
): DescriptorStatus | undefined {
  let chosen: DescriptorStatus | undefined;
  let least = MAX_UINT32;
  for (const status of statuses) {
    if (status.currentLimit !== undefined && status.limitRemaining < least) {
      chosen = status;
      least = status.limitRemaining;
    }
    if (status.code === 'OVER_LIMIT' && status.quota !== true) {
      chosen = status;
      least = 0;
    }
  }
  return chosen;
}

/**
 * Whole seconds until `status` resets, as the reference computes its reset header: for a fixed
 * window (an algorithm whose descriptor sets `alignedResetHeader`), and when no duration is
 * known, the seconds left in the epoch-aligned window at `nowMs` (`window - now % window`);
 * otherwise the status's `duration_until_reset` rounded up.
 */
function resetSeconds(status: DescriptorStatus, nowMs: number): number {
  const limit = reportedLimit(status);
  const duration = status.durationUntilResetMs;
  if (
    limit !== undefined &&
    (ALGORITHM_BY_NAME[limit.algorithm].alignedResetHeader || duration === undefined)
  ) {
    const windowS = Math.max(1, Math.round(limit.windowMs / 1000));
    return windowS - (Math.floor(nowMs / 1000) % windowS);
  }
  return duration === undefined ? 0 : Math.ceil(duration / 1000);
}

/** The limit of the status's rule that the status reports (`current_limit`). */
export function reportedLimit(status: DescriptorStatus): RuleLimit | undefined {
  const rule = status.rule;
  const current = status.currentLimit;
  if (rule === undefined || current === undefined) return undefined;
  for (const limit of rule.limits) {
    if (
      limit.requestsPerUnit === current.requestsPerUnit &&
      limit.unit === current.unit &&
      limit.name === current.name
    ) {
      return limit;
    }
  }
  return rule.limits[0];
}

/** Printable ASCII but `"` and `\`: a structured-field String needs only the quotes. */
const PLAIN_SF_STRING = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** A structured-field String (RFC 8941 §3.3.3): quoted, with `\` and `"` escaped, ASCII only. */
function sfString(text: string): string {
  // Rule names and keys are almost always plain: quote them without walking each character.
  if (PLAIN_SF_STRING.test(text)) return `"${text}"`;
  let out = '"';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '"' || ch === '\\') out += `\\${ch}`;
    else if (code >= 0x20 && code <= 0x7e) out += ch;
    else out += '?';
  }
  return `${out}"`;
}

/** Name of the policy for a status: the rule's `name`, else its full key. */
function policyName(status: DescriptorStatus): string {
  const rule = status.rule;
  if (status.currentLimit !== undefined && status.currentLimit.name !== '') {
    return status.currentLimit.name;
  }
  return rule?.fullKey ?? 'limit';
}

/** The headers for one answer (empty when no status carries a limit). */
export function rateLimitHeaders(
  response: RateLimitResponse,
  options: HeaderOptions,
  nowMs: number,
): HeaderValue[] {
  if (options.format === 'reference') {
    const status = referenceHeaderStatus(response.statuses);
    if (status === undefined) return [];
    return [
      { key: options.limitHeader, value: String(status.currentLimit!.requestsPerUnit) },
      { key: options.remainingHeader, value: String(status.limitRemaining) },
      { key: options.resetHeader, value: String(resetSeconds(status, nowMs)) },
    ];
  }
  const items: IetfLimitItem[] = [];
  for (const status of response.statuses) {
    if (status.currentLimit === undefined) continue;
    items.push({
      name: policyName(status),
      quota: status.currentLimit.requestsPerUnit,
      windowS: Math.max(1, Math.ceil((reportedLimit(status)?.windowMs ?? 1000) / 1000)),
      remaining: status.limitRemaining,
      resetS: resetSeconds(status, nowMs),
      overLimit: status.code === 'OVER_LIMIT',
    });
  }
  return ietfHeaders(items, response.overallCode === 'OVER_LIMIT');
}

/** One limited descriptor as the IETF headers show it. */
export interface IetfLimitItem {
  /** The policy name (a structured-field String; non-ASCII becomes `?`). */
  readonly name: string;
  /** `q`: requests per window. */
  readonly quota: number;
  /** `w`: the window, whole seconds (at least 1). */
  readonly windowS: number;
  /** `r`: room left. */
  readonly remaining: number;
  /** `t`: whole seconds until the room grows, or until an over-limit request is admitted. */
  readonly resetS: number;
  /** This descriptor is over its limit (its `t` counts for `Retry-After`). */
  readonly overLimit: boolean;
}

/**
 * `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers), one list item per
 * limited descriptor, and `Retry-After` (the longest over-limit `t`, at least 1) when `rejected`.
 * Empty when `items` is. The service (for Envoy) and the Node middleware both write them here.
 */
export function ietfHeaders(items: readonly IetfLimitItem[], rejected: boolean): HeaderValue[] {
  if (items.length === 0) return [];
  const policies: string[] = [];
  const limits: string[] = [];
  let retryAfter = 0;
  for (const item of items) {
    const name = sfString(item.name);
    policies.push(`${name};q=${item.quota};w=${item.windowS}`);
    limits.push(`${name};r=${item.remaining};t=${item.resetS}`);
    if (item.overLimit && item.resetS > retryAfter) retryAfter = item.resetS;
  }
  const headers: HeaderValue[] = [
    { key: 'RateLimit-Policy', value: policies.join(', ') },
    { key: 'RateLimit', value: limits.join(', ') },
  ];
  if (rejected) headers.push({ key: 'Retry-After', value: String(Math.max(1, retryAfter)) });
  return headers;
}

/** Seconds a rejected client should wait: the longest OVER_LIMIT reset, rounded up, at least 1. */
function retryAfterSeconds(response: RateLimitResponse, nowMs: number): number {
  let wait = 0;
  for (const status of response.statuses) {
    if (status.code === 'OVER_LIMIT') wait = Math.max(wait, resetSeconds(status, nowMs));
  }
  return Math.max(1, wait);
}

/**
 * The RFC 9457 problem details for a rejection, as UTF-8 JSON: `type` about:blank, `title`
 * "Too Many Requests", `status` 429, a `detail` naming the limit, and `retry_after` in seconds.
 */
export function problemJson(response: RateLimitResponse, nowMs: number): Uint8Array {
  const over = response.statuses.find((status) => status.code === 'OVER_LIMIT');
  return problemBody(over?.currentLimit, retryAfterSeconds(response, nowMs));
}

/**
 * The RFC 9457 problem details of a rejection by `limit` (`undefined`: not known), with
 * `retry_after` in seconds, as UTF-8 JSON. The service and the Node middleware both write it here.
 */
export function problemBody(
  limit:
    { readonly requestsPerUnit: number; readonly unit: string; readonly name: string } | undefined,
  retryAfter: number,
): Uint8Array {
  const detail =
    limit === undefined
      ? 'rate limit exceeded'
      : `rate limit of ${limit.requestsPerUnit} per ${limit.unit} exceeded` +
        (limit.name === '' ? '' : ` (${limit.name})`) +
        `; retry in ${retryAfter} s`;
  const body = {
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    detail,
    retry_after: retryAfter,
  };
  return new TextEncoder().encode(JSON.stringify(body));
}
