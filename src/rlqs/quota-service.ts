/**
 * The Rate Limit Quota Service in domain terms (docs/rlqs.md): report streams come in from the
 * transports, each report's buckets are matched to rules (./bucket-rule.ts), each bucket's
 * budget is split between the streams that report it (./shares.ts), and an assignment is pushed
 * to a stream when its share changes, when a bucket is new to it (the first report is a watch),
 * and before the last one expires. Everything one stream holds is bounded (buckets, pending
 * actions); a stream whose client does not read gets no more writes, only its latest action per
 * bucket is kept until it drains. So is the CPU one report costs: a bucket's shares are
 * recomputed at most once per `rebalanceMs` (or when a stream joins or leaves it), and one report
 * recomputes at most `rebalanceBudget` shares; the rest wait for the timer's pass.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import type { Logger } from '../logging/logger.js';
import type { RlqsCounters } from '../metrics/metrics.js';
import { bucketRule, type BucketRule } from './bucket-rule.js';
import type { DemandExchange, LocalDemand, PeerDemand } from './demand-exchange.js';
import type { BucketAction, BucketEntry, QuotaStrategy, UsageReports } from './model.js';
import {
  QuotaStream,
  type Bucket,
  type Member,
  type QuotaSink,
  type StreamOwner,
} from './quota-stream.js';
import {
  bucketKey,
  demandOf,
  mustSend,
  replicaBudget,
  samePeers,
  strategyOf,
  stripUndefined,
} from './assignment.js';
import { computeShares, shareFloor } from './shares.js';
import { DEFAULT_QUOTA_LIMITS, checkReport, type QuotaLimits } from './limits.js';

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
  /**
   * Where replicas share their demand (Redis); `undefined`: this process splits each limit
   * among its own streams only.
   */
  readonly exchange?: DemandExchange | undefined;
  /** How long the other replicas' last numbers are used while the exchange fails, ms. */
  readonly exchangeTtlMs?: number;
}

/** Most peer replicas counted per bucket. */
const MAX_PEERS = 1_000;

/** The service: every open stream and bucket of this process. */
export class QuotaService implements StreamOwner {
  private readonly snapshot: () => ConfigSnapshot | undefined;
  private readonly clock: Clock;
  private readonly counters: RlqsCounters;
  private readonly logger: Logger;
  /** The bounds in force. */
  readonly limits: QuotaLimits;
  private readonly streams = new Set<QuotaStream>();
  private readonly buckets = new Map<string, Bucket>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Stream-bucket records held (every stream's buckets). */
  private memberCount = 0;
  private readonly exchange: DemandExchange | undefined;
  private readonly exchangeTtlMs: number;
  /** An exchange is running. */
  private exchanging = false;
  /** When the last exchange succeeded, ms. */
  private exchangedMs = 0;
  /** The exchange is failing (logged once per change). */
  private exchangeFailing = false;
  /** Buckets whose shares wait for the timer's pass (in the order they were put off). */
  private readonly deferred = new Set<Bucket>();
  /** A pass over {@link deferred} is scheduled for the next turn. */
  private settling = false;

  constructor(options: QuotaServiceOptions) {
    this.snapshot = options.snapshot;
    this.clock = options.clock;
    this.counters = options.counters;
    this.logger = options.logger;
    this.limits = { ...DEFAULT_QUOTA_LIMITS, ...stripUndefined(options.limits ?? {}) };
    this.exchange = options.exchange;
    this.exchangeTtlMs = options.exchangeTtlMs ?? 5_000;
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
   * `limit` is `undefined` for an allowed bucket. Per stream, `allowed` and `denied` are its last
   * report's, `strategy` the one last sent and `ttlMs` the time to live its assignments carry.
   */
  *describe(): IterableIterator<{
    readonly domain: string;
    readonly bucketId: readonly BucketEntry[];
    readonly limit: number | undefined;
    readonly rule: BucketRule;
    readonly shares: readonly {
      readonly demand: number;
      readonly share: number;
      readonly sent: number | undefined;
      readonly strategy: QuotaStrategy | undefined;
      readonly allowed: number;
      readonly denied: number;
      readonly elapsedMs: number;
      readonly ttlMs: number;
    }[];
  }> {
    for (const bucket of this.buckets.values()) {
      const rule = bucket.rule;
      yield {
        domain: bucket.domain,
        bucketId: bucket.id,
        limit: rule.kind === 'limit' ? rule.limit : undefined,
        rule,
        shares: [...bucket.members.values()].map((m) => ({
          demand: demandOf(m, rule, this.clock()),
          share: m.share,
          sent: m.sent === undefined ? undefined : m.sentShare,
          strategy: m.sent,
          allowed: m.lastAllowed,
          denied: m.lastDenied,
          elapsedMs: m.elapsed.at(-1) ?? 0,
          ttlMs: this.ttlOf(m),
        })),
      };
    }
  }

  /**
   * Start the sweep (idle streams, buckets no longer reported) and the exchange with the other
   * replicas, once a second each.
   */
  start(): void {
    this.sweepTimer ??= setInterval(() => {
      this.sweep();
      this.settleLater(this.memberCount);
      void this.exchangeDemand();
    }, 1_000);
    this.sweepTimer.unref();
  }

  /**
   * Recompute the shares of deferred buckets, oldest first, up to `rebalanceBudget` shares (at
   * least one bucket), and write what that queued. Returns whether buckets still wait. The
   * timer's pass calls it once per turn until none do; tests call it directly.
   */
  settle(): boolean {
    const now = this.clock();
    let budget = this.limits.rebalanceBudget;
    for (const bucket of this.deferred) {
      if (bucket.members.size > budget && budget < this.limits.rebalanceBudget) break;
      budget -= bucket.members.size;
      this.rebalance(bucket, now);
    }
    this.flushAll();
    return this.deferred.size > 0;
  }

  /**
   * Settle the deferred buckets one budget per turn, so no turn holds the loop for long, until
   * none wait or `left` shares are computed (one pass: reports that defer buckets meanwhile do not
   * keep it going; the next pass takes them).
   */
  private settleLater(left: number): void {
    if (this.settling || this.deferred.size === 0 || left <= 0) return;
    this.settling = true;
    setImmediate(() => {
      this.settling = false;
      const before = this.counters.sharesComputed;
      if (this.settle()) this.settleLater(left - (this.counters.sharesComputed - before));
    });
  }

  /**
   * Publish this replica's demand per limited bucket and take in the other replicas' (one
   * exchange at a time); buckets whose peers changed are rebalanced. While the exchange fails,
   * the last view is kept for the exchange TTL, then dropped (each replica then splits the whole
   * limit among its own streams: docs/rlqs.md). Called by the timer; tests call it directly.
   */
  async exchangeDemand(): Promise<void> {
    const exchange = this.exchange;
    if (exchange === undefined || this.exchanging) return;
    this.exchanging = true;
    try {
      const now = this.clock();
      const local: LocalDemand[] = [];
      for (const bucket of this.buckets.values()) {
        const rule = bucket.rule;
        if (rule.kind !== 'limit') continue;
        let demand = 0;
        for (const member of bucket.members.values()) demand += demandOf(member, rule, now);
        local.push({ key: bucket.key, demand, instances: bucket.members.size });
      }
      let peers: Map<string, PeerDemand[]>;
      try {
        peers = await exchange.exchange(local);
      } catch (err) {
        if (!this.exchangeFailing) {
          this.exchangeFailing = true;
          this.logger.warn({ err }, 'RLQS demand exchange failed; using the last view meanwhile');
        }
        if (this.clock() - this.exchangedMs > this.exchangeTtlMs) this.applyPeers(new Map());
        return;
      }
      if (this.exchangeFailing) {
        this.exchangeFailing = false;
        this.logger.info('RLQS demand exchange works again');
      }
      this.exchangedMs = this.clock();
      this.applyPeers(peers);
    } finally {
      this.exchanging = false;
    }
  }

  /**
   * Take in the peers' view; rebalance each bucket whose peers changed (one budget now, the rest
   * in the following turns).
   */
  private applyPeers(view: ReadonlyMap<string, readonly PeerDemand[]>): void {
    for (const bucket of this.buckets.values()) {
      const next = view.get(bucket.key) ?? [];
      if (samePeers(bucket.peers, next)) continue;
      bucket.peers = next.slice(0, MAX_PEERS);
      this.deferred.add(bucket);
    }
    this.settle();
    this.settleLater(this.memberCount);
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
    for (const bucket of touched) if (bucket.members.size > 0) this.deferred.add(bucket);
    this.settle();
  }

  /** Handle one report of `stream` (see {@link QuotaStream.report}). */
  report(stream: QuotaStream, reports: UsageReports): void {
    const problem = checkReport(this.limits, reports, stream.members, this.memberCount);
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
    const joined: Member[] = [];
    for (const usage of reports.usages) {
      const key = bucketKey(reports.domain, usage.bucketId);
      let member = stream.members.get(key);
      if (member === undefined) {
        member = this.join(stream, key, reports.domain, usage.bucketId, now);
        joined.push(member);
      }
      const bucket = member.bucket;
      if (bucket.snapshot !== snapshot) {
        bucket.snapshot = snapshot;
        bucket.rule = bucketRule(snapshot, bucket.domain, bucket.id);
      }
      const count = usage.allowed + usage.denied;
      this.counters.requestsAllowed += usage.allowed;
      this.counters.requestsDenied += usage.denied;
      member.lastAllowed = usage.allowed;
      member.lastDenied = usage.denied;
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
    // Buckets it joined first: their new streams wait for an answer (the first report is a
    // watch). The others only if their shares are due; the rest wait for the timer's pass.
    const fresh = new Set(joined.map((m) => m.bucket));
    const { rebalanceMs } = this.limits;
    this.rebalanceWithin(new Set([...fresh, ...touched]), now, (bucket) => {
      return fresh.has(bucket) || now - bucket.rebalancedMs >= rebalanceMs;
    });
    // A stream new to a bucket put off gets a standby share until the pass computes its own.
    for (const member of joined) if (member.sent === undefined) this.standby(member, now);
    this.flushAll();
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
        peers: [],
        rebalancedMs: Number.NEGATIVE_INFINITY,
      };
      this.buckets.set(key, bucket);
    }
    const member: Member = {
      stream,
      bucket,
      counts: [],
      elapsed: [],
      lastAllowed: 0,
      lastDenied: 0,
      intervalMs: 0,
      lastReportMs: now,
      share: 0,
      sent: undefined,
      sentShare: 0,
      sentAtMs: now,
    };
    bucket.members.set(stream, member);
    stream.members.set(key, member);
    this.memberCount++;
    this.counters.buckets = this.memberCount;
    return member;
  }

  /** Remove `member` from its bucket (the bucket goes when its last stream does). */
  private leave(member: Member): void {
    const bucket = member.bucket;
    bucket.members.delete(member.stream);
    member.stream.members.delete(bucket.key);
    this.memberCount--;
    this.counters.buckets = this.memberCount;
    if (bucket.members.size === 0) {
      this.buckets.delete(bucket.key);
      this.deferred.delete(bucket);
    }
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
    // Its shares return at once, up to one budget; the rest with the timer's pass.
    this.rebalanceWithin(touched, this.clock(), () => true);
    this.flushAll();
  }

  /**
   * Rebalance each of `buckets` that is `due`, in order, while `rebalanceBudget` shares last;
   * defer the others to the timer's pass. Buckets without streams are skipped.
   */
  private rebalanceWithin(
    buckets: Iterable<Bucket>,
    now: number,
    due: (bucket: Bucket) => boolean,
  ): void {
    let budget = this.limits.rebalanceBudget;
    for (const bucket of buckets) {
      const size = bucket.members.size;
      if (size === 0) continue;
      if (size <= budget && due(bucket)) {
        budget -= size;
        this.rebalance(bucket, now);
      } else {
        this.deferred.add(bucket);
      }
    }
  }

  /** Recompute `bucket`'s shares; queue an action for each stream that must be told. */
  private rebalance(bucket: Bucket, now: number): void {
    this.deferred.delete(bucket);
    const members = [...bucket.members.values()];
    if (members.length === 0) return;
    bucket.rebalancedMs = now;
    this.counters.sharesComputed += members.length;
    const rule = bucket.rule;
    const shares =
      rule.kind === 'limit'
        ? computeShares(
            this.budgetOf(bucket, rule.limit, members, now),
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
      if (!mustSend(member, strategy, share, ttlMs, now)) continue;
      this.send(member, strategy, share, ttlMs, now);
    }
  }

  /**
   * Give `member`, new to a bucket whose shares were put off, the standby share of an idle
   * instance (docs/rlqs.md, "Fairness") until the pass computes its own: the others keep theirs,
   * so the shares sent stay within the bound for idle instances.
   */
  private standby(member: Member, now: number): void {
    const bucket = member.bucket;
    const rule = bucket.rule;
    const share =
      rule.kind === 'limit'
        ? shareFloor(rule.limit, bucket.members.size, this.limits.reserveFraction)
        : 0;
    member.share = share;
    this.send(member, strategyOf(rule, share), share, this.ttlOf(member), now);
  }

  /** Queue `strategy` for `member`'s stream and remember it as sent. */
  private send(
    member: Member,
    strategy: QuotaStrategy,
    share: number,
    ttlMs: number,
    now: number,
  ): void {
    member.sent = strategy;
    member.sentShare = share;
    member.sentAtMs = now;
    member.stream.queue(member.bucket.key, {
      kind: 'assign',
      bucketId: member.bucket.id,
      ttlMs,
      strategy,
    });
  }

  /** This replica's part of `limit` for `bucket` (see {@link replicaBudget}). */
  private budgetOf(bucket: Bucket, limit: number, members: readonly Member[], now: number): number {
    const exchange = this.exchange;
    if (exchange === undefined || bucket.peers.length === 0) return limit;
    let demand = 0;
    for (const member of members) demand += demandOf(member, bucket.rule, now);
    return replicaBudget(
      limit,
      bucket.peers,
      { replica: exchange.replica, demand, instances: members.length },
      this.limits.reserveFraction,
    );
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
