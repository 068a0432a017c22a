/**
 * One Redis connection of the Redis store (main or per-second) and what the store knows about it:
 * connected or not, stalled after a timeout until a PING probe answers, each state change logged
 * once (redis-store.ts). Also the bounds every call gets: {@link withTimeout} and
 * {@link isTimeout}.
 */
import type { Redis } from 'ioredis';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { StoreMetricsSink } from '../../metrics/metrics.js';
import { APPLY_SCRIPT } from './apply-script.js';
import type { RedisClient } from './redis-store.js';

/** The client with the script registered by {@link ClientState}. */
export interface ScriptClient {
  sluiceApply(...args: (string | number)[]): Promise<unknown>;
}

/** Name the script is registered under on each client (ioredis `defineCommand`). */
const SCRIPT_COMMAND = 'sluiceApply';

/** Period of the PING probe while a stalled store waits to be trusted again, in ms. */
const PROBE_INTERVAL_MS = 250;

/** One Redis connection (main or per-second) and what the store knows about it. */
export class ClientState {
  /** The connection is ready (ioredis `ready` seen, no `close` since). */
  connected: boolean;
  /** A call timed out; calls fail fast until a PING probe answers. */
  stalled = false;
  /**
   * The client bounds every command by itself (a single node or Sentinel client whose ioredis
   * `commandTimeout` is at most ours, as connect.ts makes them): no timer of ours per call, which
   * costs about 15% of the process CPU of a Redis call. A cluster client queues commands while it
   * refreshes its slots, before that timer starts, so its calls keep ours. (A `commandTimeout` of 0
   * or less makes ioredis time every command out at once, whatever timer we add.)
   */
  readonly boundsCalls: boolean;
  private probe: NodeJS.Timeout | undefined;
  /** Whether the connection ever was ready (the first failure to connect is logged once too). */
  private everUp: boolean;
  private loggedDown = false;
  private loggedStall = false;

  constructor(
    readonly name: string,
    readonly client: RedisClient,
    readonly timeoutMs: number,
    readonly cluster: boolean,
    private readonly metrics: StoreMetricsSink | undefined,
    private readonly logger: Logger | undefined,
  ) {
    client.defineCommand(SCRIPT_COMMAND, { lua: APPLY_SCRIPT });
    // Stryker disable next-line OptionalChaining: every ioredis client has its options
    const own = cluster ? undefined : (client as Redis).options?.commandTimeout;
    // Stryker disable next-line EqualityOperator: the client's timeout and ours fire at once when equal
    this.boundsCalls = typeof own === 'number' && own <= timeoutMs;
    this.connected = client.status === 'ready';
    this.everUp = this.connected;
    client.on('ready', () => {
      this.connected = true;
      this.up('connected');
    });
    client.on('close', () => this.down('connection closed'));
    // Stryker disable next-line StringLiteral,ArrowFunction: ioredis emits `close` before `end`
    client.on('end', () => this.down('connection ended'));
    client.on('error', (error: Error) => {
      // ioredis reconnects on its own; an error is logged once per outage (no secrets: the
      // logger redacts URLs and passwords).
      if (!this.connected) this.down(error.message);
    });
  }

  /** Whether calls may go to Redis now. */
  healthy(): boolean {
    return this.connected && !this.stalled;
  }

  /** A call timed out: fail fast until a PING answers within the timeout. */
  stall(): void {
    if (this.stalled) return;
    this.stalled = true;
    this.loggedStall = true;
    this.metrics?.storeError('stalled');
    this.logger?.warn(
      { redis: this.name, timeoutMs: this.timeoutMs },
      'redis did not answer within REDIS_TIMEOUT; failing fast until it answers a probe',
    );
    this.probe = setInterval(() => {
      void withTimeout(this.client.ping(), this.timeoutMs).then(
        () => {
          // Stryker disable next-line ConditionalExpression: a later answer finds the state already un-stalled
          if (!this.stalled) return;
          this.stalled = false;
          clearInterval(this.probe);
          this.probe = undefined;
          this.up('answered a probe');
        },
        () => undefined,
      );
    }, PROBE_INTERVAL_MS);
    this.probe.unref();
  }

  close(): void {
    // Stryker disable next-line ConditionalExpression: clearInterval(undefined) does nothing
    if (this.probe !== undefined) clearInterval(this.probe);
    this.probe = undefined;
  }

  private up(why: string): void {
    if (!this.healthy()) return;
    if (this.everUp && !this.loggedDown && !this.loggedStall) return;
    // The first connection is routine (INFO); a recovery answers an earlier ERROR/WARN line.
    const recovered = this.everUp || this.loggedDown || this.loggedStall;
    this.everUp = true;
    this.loggedDown = false;
    this.loggedStall = false;
    this.logger?.[recovered ? 'warn' : 'info'](
      { redis: this.name },
      `redis store available (${why})`,
    );
  }

  private down(why: string): void {
    this.connected = false;
    if (this.loggedDown) return;
    this.loggedDown = true;
    this.metrics?.storeError('disconnect');
    this.logger?.error(
      { redis: this.name, reason: why },
      this.everUp
        ? 'redis store unavailable; reconnecting in the background'
        : 'redis store not reachable yet; connecting in the background',
    );
  }
}

/** Reject with a SluiceError STORE_TIMEOUT when `promise` has not settled after `ms`. */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new SluiceError('STORE_TIMEOUT', `redis did not answer within ${ms}ms`)),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/**
 * What ioredis 6 rejects a command with when its `commandTimeout` passes: a plain `Error` with
 * this message (ioredis has no class for it; `Command.setTimeout` in its Command.js).
 */
const IOREDIS_COMMAND_TIMEOUT = 'Command timed out';

/**
 * Whether a failed call timed out: our own timer (a SluiceError STORE_TIMEOUT) or ioredis's
 * command timeout (the same REDIS_TIMEOUT), whichever fired first.
 */
export function isTimeout(error: unknown): boolean {
  if (SluiceError.is(error, 'STORE_TIMEOUT')) return true;
  return (
    error instanceof Error &&
    Object.getPrototypeOf(error) === Error.prototype &&
    error.message === IOREDIS_COMMAND_TIMEOUT
  );
}
