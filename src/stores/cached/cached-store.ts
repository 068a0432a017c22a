/**
 * Cached mode (`REDIS_MODE=cached`, docs/cached-mode.md): a {@link CounterStore} that decides
 * every call from local state, synchronously, and syncs with the shared store (Redis) once per
 * interval instead of once per call.
 *
 * Per counter it holds the global view from the last sync (the hits the shared counter held,
 * `synced`, valid until `syncedUntil`) and the hits admitted here since (`local`, aged by the
 * algorithm's own steps). A batch is decided by the batch rule of stores/batch.ts on
 * `synced + local + hits <= limit`: all or nothing, shadow and quota as everywhere; a rejected
 * batch charges nothing. Admitted hits are also kept as `pending`.
 *
 * Every interval one sync sends, for each counter with pending hits or used since the last sync,
 * one `shadow` spec to the shared store: shadow charges the pending hits whatever the count (they
 * were admitted already) and reads back what the counter holds, which becomes the new view.
 * Requests go in chunks the Redis store sends as one script call each; exact and cached replicas
 * count on the same keys. When a sync fails its hits stay pending for the next one.
 *
 * Only algorithms whose count never grows without new hits can be decided from an old view:
 * {@link CACHED_MODE_ALGORITHMS}. Configuration refuses the others (settings.ts).
 */
import type { Algorithm, CounterState } from '../../algorithms/index.js';
import { ALGORITHM_STEPS, createCounterState } from '../../algorithms/index.js';
import { windowStartMs } from '../../algorithms/fixed-window.js';
import { bucketMsFor } from '../../algorithms/sliding-window.js';
import type { Clock } from '../../clock.js';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { StoreMetricsSink } from '../../metrics/metrics.js';
import { admits, applyThroughNow, BatchKeys, charges } from '../batch.js';
import type {
  BatchResult,
  CounterResult,
  CounterSnapshot,
  CounterSpec,
  CounterStore,
} from '../counter-store.js';
import type { StoreFailureMode } from '../failure-policy.js';

/**
 * The algorithms cached mode counts. A sliding or fixed window count only shrinks as time passes
 * (buckets expire, windows end), so an old view of it never shows more room than there is.
 * `token_bucket` refills continuously from a state only Redis holds, and `sliding_log` exists to
 * be exact per hit; both are refused in this mode.
 */
export const CACHED_MODE_ALGORITHMS: readonly Algorithm[] = Object.freeze([
  'sliding_window',
  'fixed_window',
]);

/**
 * Most counters one sync request carries: the Redis store's limit for one script call, so each
 * chunk is one call.
 */
const SYNC_CHUNK = 512;

/** Options for {@link createCachedStore}. */
export interface CachedStoreOptions {
  /** The shared store synced with (the Redis store; the cached store closes it). */
  readonly remote: CounterStore;
  /** `REDIS_SYNC_INTERVAL` in ms. */
  readonly syncIntervalMs: number;
  /** Most counters held here (`MEMORY_MAX_KEYS`); the least recently used go first. */
  readonly maxCounters: number;
  /** `STORE_FAILURE_MODE`: `error` fails calls while the shared store is down; see the header. */
  readonly failureMode: StoreFailureMode;
  /** Time source, epoch ms. */
  readonly clock: Clock;
  /** Where syncs, their errors and dropped hits are counted; `undefined`: not counted. */
  readonly metrics?: StoreMetricsSink;
  /** Logs the first failed sync and the recovery (one line per change); `undefined`: silent. */
  readonly logger?: Logger;
  /** Tests: no timer; the test calls {@link CachedStore.sync} itself. Default true. */
  readonly timer?: boolean;
}

/** One counter as this replica sees it. */
interface LocalCounter {
  readonly key: string;
  readonly algorithm: Algorithm;
  readonly windowMs: number;
  /** The latest spec's numbers (a rule reload may change the limit). */
  limit: number;
  burst: number;
  /** Hits the shared counter held at the last sync (`limit + 1` when it was over: a lower bound). */
  synced: number;
  /** Local epoch ms from which `synced` no longer counts (every hit in it has expired). */
  syncedUntil: number;
  /** Hits admitted here that the last sync did not include, aged by the algorithm. */
  local: CounterState;
  /** Admitted hits not yet sent to the shared store. */
  pending: number;
  /** Fixed window: start of the window the pending hits belong to; sliding: newest one's time. */
  pendingAt: number;
  /** Hits of the sync in flight for this counter (-1: none in flight). */
  sent: number;
  /** `pendingAt` of the hits in flight. */
  sentAt: number;
  /** Hits admitted while a sync was in flight (they are in `local`, not in that sync). */
  sinceSend: number;
  /** Used since the last sync: refresh its view at the next one even with nothing pending. */
  used: boolean;
}

/** A cached-mode store; {@link CachedStore.sync} is exposed for tests. */
export interface CachedStore extends CounterStore {
  applyNow(specs: readonly CounterSpec[]): BatchResult;
  /** Run one sync now (the timer calls it every interval); resolves when it is done. */
  sync(): Promise<void>;
  /** Hits admitted here and not yet in the shared store. */
  pendingHits(): number;
}

/** Create a cached-mode store over `options.remote`; see the module header. */
export function createCachedStore(options: CachedStoreOptions): CachedStore {
  return new Cached(options);
}

class Cached implements CachedStore {
  private readonly remote: CounterStore;
  private readonly clock: Clock;
  private readonly metrics: StoreMetricsSink | undefined;
  private readonly logger: Logger | undefined;
  private readonly maxCounters: number;
  private readonly failureMode: StoreFailureMode;
  /** Counters, least recently used first (a counter moves to the end once per sync interval). */
  private readonly counters = new Map<string, LocalCounter>();
  private readonly keys = new BatchKeys();
  // Stryker disable next-line ObjectLiteral: paramsOf fills every field before each use
  private readonly params: { limit: number; windowMs: number; burst: number } = {
    limit: 0,
    windowMs: 0,
    burst: 0,
  };
  private readonly timer: NodeJS.Timeout | undefined;
  /** The sync in flight, if any (one at a time: a slow Redis delays the next, never piles them). */
  private syncing: Promise<void> | undefined;
  /** The last sync failed (for the one-line-per-change log). */
  private failing = false;
  private closed = false;

  constructor(options: CachedStoreOptions) {
    this.remote = options.remote;
    this.clock = options.clock;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.maxCounters = options.maxCounters;
    this.failureMode = options.failureMode;
    if (options.timer !== false) {
      this.timer = setInterval(() => void this.sync(), options.syncIntervalMs);
      this.timer.unref();
    }
  }

  apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    return applyThroughNow(this, specs);
  }

  applyNow(specs: readonly CounterSpec[]): BatchResult {
    // `error` asked for no decision without the shared store: keep to it while it is known down
    // (the pending hits are kept and sent when it is back).
    if (this.failureMode === 'error' && !this.remote.healthy()) {
      this.metrics?.fallback('error');
      throw new SluiceError('STORE_UNAVAILABLE', 'redis is not reachable (cached mode)');
    }
    const count = specs.length;
    if (count === 0) return { admitted: true, results: [] };
    const now = Math.floor(this.clock());
    const { keys, params } = this;
    keys.group(specs);
    const { cumHits } = keys;
    const locals: LocalCounter[] = [];
    const over: boolean[] = [];
    for (let i = 0; i < count; i++) {
      const spec = specs[i]!;
      const counter = this.counterFor(spec);
      const steps = ALGORITHM_STEPS[counter.algorithm];
      this.paramsOf(counter, spec.limit);
      steps.refresh(counter.local, now, params);
      locals.push(counter);
      over.push(known(counter, now) + counter.local.total + cumHits[i]! > spec.limit);
    }
    const admitted = admits(specs, over);
    if (admitted) {
      for (let i = 0; i < count; i++) {
        const spec = specs[i]!;
        if (!charges(spec, over[i]!)) continue;
        const counter = locals[i]!;
        this.paramsOf(counter, spec.limit);
        ALGORITHM_STEPS[counter.algorithm].charge(counter.local, now, spec.hits, params);
        this.addPending(counter, spec.hits, now);
      }
    }
    const results: CounterResult[] = [];
    for (let i = 0; i < count; i++) {
      const spec = specs[i]!;
      const counter = locals[i]!;
      // The room the view leaves: the algorithm's result on the local hits against it.
      this.paramsOf(counter, Math.max(0, spec.limit - known(counter, now)));
      // Stryker disable next-line ObjectLiteral,BooleanLiteral: result() writes every field
      const out: CounterResult = { overLimit: false, remaining: 0, resetMs: 0 };
      const steps = ALGORITHM_STEPS[counter.algorithm];
      results.push(steps.result(counter.local, now, cumHits[i]!, params, over[i]!, out));
    }
    return { admitted, results };
  }

  /** Send the pending hits, refresh the views of the counters in use, drop idle ones. */
  sync(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.syncing ??= this.syncOnce().finally(() => {
      this.syncing = undefined;
    });
    return this.syncing;
  }

  pendingHits(): number {
    let hits = 0;
    for (const counter of this.counters.values()) {
      hits += counter.pending + Math.max(0, counter.sent);
    }
    return hits;
  }

  size(): number {
    return this.counters.size;
  }

  healthy(): boolean {
    // `allow` and `memory` keep deciding locally: the replica still answers.
    return this.failureMode === 'error' ? this.remote.healthy() : true;
  }

  async close(): Promise<void> {
    if (this.timer !== undefined) clearInterval(this.timer);
    // The sync in flight, if any, then one more, so every hit admitted here reaches Redis
    // before the process leaves.
    await this.sync();
    await this.sync();
    this.closed = true;
    await this.remote.close();
  }

  top(n: number): CounterSnapshot[] {
    const now = Math.floor(this.clock());
    const out: CounterSnapshot[] = [];
    for (const counter of this.counters.values()) {
      const count = known(counter, now) + counter.local.total;
      if (count <= 0) continue;
      out.push({
        key: counter.key,
        count,
        limit: counter.limit,
        expiresInMs: Math.max(0, Math.max(counter.syncedUntil, counter.local.emptyAtMs) - now),
      });
    }
    out.sort((a, b) => b.count - a.count);
    return out.slice(0, Math.max(0, n));
  }

  /** The counter of `spec`, created (as never synced: nothing known) when new. */
  private counterFor(spec: CounterSpec): LocalCounter {
    let counter = this.counters.get(spec.key);
    if (counter === undefined) {
      if (this.counters.size >= this.maxCounters) this.evictOldest();
      counter = {
        key: spec.key,
        algorithm: spec.algorithm,
        windowMs: spec.windowMs,
        limit: spec.limit,
        burst: spec.burst,
        synced: 0,
        syncedUntil: 0,
        local: createCounterState(),
        pending: 0,
        pendingAt: 0,
        sent: -1,
        sentAt: 0,
        sinceSend: 0,
        used: true,
      };
      this.counters.set(spec.key, counter);
      return counter;
    }
    counter.limit = spec.limit;
    counter.burst = spec.burst;
    if (!counter.used) {
      // Move it to the end of the LRU order, once per interval rather than per call.
      counter.used = true;
      this.counters.delete(spec.key);
      this.counters.set(spec.key, counter);
    }
    return counter;
  }

  /** Drop the least recently used counter; its unsent hits are lost (and counted). */
  private evictOldest(): void {
    const first = this.counters.values().next();
    if (first.done === true) return;
    const counter = first.value;
    this.counters.delete(counter.key);
    this.metrics?.evicted('lru', 1);
    if (counter.pending > 0) this.metrics?.cachedDroppedHits?.(counter.pending);
  }

  /** Fill {@link params} for `counter` with `limit`. */
  private paramsOf(counter: LocalCounter, limit: number): void {
    const params = this.params;
    params.limit = limit;
    params.windowMs = counter.windowMs;
    params.burst = counter.burst;
  }

  /** Keep `hits` admitted at `now` for the next sync. */
  private addPending(counter: LocalCounter, hits: number, now: number): void {
    if (counter.sent >= 0) counter.sinceSend += hits;
    if (counter.algorithm === 'fixed_window') {
      const start = windowStartMs(now, counter.windowMs);
      // The hits of a window that has ended can change no decision any more: not sent.
      if (counter.pending > 0 && counter.pendingAt !== start) counter.pending = 0;
      counter.pendingAt = start;
    } else {
      counter.pendingAt = now;
    }
    counter.pending += hits;
  }

  /** Whether hits kept since `at` (see `pendingAt`) can no longer count at `now`. */
  private expired(counter: LocalCounter, at: number, now: number): boolean {
    return counter.algorithm === 'fixed_window'
      ? windowStartMs(now, counter.windowMs) !== at
      : now >= at + counter.windowMs + bucketMsFor(counter.windowMs);
  }

  private async syncOnce(): Promise<void> {
    const now = Math.floor(this.clock());
    const batch: LocalCounter[] = [];
    const specs: CounterSpec[] = [];
    const idle: string[] = [];
    for (const counter of this.counters.values()) {
      if (counter.pending > 0 && this.expired(counter, counter.pendingAt, now)) {
        counter.pending = 0;
      }
      if (counter.pending > 0 || counter.used) {
        specs.push({
          key: counter.key,
          algorithm: counter.algorithm,
          limit: counter.limit,
          windowMs: counter.windowMs,
          burst: counter.burst,
          hits: counter.pending,
          mode: 'shadow',
        });
        counter.sent = counter.pending;
        counter.sentAt = counter.pendingAt;
        counter.sinceSend = 0;
        counter.pending = 0;
        counter.used = false;
        batch.push(counter);
        continue;
      }
      this.paramsOf(counter, counter.limit);
      ALGORITHM_STEPS[counter.algorithm].refresh(counter.local, now, this.params);
      // Nothing known any more and nothing here: as good as a counter never seen.
      if (now >= counter.syncedUntil && counter.local.total === 0) idle.push(counter.key);
    }
    for (const key of idle) this.counters.delete(key);
    if (idle.length > 0) this.metrics?.evicted('expired', idle.length);
    if (batch.length === 0) {
      this.metrics?.cachedSync?.(true, 0, this.pendingHits(), this.clock());
      return;
    }
    // Stryker disable next-line ArrayDeclaration: allSettled counts a non-promise as fulfilled
    const chunks: Promise<void>[] = [];
    for (let at = 0; at < specs.length; at += SYNC_CHUNK) {
      chunks.push(
        this.syncChunk(batch.slice(at, at + SYNC_CHUNK), specs.slice(at, at + SYNC_CHUNK)),
      );
    }
    const outcomes = await Promise.allSettled(chunks);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    this.metrics?.cachedSync?.(
      failed === undefined,
      batch.length,
      this.pendingHits(),
      this.clock(),
    );
    if (failed !== undefined && !this.failing) {
      const reason: unknown = failed.reason;
      this.logger?.warn(
        { error: reason instanceof Error ? reason.message : String(reason) },
        'cached mode: sync with redis failed; deciding locally, hits kept for the next sync',
      );
    } else if (failed === undefined && this.failing) {
      this.logger?.info('cached mode: sync with redis succeeded again');
    }
    this.failing = failed !== undefined;
  }

  /** One request of the sync: charge and read `counters`, then take the new views. */
  private async syncChunk(counters: LocalCounter[], specs: CounterSpec[]): Promise<void> {
    let batch: BatchResult;
    try {
      batch = await this.remote.apply(specs);
    } catch (error) {
      for (const counter of counters) this.restore(counter);
      throw error;
    }
    const now = Math.floor(this.clock());
    for (let i = 0; i < counters.length; i++) {
      const counter = counters[i]!;
      const result = batch.results[i]!;
      const limit = specs[i]!.limit;
      // Over limit, Redis reports no room and not the count: at least one past the limit, which
      // every later check (0 hits included) finds over, as the live count would.
      counter.synced = result.overLimit ? limit + 1 : limit - result.remaining;
      counter.syncedUntil =
        counter.algorithm === 'fixed_window'
          ? now + result.resetMs
          : now + counter.windowMs + bucketMsFor(counter.windowMs);
      // The view now holds every hit sent; only those admitted since the send are local. They
      // are counted from now, a little longer than from their own time: never more room.
      const local = createCounterState();
      this.paramsOf(counter, limit);
      ALGORITHM_STEPS[counter.algorithm].charge(local, now, counter.sinceSend, this.params);
      counter.local = local;
      counter.sent = -1;
      counter.sinceSend = 0;
    }
  }

  /** A failed sync: its hits are pending again, unless their window has ended meanwhile. */
  private restore(counter: LocalCounter): void {
    const sent = counter.sent;
    counter.sent = -1;
    counter.sinceSend = 0;
    if (sent <= 0) return;
    if (counter.pending === 0) {
      counter.pending = sent;
      counter.pendingAt = counter.sentAt;
    } else if (counter.algorithm !== 'fixed_window' || counter.pendingAt === counter.sentAt) {
      counter.pending += sent;
    }
  }
}

/** Hits the view of `counter` holds at `now` (0 once they have all expired, or never synced). */
function known(counter: LocalCounter, now: number): number {
  return now < counter.syncedUntil ? counter.synced : 0;
}
