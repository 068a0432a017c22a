/**
 * The pure parts of the quota service (./quota-service.ts): a stream's demand, the strategy a
 * share becomes, this replica's part of a limit shared with others, and the bucket key.
 */
import type { BucketRule } from './bucket-rule.js';
import type { PeerDemand } from './demand-exchange.js';
import type { BucketEntry, QuotaStrategy } from './model.js';
import { computeShares } from './shares.js';

/** What {@link demandOf} reads of a stream's record of one bucket. */
export interface UsageHistory {
  /** The last reports' request counts (allowed + denied). */
  readonly counts: readonly number[];
  /** Their durations, ms. */
  readonly elapsed: readonly number[];
  /** The stream's report interval, ms (0 before a report with a duration). */
  readonly intervalMs: number;
  /** When the stream last reported the bucket, ms. */
  readonly lastReportMs: number;
}

/** Most instances one peer replica may claim for one bucket (a bad peer cannot blow up a split). */
const MAX_PEER_INSTANCES = 100_000;

/**
 * This replica's part of `limit`: every replica's streams (this one's, `self`, included) counted
 * as instances with their replica's average demand, in replica id order, split by
 * `computeShares`; this replica's part is the sum of its instances' shares. Every replica
 * computes the same split from the same view, so the parts add up to the limit.
 */
export function replicaBudget(
  limit: number,
  peers: readonly PeerDemand[],
  self: PeerDemand,
  reserveFraction: number,
): number {
  const replicas = [...peers.filter((p) => p.instances > 0 && p.replica !== self.replica), self];
  replicas.sort((a, b) => (a.replica < b.replica ? -1 : a.replica > b.replica ? 1 : 0));
  const vector: number[] = [];
  let first = 0;
  let count = 0;
  for (const r of replicas) {
    const n = Math.min(r.instances, MAX_PEER_INSTANCES);
    if (r === self) {
      first = vector.length;
      count = n;
    }
    for (let i = 0; i < n; i++) vector.push(r.demand / n);
  }
  const shares = computeShares(limit, vector, reserveFraction);
  let budget = 0;
  for (let i = first; i < first + count; i++) budget += shares[i]!;
  return budget;
}

/**
 * The demand `member` reported, requests per window of `rule` (0 for an allowed bucket): its
 * last reports' requests over their time. A stream that has not reported the bucket for three
 * of its intervals counts as idle (Envoy may stop reporting a bucket without traffic).
 */
export function demandOf(member: UsageHistory, rule: BucketRule, now: number): number {
  if (rule.kind !== 'limit') return 0;
  if (member.intervalMs > 0 && now - member.lastReportMs > 3 * member.intervalMs) return 0;
  let count = 0;
  let elapsed = 0;
  for (let i = 0; i < member.counts.length; i++) {
    count += member.counts[i]!;
    elapsed += member.elapsed[i]!;
  }
  if (elapsed <= 0) return count > 0 ? rule.limit : 0;
  return (count / elapsed) * rule.windowMs;
}

const ALLOW_ALL: QuotaStrategy = { kind: 'allow_all' };
const DENY_ALL: QuotaStrategy = { kind: 'deny_all' };

/**
 * How Envoy enforces `share` of `rule` (docs/rlqs.md, "Strategies"): a token bucket refilled
 * with the share every window, holding the share (a window rule) or its part of the burst (a
 * token_bucket rule); allow-all for an allowed bucket, deny-all for a share of 0.
 */
export function strategyOf(rule: BucketRule, share: number): QuotaStrategy {
  if (rule.kind === 'allow') return ALLOW_ALL;
  if (share <= 0) return DENY_ALL;
  const maxTokens = rule.tokenBucket
    ? Math.max(1, Math.round((rule.burst * share) / rule.limit))
    : share;
  return {
    kind: 'token_bucket',
    maxTokens: Math.min(maxTokens, 0xffffffff),
    tokensPerFill: Math.min(share, 0xffffffff),
    fillIntervalMs: rule.windowMs,
  };
}

/** The map key of a bucket: its domain and its entries sorted by key (JSON: unambiguous). */
export function bucketKey(domain: string, id: readonly BucketEntry[]): string {
  const sorted = [...id].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return JSON.stringify([domain, ...sorted.map((e) => [e.key, e.value])]);
}

/** Whether two peer views hold the same numbers. */
export function samePeers(a: readonly PeerDemand[], b: readonly PeerDemand[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.replica !== y.replica || x.demand !== y.demand || x.instances !== y.instances) {
      return false;
    }
  }
  return true;
}

/** `partial` without its `undefined` fields. */
export function stripUndefined<T extends object>(partial: Partial<T>): Partial<T> {
  return Object.fromEntries(
    Object.entries(partial).filter(([, v]) => v !== undefined),
  ) as Partial<T>;
}

/** What {@link mustSend} reads of a stream's record of one bucket: what it was last sent. */
export interface SentRecord {
  /** The strategy last sent; `undefined` before the first. */
  readonly sent: QuotaStrategy | undefined;
  /** The share it carried. */
  readonly sentShare: number;
  /** When it was sent, ms. */
  readonly sentAtMs: number;
}

/**
 * Whether `member` must be sent `strategy` now: nothing sent yet (the first report is a
 * watch), a different kind of strategy, a smaller share (at once, so the shares sent never sum
 * past the limit), a share grown by a tenth or more (smaller rises wait: each new token bucket
 * starts full in Envoy, so every change costs up to one share of overshoot), or half the TTL
 * gone (a refresh).
 */
export function mustSend(
  member: SentRecord,
  strategy: QuotaStrategy,
  share: number,
  ttlMs: number,
  now: number,
): boolean {
  const sent = member.sent;
  if (sent === undefined || sent.kind !== strategy.kind) return true;
  if (now - member.sentAtMs >= ttlMs / 2) return true;
  if (strategy.kind !== 'token_bucket' || sent.kind !== 'token_bucket') return false;
  if (share < member.sentShare) return true;
  // The same share of a changed rule (a reload: another burst or window) goes out at once.
  if (sent.fillIntervalMs !== strategy.fillIntervalMs) return true;
  if (sent.maxTokens !== strategy.maxTokens && share === member.sentShare) return true;
  return share - member.sentShare >= Math.max(1, Math.ceil(member.sentShare / 10));
}
