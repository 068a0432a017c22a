/**
 * The Redis counter store (docs/semantics.md §3, §4): several sluice replicas share their counters
 * in Redis (standalone, Sentinel or Cluster).
 *
 * One request is one `apply()`: its specs are grouped by Redis node and hash slot (every counter of
 * one descriptor shares a slot, see keys.ts), and each group is one call of the Lua script in
 * apply-script.ts, which checks and charges the whole group atomically with the time read from
 * Redis `TIME`. On a single Redis (or Sentinel) every request is one group: one round trip, and
 * the all-or-nothing rule holds exactly. Groups of one request are sent in parallel; see the
 * README ("Running several replicas") for what holds across groups.
 *
 * Failures never hang a call: every call is bounded by `timeoutMs`, and while the store is known
 * to be down (disconnected, or a call timed out and no probe has succeeded since) calls fail at
 * once with STORE_UNAVAILABLE instead of queueing; ioredis reconnects in the background and a
 * PING probe clears a stall. The failure policy (failure-policy.ts) decides what such a call
 * answers.
 */
import type { Cluster, Redis } from 'ioredis';
import type { Clock } from '../../clock.js';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { StoreMetricsSink } from '../../metrics/metrics.js';
import type { BatchResult, CounterResult, CounterSpec, CounterStore } from '../counter-store.js';
import { admits, cumulativeHits } from '../batch.js';
import { ALGORITHM_CODES, ARGS_PER_COUNTER, MODE_CODES } from './apply-script.js';
import { ClientState, isTimeout, withTimeout, type ScriptClient } from './client-state.js';
import { hashTagOf, redisKeyOf, slotOfTag } from './keys.js';
import { LocalOverLimitCache } from './local-cache.js';

/** A connected ioredis client: a single node (also through Sentinel) or a cluster. */
export type RedisClient = Redis | Cluster;

/** Options for {@link createRedisStore}. */
export interface RedisStoreOptions {
  /** The client for every counter (the store takes ownership and quits it on `close()`). */
  readonly client: RedisClient;
  /**
   * `REDIS_PERSECOND`: the client for counters whose window is shorter than a minute (unit
   * `second`, any multiplier below 60); `undefined` sends them to `client`.
   */
  readonly perSecondClient?: RedisClient;
  /** `CACHE_KEY_PREFIX`, put before every Redis key ('' for none). */
  readonly keyPrefix: string;
  /** `REDIS_TIMEOUT` in ms: the longest any call may take before it fails. */
  readonly timeoutMs: number;
  /** Per-second client's timeout in ms; `undefined` means `timeoutMs`. */
  readonly perSecondTimeoutMs?: number;
  /** `LOCAL_CACHE_SIZE_IN_BYTES`: budget of the local over-limit cache; 0 or `undefined` = off. */
  readonly localCacheBytes?: number;
  /**
   * Time source for the local cache (epoch ms); default `Date.now`. Decisions always use Redis time
   * unless {@link RedisStoreOptions.scriptClock} is set.
   */
  readonly clock?: Clock;
  /**
   * Tests only: pass this clock's time to the script instead of Redis `TIME`, so a manual clock
   * drives Redis decisions exactly as it drives the memory store's. `undefined` (production): the
   * script reads `TIME`.
   */
  readonly scriptClock?: Clock;
  /**
   * Milliseconds of TTL added past the moment a counter holds nothing (default 0: keys expire just
   * after their last counted hit leaves the window). Tests with a manual clock raise it.
   */
  readonly ttlGraceMs?: number;
  /** Where store errors and local cache answers are counted; `undefined`: not counted. */
  readonly metrics?: StoreMetricsSink;
  /** Logger for state changes (one line per change); `undefined`: silent. */
  readonly logger?: Logger;
}

/** A group of specs that one script call handles: one client, one slot. */
interface Group {
  /** The client's name, plus the slot (or hash tag) on a cluster: what may share a call. */
  readonly id: string;
  readonly client: ClientState;
  readonly indexes: number[];
}

/**
 * Most specs one script call carries: requests queued beyond it wait for the next call (a
 * request is never split, so one larger than this goes alone). Bounds how long one call holds
 * Redis (a few µs per spec) and the size of its arguments.
 */
const MAX_SPECS_PER_CALL = 512;

/** One request queued for the next script call of its group. */
interface Waiter {
  /** Its number of specs. */
  readonly size: number;
  resolve(reply: unknown): void;
  reject(error: unknown): void;
}

/**
 * The requests of one group waiting for their script call, sent together at the end of the
 * event-loop turn (apply-script.ts: one call, several requests, each decided all or nothing in
 * turn), in the script's ARGV form: each counter once (its key, algorithm, limit, window, burst
 * and mode), then each request as its size and a (counter, hits) pair per spec. Requests on the
 * same keys, the common case under load, so send each key once.
 */
class PendingCall {
  /** KEYS: each counter's Redis key. */
  readonly keys: string[] = [];
  /** {@link ARGS_PER_COUNTER} values per counter. */
  readonly counters: (string | number)[] = [];
  /** The latest counter (1-based, as the script counts) of each key. */
  readonly counterOf = new Map<string, number>();
  /** Per request: its number of specs, then per spec its counter and hits. */
  readonly requests: number[] = [];
  readonly waiters: Waiter[] = [];
  /** Specs of every request so far. */
  specs = 0;

  /** `client`: the connection the call goes to (every group of the call is on it, one slot). */
  constructor(readonly client: ClientState) {}

  /** The counter for `key` with these values, added when the call has none yet. */
  counter(
    key: string,
    code: number,
    limit: number,
    windowMs: number,
    burst: number,
    mode: string,
  ): number {
    const { counters } = this;
    let c = this.counterOf.get(key);
    // Stryker disable next-line ConditionalExpression: without a counter `at` is NaN and no value matches
    if (c !== undefined) {
      const at = (c - 1) * ARGS_PER_COUNTER;
      if (
        counters[at] === code &&
        counters[at + 1] === limit &&
        counters[at + 2] === windowMs &&
        counters[at + 3] === burst &&
        counters[at + 4] === mode
      ) {
        return c;
      }
    }
    counters.push(code, limit, windowMs, burst, mode);
    c = this.keys.push(key);
    this.counterOf.set(key, c);
    return c;
  }
}

/** Create a Redis {@link CounterStore}; see the module header. */
export function createRedisStore(options: RedisStoreOptions): CounterStore {
  return new RedisStore(options);
}

class RedisStore implements CounterStore {
  private readonly main: ClientState;
  private readonly perSecond: ClientState | undefined;
  private readonly prefix: string;
  private readonly groupBySlot: boolean;
  private readonly cache: LocalOverLimitCache | undefined;
  private readonly clock: Clock;
  private readonly scriptClock: Clock | undefined;
  private readonly grace: string;
  private readonly metrics: StoreMetricsSink | undefined;
  /** Requests queued for the next script call, by group id, in arrival order. */
  private readonly pending = new Map<string, PendingCall>();
  /** A flush of {@link pending} is scheduled (setImmediate). */
  private flushing = false;
  private readonly flushAll = (): void => {
    this.flushing = false;
    for (const call of this.pending.values()) this.send(call);
    this.pending.clear();
  };

  constructor(options: RedisStoreOptions) {
    const logger = options.logger;
    // Stryker disable next-line LogicalOperator: an ioredis Cluster has both, a single-node client neither
    const isCluster = (client: RedisClient): boolean => 'nodes' in client && 'slots' in client;
    this.main = new ClientState(
      'main',
      options.client,
      options.timeoutMs,
      isCluster(options.client),
      options.metrics,
      logger,
    );
    this.perSecond =
      options.perSecondClient === undefined
        ? undefined
        : new ClientState(
            'per-second',
            options.perSecondClient,
            options.perSecondTimeoutMs ?? options.timeoutMs,
            isCluster(options.perSecondClient),
            options.metrics,
            logger,
          );
    this.prefix = options.keyPrefix;
    // A prefix with braces could hold the hash tag itself: then only a shared tag proves a
    // shared slot.
    this.groupBySlot = !/[{}]/.test(this.prefix);
    const bytes = options.localCacheBytes ?? 0;
    // Stryker disable next-line ConditionalExpression,EqualityOperator: a cache of 0 bytes holds nothing
    this.cache = bytes > 0 ? new LocalOverLimitCache(bytes) : undefined;
    this.clock = options.clock ?? Date.now;
    this.scriptClock = options.scriptClock;
    this.grace = String(Math.max(0, Math.floor(options.ttlGraceMs ?? 0)));
    this.metrics = options.metrics;
  }

  async apply(specs: readonly CounterSpec[]): Promise<BatchResult> {
    const count = specs.length;
    if (count === 0) return { admitted: true, results: [] };
    if (this.cache !== undefined) {
      const answer = this.fromCache(specs);
      if (answer !== undefined) return answer;
    }
    const batch = await this.applyRemote(specs, false);
    if (this.cache !== undefined && !batch.admitted) this.remember(specs, batch);
    return batch;
  }

  size(): number {
    // Counters live in Redis; the local cache is not a counter.
    return 0;
  }

  healthy(): boolean {
    return this.main.healthy() && (this.perSecond === undefined || this.perSecond.healthy());
  }

  async close(): Promise<void> {
    this.main.close();
    this.perSecond?.close();
    this.cache?.clear();
    await Promise.all([quit(this.main.client), this.perSecond && quit(this.perSecond.client)]);
  }

  /**
   * The answer when an enforced spec is known over limit: every spec in the cache → no Redis call;
   * otherwise a dry run (nothing charged) gives the others' exact results. `undefined` when no
   * enforced spec is in the cache.
   */
  private fromCache(specs: readonly CounterSpec[]): BatchResult | Promise<BatchResult> | undefined {
    const cache = this.cache!;
    const now = Math.floor(this.clock());
    let cached = 0;
    let waits: number[] | undefined;
    const cumulative = cumulativeHits(specs);
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      if (spec.mode !== 'enforced' || !(spec.hits > 0)) continue;
      const waitMs = cache.overLimitForMs(spec.key, cumulative[i]!, spec.limit, now);
      if (waitMs > 0) {
        // Stryker disable next-line ArrayDeclaration: preallocation only; an unset wait reads as no wait
        (waits ??= new Array<number>(specs.length).fill(0))[i] = waitMs;
        cached++;
      }
    }
    if (waits === undefined) return undefined;
    this.metrics?.localCacheOverLimit(cached);
    if (cached === specs.length) {
      return {
        admitted: false,
        results: waits.map((resetMs) => ({
          overLimit: true,
          remaining: 0,
          resetMs,
          fromLocalCache: true,
        })),
      };
    }
    return this.applyRemote(specs, true).then((batch) => {
      // Stryker disable next-line EqualityOperator: one step past the end reads no wait
      for (let i = 0; i < specs.length; i++) {
        const waitMs = waits[i]!;
        if (waitMs > 0) {
          batch.results[i] = {
            overLimit: true,
            remaining: 0,
            resetMs: waitMs,
            fromLocalCache: true,
          };
        }
      }
      return { admitted: false, results: batch.results };
    });
  }

  /** Cache the enforced specs a rejected batch found over limit, until they would fit. */
  private remember(specs: readonly CounterSpec[], batch: BatchResult): void {
    const now = Math.floor(this.clock());
    const cumulative = cumulativeHits(specs);
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const result = batch.results[i]!;
      if (spec.mode !== 'enforced' || !result.overLimit || !(spec.hits > 0)) continue;
      // Stryker disable next-line ConditionalExpression,EqualityOperator: an entry until now answers no wait
      if (result.resetMs <= 0) continue;
      this.cache!.remember(spec.key, cumulative[i]!, spec.limit, now + result.resetMs);
    }
  }

  /** Check (and unless `dry`, charge) every spec in Redis: one script call per group. */
  private async applyRemote(specs: readonly CounterSpec[], dry: boolean): Promise<BatchResult> {
    const groups = this.groupsOf(specs);
    if (groups.length === 1) {
      const group = groups[0]!;
      const reply = await this.call(group, specs, dry, true);
      return decode(reply, specs.length);
    }
    // No script sees every quota group: each gets its quota counters as never rejecting, and the
    // batch rule (stores/batch.ts) is applied to the merged results below (after the charge, as
    // across groups the all-or-nothing rule is too). A script admits its group iff none of its
    // enforced specs is over, so this agrees with every script's own answer.
    const replies = await Promise.all(groups.map((group) => this.call(group, specs, dry, false)));
    // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
    const results = new Array<CounterResult>(specs.length);
    // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
    const over = new Array<boolean>(specs.length);
    for (let g = 0; g < groups.length; g++) {
      const partial = decode(replies[g], groups[g]!.indexes.length);
      const indexes = groups[g]!.indexes;
      for (let k = 0; k < indexes.length; k++) {
        const result = partial.results[k]!;
        results[indexes[k]!] = result;
        over[indexes[k]!] = result.overLimit;
      }
    }
    return { admitted: admits(specs, over), results };
  }

  /** Split the specs by client and (on a cluster) by hash slot, keeping their order in each. */
  private groupsOf(specs: readonly CounterSpec[]): Group[] {
    const perSecond = this.perSecond;
    const main = this.main;
    // Stryker disable next-line ConditionalExpression,BlockStatement: a fast path; the loop gives this one group
    if (perSecond === undefined && !main.cluster) {
      return [{ id: main.name, client: main, indexes: specs.map((_, i) => i) }];
    }
    const byId = new Map<string, Group>();
    const groups: Group[] = [];
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i]!;
      const client = perSecond !== undefined && spec.windowMs < 60_000 ? perSecond : main;
      let id = client.name;
      if (client.cluster) {
        const tag = hashTagOf(spec.key);
        // Stryker disable next-line StringLiteral: the ids stay distinct without the colon
        id += this.groupBySlot ? ':' + slotOfTag(tag) : ':' + tag;
      }
      let group = byId.get(id);
      if (group === undefined) {
        group = { id, client, indexes: [] };
        byId.set(id, group);
        groups.push(group);
      }
      group.indexes.push(i);
    }
    return groups;
  }

  /**
   * The script's reply for `group`'s specs of one request (`1 + 3 x specs` integers); failures
   * become STORE_UNAVAILABLE. A dry run is a call of its own; otherwise the request joins the
   * call its group sends at the end of this event-loop turn, with every other request of the
   * turn for the same client and slot: one script call, one round trip, for all of them.
   * `quotaGroups`: pass each quota counter's group so the script applies the quota rule (only
   * when it sees every spec of the request).
   */
  private call(
    group: Group,
    specs: readonly CounterSpec[],
    dry: boolean,
    quotaGroups: boolean,
  ): Promise<unknown> {
    const state = group.client;
    if (!state.healthy()) {
      this.metrics?.storeError('unavailable');
      return Promise.reject(
        new SluiceError(
          'STORE_UNAVAILABLE',
          state.connected
            ? 'redis is not answering (waiting for a probe)'
            : 'redis is not connected',
        ),
      );
    }
    const size = group.indexes.length;
    let call = dry ? new PendingCall(state) : this.pending.get(group.id);
    if (call !== undefined && call.specs > 0 && call.specs + size > MAX_SPECS_PER_CALL) {
      this.pending.delete(group.id);
      this.send(call);
      call = undefined;
    }
    if (call === undefined) {
      call = new PendingCall(state);
      this.pending.set(group.id, call);
    }
    this.push(call, group, specs, quotaGroups);
    const reply = new Promise<unknown>((resolve, reject) => {
      call.waiters.push({ size, resolve, reject });
    });
    if (dry) {
      this.send(call, true);
    } else if (!this.flushing) {
      this.flushing = true;
      setImmediate(this.flushAll);
    }
    return reply;
  }

  /** Add the keys and ARGV values of `group`'s specs of one request to `call`. */
  private push(
    call: PendingCall,
    group: Group,
    specs: readonly CounterSpec[],
    quotaGroups: boolean,
  ): void {
    const { requests } = call;
    const indexes = group.indexes;
    requests.push(indexes.length);
    for (let k = 0; k < indexes.length; k++) {
      const spec = specs[indexes[k]!]!;
      const c = call.counter(
        redisKeyOf(this.prefix, spec.key),
        ALGORITHM_CODES[spec.algorithm],
        spec.limit,
        spec.windowMs,
        spec.burst,
        quotaGroups && spec.quotaGroup !== undefined
          ? `${MODE_CODES.quota}${spec.quotaGroup}`
          : MODE_CODES[spec.mode],
      );
      requests.push(c, spec.hits);
    }
    call.specs += indexes.length;
  }

  /** Send `call` as one script call and hand each of its requests its part of the reply. */
  private send(call: PendingCall, dry = false): void {
    const { keys, counters, requests, waiters } = call;
    const state = call.client;
    const count = waiters.length;
    // Stryker disable ArrayDeclaration,ArithmeticOperator: preallocation only; every index is written below
    const args = new Array<string | number>(
      1 + keys.length + 3 + counters.length + 1 + requests.length,
    );
    // Stryker restore ArrayDeclaration,ArithmeticOperator
    args[0] = keys.length;
    let a = 1;
    for (let k = 0; k < keys.length; k++) args[a++] = keys[k]!;
    args[a++] = this.scriptClock === undefined ? '' : Math.floor(this.scriptClock());
    // Stryker disable next-line StringLiteral: the script tests for '1' only
    args[a++] = dry ? '1' : '0';
    args[a++] = this.grace;
    for (let v = 0; v < counters.length; v++) args[a++] = counters[v]!;
    args[a++] = count;
    for (let v = 0; v < requests.length; v++) args[a++] = requests[v]!;
    let pending: Promise<unknown>;
    try {
      pending = (state.client as unknown as ScriptClient).sluiceApply(...args);
    } catch (error) {
      this.fail(call, error);
      return;
    }
    (state.boundsCalls ? pending : withTimeout(pending, state.timeoutMs)).then(
      (reply) => {
        // Stryker disable next-line ConditionalExpression,BlockStatement: a fast path; the loop below hands the same reply
        if (count === 1) {
          waiters[0]!.resolve(reply);
          return;
        }
        // A reply of the wrong length is handed on whole: decode() refuses it for each.
        if (!Array.isArray(reply) || reply.length !== count + 3 * call.specs) {
          for (const waiter of waiters) waiter.resolve(reply);
          return;
        }
        let at = 0;
        for (const waiter of waiters) {
          const end = at + 1 + 3 * waiter.size;
          waiter.resolve(reply.slice(at, end));
          at = end;
        }
      },
      (error: unknown) => this.fail(call, error),
    );
  }

  /** Fail every request of `call` with STORE_UNAVAILABLE (a timeout stalls its client). */
  private fail(call: PendingCall, error: unknown): void {
    const state = call.client;
    const timedOut = isTimeout(error);
    // Counted per request, as each failed call was before calls carried several; the first
    // timeout stalls the client, as it did when each request was a call of its own.
    for (let w = 0; w < call.waiters.length; w++) {
      this.metrics?.storeError(timedOut ? 'timeout' : 'error');
      if (timedOut) state.stall();
    }
    const message = `redis: ${error instanceof Error ? error.message : String(error)}`;
    for (const waiter of call.waiters) {
      waiter.reject(new SluiceError('STORE_UNAVAILABLE', message, { cause: error }));
    }
  }
}

/** Decode the script's reply for `count` specs. */
function decode(reply: unknown, count: number): BatchResult {
  if (!Array.isArray(reply) || reply.length !== 1 + count * 3) {
    throw new SluiceError('STORE_UNAVAILABLE', 'redis: unexpected reply from the apply script');
  }
  // Stryker disable next-line ArrayDeclaration: preallocation only; every index is written below
  const results = new Array<CounterResult>(count);
  for (let i = 0; i < count; i++) {
    const at = 1 + i * 3;
    results[i] = {
      overLimit: reply[at] === 1,
      remaining: Number(reply[at + 1]),
      resetMs: Number(reply[at + 2]),
    };
  }
  return { admitted: reply[0] === 1, results };
}

/** Close a client politely, then for sure. */
async function quit(client: RedisClient): Promise<void> {
  // Stryker disable next-line BlockStatement: see docs/testing.md (QUIT or a plain disconnect)
  try {
    // Stryker disable next-line ConditionalExpression,EqualityOperator,StringLiteral: as above
    if (client.status === 'ready') await withTimeout(client.quit(), 1_000);
  } catch {
    // Closing anyway below.
  }
  client.disconnect();
}
