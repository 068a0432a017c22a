/**
 * One RLQS report stream as the quota service (./quota-service.ts) keeps it: the transport's
 * side (`QuotaSink`), the stream's buckets and the actions waiting for its client to read.
 */
import type { ConfigSnapshot } from '../config/types.js';
import type { BucketRule } from './bucket-rule.js';
import type { PeerDemand } from './demand-exchange.js';
import type { BucketAction, BucketEntry, QuotaStrategy, UsageReports } from './model.js';

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

/** One stream's view of one bucket: its recent usage and what it was last sent. */
export interface Member {
  readonly stream: QuotaStream;
  readonly bucket: Bucket;
  /** The last reports' request counts (allowed + denied) and their durations, ms. */
  readonly counts: number[];
  readonly elapsed: number[];
  /** The last report's requests allowed and denied, for the console (counts holds their sum). */
  lastAllowed: number;
  lastDenied: number;
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
export interface Bucket {
  readonly key: string;
  readonly domain: string;
  readonly id: readonly BucketEntry[];
  /** Its rule, for `snapshot`. */
  rule: BucketRule;
  snapshot: ConfigSnapshot | undefined;
  readonly members: Map<QuotaStream, Member>;
  /** The other replicas' demand for it, from the last exchange (empty without one). */
  peers: readonly PeerDemand[];
  /** When its shares were last recomputed, ms (`-Infinity` before the first time). */
  rebalancedMs: number;
}

/** What a stream asks of the service that owns it. */
export interface StreamOwner {
  /** Handle one report of `stream`. */
  handle(stream: QuotaStream, reports: UsageReports): void;
  /** Count `actions` as written. */
  counted(actions: readonly BucketAction[]): void;
  /** The stream ended: return its shares. */
  closeStream(stream: QuotaStream): void;
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
    private readonly service: StreamOwner,
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
