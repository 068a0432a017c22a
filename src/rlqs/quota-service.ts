/**
 * The Rate Limit Quota Service in domain terms (docs/rlqs.md): report streams come in from the
 * transports, each report's buckets are matched to rules (./bucket-rule.ts), each bucket's
 * budget is split between the streams that report it (./shares.ts), and an assignment is pushed
 * to a stream when its share changes, when a bucket is new to it (the first report is a watch),
 * and before the last one expires. Everything one stream holds is bounded (buckets, pending
 * actions); a stream whose client does not read gets no more writes, only its latest action per
 * bucket is kept until it drains.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import type { Logger } from '../logging/logger.js';
import type { RlqsCounters } from '../metrics/metrics.js';
import { bucketRule, type BucketRule } from './bucket-rule.js';
import type { BucketAction, BucketEntry, QuotaStrategy, UsageReports } from './model.js';
import { DEFAULT_RESERVE_FRACTION, computeShares } from './shares.js';

/** Bounds and timings of the service (docs/rlqs.md, "Limits"). */
export interface QuotaLimits {
  /** Report streams open at once; one more is refused RESOURCE_EXHAUSTED. */
  readonly maxStreams: number;
  /** Distinct buckets one stream may report; a report past it ends the stream. */
  readonly maxBucketsPerStream: number;
  /** Entries in one bucket id. */
  readonly maxBucketEntries: number;
  /** Characters in one bucket id key or value, and in the domain. */
  readonly maxValueLength: number;
  /** Reports a stream's demand is averaged over, per bucket. */
  readonly reportsKept: number;
  /** Shortest assignment time to live, ms (the TTL is 4 report intervals, at least this). */
  readonly minTtlMs: number;
  /** Longest assignment time to live, ms. */
  readonly maxTtlMs: number;
  /** A stream that sends no report for this long is ended (DEADLINE_EXCEEDED); 0: never. */
  readonly idleStreamMs: number;
  /** Part of each limit set aside as the instances' floors (./shares.ts). */
  readonly reserveFraction: number;
}

/** The defaults of {@link QuotaLimits}. */
const DEFAULT_QUOTA_LIMITS: QuotaLimits = {
  maxStreams: 1_000,
  maxBucketsPerStream: 1_000,
  maxBucketEntries: 16,
  maxValueLength: 1_024,
  reportsKept: 3,
  minTtlMs: 10_000,
  maxTtlMs: 300_000,
  idleStreamMs: 600_000,
  reserveFraction: DEFAULT_RESERVE_FRACTION,
};

/** Why the service ends a stream; the transport maps it to a gRPC status. */
export type QuotaRefusal =
  /** The report breaks the protocol or a size bound: INVALID_ARGUMENT. */
  | 'invalid'
  /** Too many streams or buckets: RESOURCE_EXHAUSTED. */
  | 'exhausted'
  /** No report within `idleStreamMs`: DEADLINE_EXCEEDED. */
  | 'idle';

/** Where a stream's answers go: the transport's side of one report stream. */
export interface QuotaSink {
  /** Whether a write now would be read (false while the client's window is full). */
  writable(): boolean;
  /** Write one response holding `actions` (at least one). */
  send(actions: readonly BucketAction[]): void;
  /** End the stream with an error; the transport then calls {@link QuotaStream.close}. */
  end(reason: QuotaRefusal, message: string): void;
}

/** Options of {@link QuotaService}. */
export interface QuotaServiceOptions {
  /** The rules serving now (`undefined`: none loaded, every bucket is allowed). */
  readonly snapshot: () => ConfigSnapshot | undefined;
  /** Time source, ms. */
  readonly clock: Clock;
  /** Where streams, buckets, reports and assignments are counted. */
  readonly counters: RlqsCounters;
  /** Module logger. */
  readonly logger: Logger;
  /** Bounds; `undefined` fields take {@link DEFAULT_QUOTA_LIMITS}. */
  readonly limits?: Partial<QuotaLimits> | undefined;
}

/** One stream's view of one bucket: its recent usage and what it was last sent. */
export interface Member {
  readonly stream: QuotaStream;
  readonly bucket: Bucket;
  /** The last reports' request counts (allowed + denied) and their durations, ms. */
  readonly counts: number[];
  readonly elapsed: number[];
  /** Report interval estimate, ms (the last report's `time_elapsed`). */
  intervalMs: number;
  /** When this stream last reported the bucket, ms. */
  lastReportMs: number;
  /** The share computed last (tokens per window). */
  share: number;
  /** The strategy last sent, and the share it carried; `undefined` before the first. */
  sent: QuotaStrategy | undefined;
  sentShare: number;
  /** When it was sent, ms. */
  sentAtMs: number;
}

/** A bucket (domain + id) and the streams that report it. */
interface Bucket {
  readonly key: string;
  readonly domain: string;
  readonly id: readonly BucketEntry[];
  /** Its rule, for `snapshot`. */
  rule: BucketRule;
  snapshot: ConfigSnapshot | undefined;
  readonly members: Map<QuotaStream, Member>;
}

/** The service: every open stream and bucket of this process. */
export class QuotaService {
  private readonly snapshot: () => ConfigSnapshot | undefined;
  private readonly clock: Clock;
  private readonly counters: RlqsCounters;
  private readonly logger: Logger;
  /** The bounds in force. */
  readonly limits: QuotaLimits;
  private readonly streams = new Set<QuotaStream>();
  private readonly buckets = new Map<string, Bucket>();
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(options: QuotaServiceOptions) {
    this.snapshot = options.snapshot;
    this.clock = options.clock;
    this.counters = options.counters;
    this.logger = options.logger;
    this.limits = { ...DEFAULT_QUOTA_LIMITS, ...stripUndefined(options.limits ?? {}) };
  }

  /**
   * Open a stream answering into `sink`, or `undefined` after ending it through `sink` when
   * `maxStreams` are open.
   */
  open(sink: QuotaSink): QuotaStream | undefined {
    if (this.streams.size >= this.limits.maxStreams) {
      this.counters.streamsRefused++;
      sink.end(
        'exhausted',
        `RLQS stream refused: ${this.limits.maxStreams} streams are open (RLQS_MAX_STREAMS); retry later`,
      );
      return undefined;
    }
    const stream = new QuotaStream(this, sink, this.clock());
    this.streams.add(stream);
    this.counters.streams = this.streams.size;
    return stream;
  }

  /** Streams open now. */
  get streamCount(): number {
    return this.streams.size;
  }

  /** Actions waiting for their clients to read, over every stream (bounded by their buckets). */
  get pendingCount(): number {
    let pending = 0;
    for (const stream of this.streams) pending += stream.pending.size;
    return pending;
  }

  /** Buckets known now (each reported by at least one stream). */
  get bucketCount(): number {
    return this.buckets.size;
  }

  /**
   * Each bucket, its rule and its streams' demands and shares, for the console and tests;
   * `limit` is `undefined` for an allowed bucket.
   */
  *describe(): IterableIterator<{
    readonly domain: string;
    readonly bucketId: readonly BucketEntry[];
    readonly limit: number | undefined;
    readonly shares: readonly {
      readonly demand: number;
      readonly share: number;
      readonly sent: number | undefined;
    }[];
  }> {
    for (const bucket of this.buckets.values()) {
      const rule = bucket.rule;
      yield {
        domain: bucket.domain,
        bucketId: bucket.id,
        limit: rule.kind === 'limit' ? rule.limit : undefined,
        shares: [...bucket.members.values()].map((m) => ({
          demand: demandOf(m, rule, this.clock()),
          share: m.share,
          sent: m.sent === undefined ? undefined : m.sentShare,
        })),
      };
    }
  }

  /** Start the sweep: idle streams and buckets no longer reported (once a second). */
  start(): void {
    this.sweepTimer ??= setInterval(() => this.sweep(), 1_000);
    this.sweepTimer.unref();
  }

  /** Stop the sweep (streams end with their transport). */
  stop(): void {
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
  }

  /**
   * End streams idle past `idleStreamMs`; abandon each bucket a stream stopped reporting (no
   * report for twice its TTL), returning its share to the others. Called by the timer; tests
   * call it with a manual clock.
   */
  sweep(): void {
    const now = this.clock();
    const { idleStreamMs } = this.limits;
    const touched = new Set<Bucket>();
    for (const stream of [...this.streams]) {
      if (idleStreamMs > 0 && now - stream.lastReportMs >= idleStreamMs) {
        this.counters.streamsRefused++;
        stream.sink.end('idle', `no RLQS report for ${idleStreamMs} ms; reconnect`);
        this.closeStream(stream);
        continue;
      }
      for (const member of stream.members.values()) {
        if (now - member.lastReportMs < 2 * this.ttlOf(member)) continue;
        this.leave(member);
        touched.add(member.bucket);
        stream.queue(member.bucket.key, { kind: 'abandon', bucketId: member.bucket.id });
      }
    }
    for (const bucket of touched) this.rebalance(bucket, now);
    this.flushAll();
  }

  /** Handle one report of `stream` (see {@link QuotaStream.report}). */
  report(stream: QuotaStream, reports: UsageReports): void {
    const problem = this.check(stream, reports);
    if (problem !== undefined) {
      this.counters.streamsRefused++;
      stream.sink.end(problem[0], problem[1]);
      this.closeStream(stream);
      return;
    }
    const now = this.clock();
    stream.lastReportMs = now;
    this.counters.reports++;
    const snapshot = this.snapshot();
    const touched = new Set<Bucket>();
    for (const usage of reports.usages) {
      const key = bucketKey(reports.domain, usage.bucketId);
      let member = stream.members.get(key);
      if (member === undefined) {
        member = this.join(stream, key, reports.domain, usage.bucketId, now);
      }
      const bucket = member.bucket;
      if (bucket.snapshot !== snapshot) {
        bucket.snapshot = snapshot;
        bucket.rule = bucketRule(snapshot, bucket.domain, bucket.id);
      }
      const count = usage.allowed + usage.denied;
      this.counters.requestsAllowed += usage.allowed;
      this.counters.requestsDenied += usage.denied;
      member.counts.push(count);
      member.elapsed.push(usage.elapsedMs);
      if (member.counts.length > this.limits.reportsKept) {
        member.counts.shift();
        member.elapsed.shift();
      }
      if (usage.elapsedMs > 0) member.intervalMs = usage.elapsedMs;
      member.lastReportMs = now;
      touched.add(bucket);
    }
    for (const bucket of touched) this.rebalance(bucket, now);
    this.flushAll();
  }

  /** A reason to refuse `reports`, or `undefined`. */
  private check(stream: QuotaStream, reports: UsageReports): [QuotaRefusal, string] | undefined {
    const { maxBucketEntries, maxValueLength, maxBucketsPerStream } = this.limits;
    if (reports.domain === '') return ['invalid', 'RLQS report without a domain'];
    if (reports.domain.length > maxValueLength) {
      return ['invalid', `RLQS report domain longer than ${maxValueLength} characters`];
    }
    // Buckets new to the stream, each once (a report may name a bucket several times); the set
    // stops growing at the bound.
    const fresh = new Set<string>();
    const room = maxBucketsPerStream - stream.members.size;
    for (const usage of reports.usages) {
      const id = usage.bucketId;
      if (id.length === 0) return ['invalid', 'RLQS report names a bucket with an empty id'];
      if (id.length > maxBucketEntries) {
        return ['invalid', `RLQS bucket id with more than ${maxBucketEntries} entries`];
      }
      for (const entry of id) {
        if (entry.key.length > maxValueLength || entry.value.length > maxValueLength) {
          return [
            'invalid',
            `RLQS bucket id key or value longer than ${maxValueLength} characters`,
          ];
        }
      }
      const key = bucketKey(reports.domain, id);
      if (!stream.members.has(key)) fresh.add(key);
      if (fresh.size > room) {
        return [
          'exhausted',
          `RLQS stream reports more than ${maxBucketsPerStream} buckets (RLQS_MAX_BUCKETS_PER_STREAM)`,
        ];
      }
    }
    return undefined;
  }

  /** `stream` reports bucket `key` for the first time. */
  private join(
    stream: QuotaStream,
    key: string,
    domain: string,
    id: readonly BucketEntry[],
    now: number,
  ): Member {
    let bucket = this.buckets.get(key);
    if (bucket === undefined) {
      const snapshot = this.snapshot();
      bucket = {
        key,
        domain,
        id: id.map((e) => ({ key: e.key, value: e.value })),
        rule: bucketRule(snapshot, domain, id),
        snapshot,
        members: new Map(),
      };
      this.buckets.set(key, bucket);
    }
    const member: Member = {
      stream,
      bucket,
      counts: [],
      elapsed: [],
      intervalMs: 0,
      lastReportMs: now,
      share: 0,
      sent: undefined,
      sentShare: 0,
      sentAtMs: now,
    };
    bucket.members.set(stream, member);
    stream.members.set(key, member);
    this.counters.buckets++;
    return member;
  }

  /** Remove `member` from its bucket (the bucket goes when its last stream does). */
  private leave(member: Member): void {
    const bucket = member.bucket;
    bucket.members.delete(member.stream);
    member.stream.members.delete(bucket.key);
    this.counters.buckets--;
    if (bucket.members.size === 0) this.buckets.delete(bucket.key);
  }

  /** The stream ended (by either side): its buckets' shares return to the other streams. */
  closeStream(stream: QuotaStream): void {
    if (!this.streams.delete(stream)) return;
    this.counters.streams = this.streams.size;
    const touched: Bucket[] = [];
    for (const member of [...stream.members.values()]) {
      this.leave(member);
      touched.push(member.bucket);
    }
    stream.pending.clear();
    const now = this.clock();
    for (const bucket of touched) if (bucket.members.size > 0) this.rebalance(bucket, now);
    this.flushAll();
  }

  /** Recompute `bucket`'s shares; queue an action for each stream that must be told. */
  private rebalance(bucket: Bucket, now: number): void {
    const members = [...bucket.members.values()];
    if (members.length === 0) return;
    const rule = bucket.rule;
    const shares =
      rule.kind === 'limit'
        ? computeShares(
            rule.limit,
            members.map((m) => demandOf(m, rule, now)),
            this.limits.reserveFraction,
          )
        : undefined;
    for (let i = 0; i < members.length; i++) {
      const member = members[i]!;
      const share = shares === undefined ? 0 : shares[i]!;
      member.share = share;
      const strategy = strategyOf(rule, share);
      const ttlMs = this.ttlOf(member);
      if (!this.mustSend(member, strategy, share, ttlMs, now)) continue;
      member.sent = strategy;
      member.sentShare = share;
      member.sentAtMs = now;
      member.stream.queue(bucket.key, {
        kind: 'assign',
        bucketId: bucket.id,
        ttlMs,
        strategy,
      });
    }
  }

  /**
   * Whether `member` must be sent `strategy` now: nothing sent yet (the first report is a
   * watch), a different kind of strategy, a smaller share (at once, so the shares sent never sum
   * past the limit), a share grown by a tenth or more (smaller rises wait: each new token bucket
   * starts full in Envoy, so every change costs up to one share of overshoot), or half the TTL
   * gone (a refresh).
   */
  private mustSend(
    member: Member,
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
    if (sent.maxTokens !== strategy.maxTokens && share === member.sentShare) return true;
    return share - member.sentShare >= Math.max(1, Math.ceil(member.sentShare / 10));
  }

  /** The assignment TTL for `member`: 4 report intervals, within the configured bounds. */
  private ttlOf(member: Member): number {
    const { minTtlMs, maxTtlMs } = this.limits;
    return Math.min(maxTtlMs, Math.max(minTtlMs, 4 * member.intervalMs));
  }

  /** Write what each stream has queued, where its client reads. */
  private flushAll(): void {
    for (const stream of this.streams) if (stream.pending.size > 0) stream.flush();
  }

  /** Count actions written (the stream calls this as it sends). */
  counted(actions: readonly BucketAction[]): void {
    for (const action of actions) {
      if (action.kind === 'assign') this.counters.assignments++;
      else this.counters.abandons++;
    }
  }

  /** Hand a report to the service, logging a failure it did not expect. */
  handle(stream: QuotaStream, reports: UsageReports): void {
    try {
      this.report(stream, reports);
    } catch (err) {
      this.logger.error({ err }, 'RLQS report failed');
      this.counters.streamsRefused++;
      stream.sink.end('invalid', 'RLQS report could not be handled');
      this.closeStream(stream);
    }
  }
}

/**
 * One report stream (one Envoy instance, one filter config): the buckets it reports and the
 * actions waiting for its client to read (the latest per bucket only).
 */
export class QuotaStream {
  /** Its buckets, by bucket key. */
  readonly members = new Map<string, Member>();
  /** Actions not yet written, by bucket key: at most one per bucket it reports or abandoned. */
  readonly pending = new Map<string, BucketAction>();
  /** When it last reported, ms (its opening counts as one). */
  lastReportMs: number;

  constructor(
    private readonly service: QuotaService,
    /** The transport's side. */
    readonly sink: QuotaSink,
    openedMs: number,
  ) {
    this.lastReportMs = openedMs;
  }

  /** One report message arrived. */
  report(reports: UsageReports): void {
    this.service.handle(this, reports);
  }

  /** The client reads again (the transport's 'drain'): write what waits. */
  flush(): void {
    if (this.pending.size === 0 || !this.sink.writable()) return;
    const actions = [...this.pending.values()];
    this.pending.clear();
    this.service.counted(actions);
    this.sink.send(actions);
  }

  /** The stream ended: its shares return to the others. */
  close(): void {
    this.service.closeStream(this);
  }

  /** Queue `action` for bucket `key`, replacing one not yet written. */
  queue(key: string, action: BucketAction): void {
    this.pending.delete(key);
    this.pending.set(key, action);
  }
}

/**
 * The demand `member` reported, requests per window of `rule` (0 for an allowed bucket): its
 * last reports' requests over their time. A stream that has not reported the bucket for three
 * of its intervals counts as idle (Envoy may stop reporting a bucket without traffic).
 */
function demandOf(member: Member, rule: BucketRule, now: number): number {
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
function strategyOf(rule: BucketRule, share: number): QuotaStrategy {
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
function bucketKey(domain: string, id: readonly BucketEntry[]): string {
  const sorted = [...id].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return JSON.stringify([domain, ...sorted.map((e) => [e.key, e.value])]);
}

/** `partial` without its `undefined` fields. */
function stripUndefined<T extends object>(partial: Partial<T>): Partial<T> {
  return Object.fromEntries(
    Object.entries(partial).filter(([, v]) => v !== undefined),
  ) as Partial<T>;
}
