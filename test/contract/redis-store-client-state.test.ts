/**
 * One Redis connection's state (src/stores/redis/client-state.ts) on a real `redis-server`: the
 * log lines its changes write (none for an event that changes nothing: an `error` while
 * connected, a second `ready`, a `ready` while stalled, a `ready` after a stall already
 * recovered), whether the store adds a timer of its own to each call (only when the client does
 * not bound its commands itself), and which failures count as a timeout.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { ClientState, isTimeout } from '../../src/stores/redis/client-state.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';
import { spec } from '../helpers/specs.js';

const requirement = requireRedis('redis client state');
const group = useProcessGroup();
let server: RedisServer | undefined;
const cleanup: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  if (requirement.skip) return;
  server = await startRedis(group);
});

afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

afterAll(async () => {
  await group.stopAll();
});

/** A logger whose JSON lines are kept; `messages()` gives their `msg` fields in order. */
function capture() {
  const lines: { level: number; msg: string }[] = [];
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

/** A connected client and a state over it logging to a capture; both closed after the test. */
async function connectedState() {
  const client = new Redis({ port: server!.port, host: '127.0.0.1' });
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
      port: server!.port,
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
      await store.apply([spec('k')]);
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
