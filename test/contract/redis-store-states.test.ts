/**
 * The Redis store's connection states as operators see them (src/stores/redis/redis-store.ts,
 * docs/operations.md): one log line and one `disconnect` store error per outage, whatever the
 * number of ioredis events; "not reachable yet" before the first connection, "unavailable" after
 * one; "available" when it is back, or when a stalled server answers a probe. Real
 * `redis-server` processes, killed and restarted on the same port.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { ClientState, isTimeout } from '../../src/stores/redis/client-state.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { freePort, useProcessGroup, waitFor } from '../helpers/processes.js';
import { specBuilder } from '../helpers/specs.js';
import {
  recordingStoreMetrics,
  requireRedis,
  startRedis,
  type RedisServer,
} from '../helpers/redis.js';

const requirement = requireRedis('redis store states');
const group = useProcessGroup();

afterAll(async () => {
  await group.stopAll();
});

function capture() {
  const lines: { level: number; msg: string; [field: string]: unknown }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) {
        if (line.trim() !== '') lines.push(JSON.parse(line) as (typeof lines)[number]);
      }
      done();
    },
  });
  const logger = createLogger({ level: 'info', format: 'json', destination: stream });
  return { lines, logger, messages: () => lines.map((line) => line.msg) };
}

/** How many times `client` has begun a reconnection attempt (ioredis `reconnecting` events). */
function countReconnects(client: Redis): () => number {
  let count = 0;
  client.on('reconnecting', () => void count++);
  return () => count;
}

/** One fixed-window counter, 5 per minute, charged 1 (test/helpers/specs.ts). */
const spec = specBuilder({ algorithm: 'fixed_window', limit: 5 })('k');

describe.skipIf(requirement.skip)('redis store: connection states', () => {
  it('never reachable: one "not reachable yet" line and one disconnect, however many retries', async () => {
    const port = await freePort();
    const client = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 20 });
    const retries = countReconnects(client);
    const { lines, logger, messages } = capture();
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 'n:', timeoutMs: 500, metrics, logger });
    try {
      await waitFor('5 failed reconnection attempts', () => retries() >= 5, {
        timeoutMs: 10_000,
        intervalMs: 10,
      });
      expect(messages()).toEqual(['redis store not reachable yet; connecting in the background']);
      expect(lines[0]).toMatchObject({ redis: 'main', level: 50 });
      expect(String(lines[0]!['reason'])).toMatch(/ECONNREFUSED/);
      expect(metrics.errors()).toEqual(['disconnect']);
      expect(store.healthy()).toBe(false);
    } finally {
      await store.close();
    }
  });

  it('not reachable at first, then up: the recovery is a WARN that answers the ERROR line', async () => {
    const port = await freePort();
    const client = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 20 });
    const { lines, logger, messages } = capture();
    const store = createRedisStore({ client, keyPrefix: 'l:', timeoutMs: 500, logger });
    try {
      await waitFor('the first failure logged', () => lines.length > 0, {
        timeoutMs: 10_000,
        intervalMs: 10,
      });
      await startRedis(group, { port });
      await waitFor('connected', () => store.healthy(), { timeoutMs: 10_000, intervalMs: 10 });
      expect(messages()).toEqual([
        'redis store not reachable yet; connecting in the background',
        'redis store available (connected)',
      ]);
      expect(lines[1]).toMatchObject({ redis: 'main', level: 40 });
    } finally {
      await store.close();
    }
  });

  it('up, down and up again: one line each way, and calls answered again', async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', retryStrategy: () => 20 });
    const retries = countReconnects(client);
    const { lines, logger, messages } = capture();
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 'u:', timeoutMs: 500, metrics, logger });
    try {
      await waitFor('connected', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      // Connected after the store was created: said once, at INFO (a healthy start is routine).
      expect(messages()).toEqual(['redis store available (connected)']);
      expect(lines[0]).toMatchObject({ redis: 'main', level: 30 });
      expect((await store.apply([spec])).admitted).toBe(true);

      await server.stop(true);
      await waitFor('down', () => !store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      // Close, end, errors, and several failed retries: still one line and one disconnect.
      const before = retries();
      await waitFor('3 failed reconnection attempts', () => retries() >= before + 3, {
        timeoutMs: 10_000,
        intervalMs: 10,
      });
      expect(messages()).toEqual([
        'redis store available (connected)',
        'redis store unavailable; reconnecting in the background',
      ]);
      expect(lines[1]).toMatchObject({ redis: 'main', level: 50, reason: 'connection closed' });
      expect(metrics.errors()).toEqual(['disconnect']);
      await expect(store.apply([spec])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });

      await startRedis(group, { port: server.port });
      await waitFor('back', () => store.healthy(), { timeoutMs: 10_000, intervalMs: 10 });
      expect(messages()).toEqual([
        'redis store available (connected)',
        'redis store unavailable; reconnecting in the background',
        'redis store available (connected)',
      ]);
      // The recovery answers the ERROR line, so it is a WARN.
      expect(lines[2]).toMatchObject({ redis: 'main', level: 40 });
      expect((await store.apply([spec])).admitted).toBe(true);
      expect(metrics.errors().filter((e) => e === 'disconnect')).toEqual(['disconnect']);
    } finally {
      await store.close();
    }
  });

  it('a client already connected logs nothing at creation; a stall and its probe are logged', async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    await client.ping();
    const { lines, logger, messages } = capture();
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 's:', timeoutMs: 200, metrics, logger });
    try {
      expect(store.healthy()).toBe(true);
      expect((await store.apply([spec])).admitted).toBe(true);
      expect(messages()).toEqual([]);
      server.proc.child.kill('SIGSTOP');
      await expect(store.apply([spec])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      // A second timeout while stalled is not a second stall.
      await expect(store.apply([spec])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect(messages()).toEqual([
        'redis did not answer within REDIS_TIMEOUT; failing fast until it answers a probe',
      ]);
      expect(lines[0]).toMatchObject({ redis: 'main', timeoutMs: 200, level: 40 });
      expect(metrics.errors()).toEqual(['timeout', 'stalled', 'unavailable']);
      server.proc.child.kill('SIGCONT');
      await waitFor('probe', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      expect(messages()).toEqual([
        'redis did not answer within REDIS_TIMEOUT; failing fast until it answers a probe',
        'redis store available (answered a probe)',
      ]);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });
});

// One connection's state (client-state.ts) on a server of its own, kept running: the log lines
// of events that change nothing (an `error` while connected, a second `ready`, a `ready` while
// stalled, a `ready` after a stall already recovered), whether the store adds a timer of its own
// to each call (only when the client does not bound its commands itself), and which failures
// count as a timeout.

let stateServer: RedisServer | undefined;
const cleanup: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  if (requirement.skip) return;
  stateServer = await startRedis(group);
});

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** A connected client and a state over it logging to a capture; both closed after the test. */
async function connectedState() {
  const client = new Redis({ port: stateServer!.port, host: '127.0.0.1' });
  await client.ping();
  const log = capture();
  const state = new ClientState('main', client, 1_000, false, undefined, log.logger);
  cleanup.push(() => {
    state.close();
    client.disconnect();
  });
  return { client, state, ...log };
}

describe.skipIf(requirement.skip)('redis client state: what its changes log', () => {
  it('an error while connected changes nothing and writes nothing', async () => {
    const { client, state, messages } = await connectedState();
    client.emit('error', new Error('a passing error'));
    expect(state.healthy()).toBe(true);
    expect(messages()).toEqual([]);
  });

  it('a second ready while up writes nothing', async () => {
    const { client, state, messages } = await connectedState();
    client.emit('ready');
    expect(state.healthy()).toBe(true);
    expect(messages()).toEqual([]);
  });

  it('a ready while stalled writes nothing: the store is back only when a probe answers', async () => {
    const { client, state, messages } = await connectedState();
    state.stall();
    client.emit('ready');
    expect(state.healthy()).toBe(false);
    expect(messages()).toEqual([
      'redis did not answer within REDIS_TIMEOUT; failing fast until it answers a probe',
    ]);
  });

  it('after a stall has recovered, a ready writes nothing more', async () => {
    const { client, state, lines, messages } = await connectedState();
    state.stall();
    await waitFor('the probe to answer', () => state.healthy(), {
      timeoutMs: 10_000,
      intervalMs: 10,
    });
    client.emit('ready');
    expect(messages()).toEqual([
      'redis did not answer within REDIS_TIMEOUT; failing fast until it answers a probe',
      'redis store available (answered a probe)',
    ]);
    expect(lines.map((line) => line.level)).toEqual([40, 40]);
  });
});

describe.skipIf(requirement.skip)('redis client state: a timer of its own per call', () => {
  const STORE_TIMEOUT_MS = 4_321;

  /** How many timers of the store's timeout one `apply` starts, with `commandTimeout` on the client. */
  async function storeTimers(commandTimeout?: number): Promise<number> {
    const client = new Redis({
      port: stateServer!.port,
      host: '127.0.0.1',
      ...(commandTimeout === undefined ? {} : { commandTimeout }),
    });
    await client.ping();
    const store = createRedisStore({
      client,
      keyPrefix: `timer-${randomUUID()}:`,
      timeoutMs: STORE_TIMEOUT_MS,
    });
    cleanup.push(() => store.close());
    const timers = vi.spyOn(globalThis, 'setTimeout');
    try {
      await store.apply([spec]);
      return timers.mock.calls.filter(([, ms]) => ms === STORE_TIMEOUT_MS).length;
    } finally {
      timers.mockRestore();
    }
  }

  it('adds one when the client has no commandTimeout', async () => {
    expect(await storeTimers()).toBe(1);
  });

  it('adds one when the client bounds its commands later than the store would', async () => {
    expect(await storeTimers(STORE_TIMEOUT_MS + 1)).toBe(1);
  });

  it('adds none when the client bounds every command within the store timeout', async () => {
    expect(await storeTimers(1_234)).toBe(0);
  });
});

describe('isTimeout: which failures stall the client', () => {
  it('counts the store timer and ioredis command timeout only', () => {
    expect(isTimeout(new SluiceError('STORE_TIMEOUT', 'redis did not answer within 5ms'))).toBe(
      true,
    );
    // What ioredis rejects a command with when its commandTimeout passes: a plain Error.
    expect(isTimeout(new Error('Command timed out'))).toBe(true);
  });

  it('does not count other errors, even with the same message', () => {
    expect(isTimeout(new SluiceError('STORE_UNAVAILABLE', 'Command timed out'))).toBe(false);
    expect(isTimeout(new Error('Connection is closed.'))).toBe(false);
    expect(isTimeout(new ReplyError('Command timed out'))).toBe(false);
    expect(isTimeout(new TypeError('Command timed out'))).toBe(false);
    expect(isTimeout({ message: 'Command timed out' })).toBe(false);
    expect(isTimeout('Command timed out')).toBe(false);
    expect(isTimeout(null)).toBe(false);
    expect(isTimeout(undefined)).toBe(false);
  });
});
