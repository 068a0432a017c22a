/**
 * The Redis store tells a timeout from other failures by the error's type, not its text: its own
 * REDIS_TIMEOUT timer (a SluiceError STORE_TIMEOUT) and ioredis's `commandTimeout` (the error
 * ioredis 6 rejects a command with) count as `timeout` and stall the connection until a probe
 * answers; any other failure counts as `error`, even when its message says "timed out". On a
 * real `redis-server`, paused with SIGSTOP; waits are for conditions, bounded.
 */
import { Writable } from 'node:stream';
import { Redis, ReplyError } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { createLogger } from '../../src/logging/logger.js';
import { createRedisStore } from '../../src/stores/redis/redis-store.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { specBuilder } from '../helpers/specs.js';
import {
  recordingStoreMetrics,
  requireRedis,
  startRedis,
  type RedisServer,
} from '../helpers/redis.js';

const requirement = requireRedis('redis store timeouts');
const group = useProcessGroup();

afterAll(async () => {
  await group.stopAll();
});

/** One fixed-window counter, 5 per minute, charged 1 (test/helpers/specs.ts). */
const spec = specBuilder({ algorithm: 'fixed_window', limit: 5 })('k');

describe.skipIf(requirement.skip)('redis store: timeouts are recognised by type', () => {
  it("its own timer: STORE_UNAVAILABLE caused by a STORE_TIMEOUT, counted as 'timeout'", async () => {
    const server = await startRedis(group);
    // No ioredis commandTimeout: the store bounds the call with its own timer.
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 't1:', timeoutMs: 200, metrics });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      expect((await store.apply([spec])).admitted).toBe(true);
      server.proc.child.kill('SIGSTOP');
      const failure = await store.apply([spec]).catch((e: unknown) => e);
      expect(failure).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: redis did not answer within 200ms',
      });
      const cause = (failure as Error).cause;
      expect(cause).toBeInstanceOf(SluiceError);
      expect(cause).toMatchObject({ code: 'STORE_TIMEOUT' });
      expect(metrics.errors()).toEqual(['timeout', 'stalled']);
      expect(store.healthy()).toBe(false);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });

  it("ioredis's commandTimeout (as connect.ts sets it) is a timeout too", async () => {
    const server = await startRedis(group);
    // commandTimeout at most the store's timeout: the store leaves the bound to ioredis.
    const client = new Redis({
      port: server.port,
      host: '127.0.0.1',
      maxRetriesPerRequest: 0,
      commandTimeout: 200,
    });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 't2:', timeoutMs: 200, metrics });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      expect((await store.apply([spec])).admitted).toBe(true);
      server.proc.child.kill('SIGSTOP');
      const failure = await store.apply([spec]).catch((e: unknown) => e);
      // ioredis's own error, not the store's: if ioredis renames or retypes it, this fails and
      // IOREDIS_COMMAND_TIMEOUT in redis-store.ts must follow.
      expect(failure).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: Command timed out',
      });
      expect((failure as Error).cause).not.toBeInstanceOf(SluiceError);
      expect(metrics.errors()).toEqual(['timeout', 'stalled']);
      expect(store.healthy()).toBe(false);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });

  it("an error reply whose text says 'timed out' is an error, not a timeout", async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 't3:', timeoutMs: 2_000, metrics });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      // The script's reply replaced by an error reply, as a proxy in front of Redis may send;
      // the store must not read its text.
      const scripted = client as unknown as { sluiceApply: (...args: unknown[]) => unknown };
      scripted.sluiceApply = () =>
        Promise.reject(new (ReplyError as new (m: string) => Error)('ERR upstream timed out'));
      const failure = await store.apply([spec]).catch((e: unknown) => e);
      expect(failure).toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: ERR upstream timed out',
      });
      expect(metrics.errors()).toEqual(['error']);
      // Not stalled: the next call goes to Redis rather than failing fast.
      expect(store.healthy()).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('a client whose commandTimeout is longer than REDIS_TIMEOUT still fails at REDIS_TIMEOUT', async () => {
    const server = await startRedis(group);
    const client = new Redis({
      port: server.port,
      host: '127.0.0.1',
      maxRetriesPerRequest: 0,
      commandTimeout: 30_000,
    });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 't4:', timeoutMs: 200, metrics });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      server.proc.child.kill('SIGSTOP');
      await expect(store.apply([spec])).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: redis did not answer within 200ms',
      });
      expect(metrics.errors()).toEqual(['timeout', 'stalled']);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });

  it('calls that time out together stall the connection once, and one probe brings it back', async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const metrics = recordingStoreMetrics();
    const store = createRedisStore({ client, keyPrefix: 't5:', timeoutMs: 200, metrics });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      server.proc.child.kill('SIGSTOP');
      const failures = await Promise.all(
        [1, 2, 3].map(() => store.apply([spec]).catch((e: unknown) => e)),
      );
      expect(failures.map((f) => (f as SluiceError).code)).toEqual([
        'STORE_UNAVAILABLE',
        'STORE_UNAVAILABLE',
        'STORE_UNAVAILABLE',
      ]);
      expect(metrics.errors()).toEqual(['timeout', 'stalled', 'timeout', 'timeout']);
      server.proc.child.kill('SIGCONT');
      await waitFor('probe answered', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      expect((await store.apply([spec])).admitted).toBe(true);
      expect(metrics.errors()).toEqual(['timeout', 'stalled', 'timeout', 'timeout']);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });

  it('without a metrics sink: cache answers, error replies and timeouts fail or answer the same', async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const store = createRedisStore({
      client,
      keyPrefix: 't6:',
      timeoutMs: 200,
      localCacheBytes: 10_000,
    });
    const one = specBuilder({ algorithm: 'fixed_window', limit: 1 })('one');
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      expect((await store.apply([one])).admitted).toBe(true);
      expect((await store.apply([one])).admitted).toBe(false);
      expect((await store.apply([one])).results[0]!.fromLocalCache).toBe(true);
      const scripted = client as unknown as { sluiceApply: (...args: unknown[]) => unknown };
      const real = scripted.sluiceApply;
      scripted.sluiceApply = () =>
        Promise.reject(new (ReplyError as new (m: string) => Error)('ERR broken'));
      await expect(store.apply([spec])).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: ERR broken',
      });
      scripted.sluiceApply = real;
      server.proc.child.kill('SIGSTOP');
      await expect(store.apply([spec])).rejects.toMatchObject({
        code: 'STORE_UNAVAILABLE',
        message: 'redis: redis did not answer within 200ms',
      });
      expect(store.healthy()).toBe(false);
    } finally {
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });

  it("the per-second client's calls are bounded by its own timeout, else by REDIS_TIMEOUT, and logged as such", async () => {
    const main = await startRedis(group);
    const perSecondServer: RedisServer = await startRedis(group);
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({
      level: 'warn',
      format: 'json',
      destination: new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n')) {
            if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
          }
          done();
        },
      }),
    });
    const second = specBuilder({ algorithm: 'fixed_window', windowMs: 1_000 })('s');
    const stores = [
      { perSecondTimeoutMs: 200, timeoutMs: 5_000, expected: 200 },
      { perSecondTimeoutMs: undefined, timeoutMs: 250, expected: 250 },
    ].map(({ perSecondTimeoutMs, timeoutMs, expected }) => {
      const client = new Redis({ port: main.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
      const perSecondClient = new Redis({
        port: perSecondServer.port,
        host: '127.0.0.1',
        maxRetriesPerRequest: 0,
      });
      for (const made of [client, perSecondClient]) made.on('error', () => undefined);
      const store = createRedisStore({
        client,
        perSecondClient,
        keyPrefix: 't7:',
        timeoutMs,
        perSecondTimeoutMs,
        logger,
      });
      return { store, expected };
    });
    try {
      for (const { store } of stores) {
        await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      }
      perSecondServer.proc.child.kill('SIGSTOP');
      for (const { store, expected } of stores) {
        lines.length = 0;
        await expect(store.apply([second])).rejects.toMatchObject({
          code: 'STORE_UNAVAILABLE',
          message: `redis: redis did not answer within ${expected}ms`,
        });
        expect(lines).toMatchObject([{ redis: 'per-second', timeoutMs: expected }]);
      }
    } finally {
      perSecondServer.proc.child.kill('SIGCONT');
      await Promise.all(stores.map(({ store }) => store.close()));
    }
  });

  it('close() stops the probe of a stalled connection', async () => {
    const server = await startRedis(group);
    const client = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    client.on('error', () => undefined);
    const store = createRedisStore({ client, keyPrefix: 't8:', timeoutMs: 200 });
    // Only the probe's interval is faked: the call's own timeout runs on real time.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    try {
      await waitFor('ready', () => store.healthy(), { timeoutMs: 5_000, intervalMs: 10 });
      server.proc.child.kill('SIGSTOP');
      await expect(store.apply([spec])).rejects.toMatchObject({ code: 'STORE_UNAVAILABLE' });
      expect(vi.getTimerCount()).toBe(1);
      server.proc.child.kill('SIGCONT');
      await store.close();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
      server.proc.child.kill('SIGCONT');
      await store.close();
    }
  });
});
