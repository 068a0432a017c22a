/**
 * The debug console over the Redis store (a real redis-server): "try it" answers from Redis and
 * writes nothing there, hot keys says the store does not list its counters but still names the
 * most limited rules, and reset answers 501.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { adminClient, requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';

const requirement = requireRedis('console over redis');

describe.skipIf(requirement.skip)('debug console over the Redis store', () => {
  const group = useProcessGroup();
  let server: RedisServer;
  let sluice: ConsoleApp;

  beforeAll(async () => {
    server = await startRedis(group);
    sluice = await startConsoleApp({
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: `127.0.0.1:${server.port}`,
      DEBUG_CONSOLE_RESET_ENABLED: 'true',
    });
    await waitFor('the Redis store to connect', () => sluice.app.store.healthy(), {
      timeoutMs: 10_000,
    });
  });
  afterAll(async () => {
    await sluice?.stop();
  });

  const post = async (p: string, body: unknown): Promise<{ status: number; data: any }> => {
    const res = await fetch(`${sluice.debugUrl}${p}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, data: await res.json() };
  };
  const request = (value: string): unknown => ({
    domain: 'shop',
    descriptors: [{ entries: [{ key: 'user', value }] }],
  });

  it('tries from Redis without writing, lists rules only, and cannot reset', async () => {
    const admin = adminClient(server.port);
    try {
      for (let i = 0; i < 3; i++) await sluice.call('shop', { user: 'ann' });
      expect(await sluice.call('shop', { user: 'ann' })).toBe('OVER_LIMIT');
      const keysBefore = await admin.dbsize();
      expect(keysBefore).toBe(1);

      const limited = await post('/api/try', request('ann'));
      expect(limited.data).toMatchObject({ overallCode: 'OVER_LIMIT', charged: false });
      const fresh = await post('/api/try', request('ben'));
      expect(fresh.data.overallCode).toBe('OK');
      expect(fresh.data.descriptors[0].limitRemaining).toBe(3);
      expect(await admin.dbsize()).toBe(keysBefore);

      const now = (await (await fetch(`${sluice.debugUrl}/api/now`)).json()) as any;
      expect(now.store).toMatchObject({
        backend: 'redis',
        failureMode: 'error',
        healthy: true,
        listsCounters: false,
        canReset: false,
      });
      const hot = (await (await fetch(`${sluice.debugUrl}/api/hot`)).json()) as any;
      expect(hot).toMatchObject({ listsCounters: false, busiest: [], limited: [] });
      expect(hot.rules).toEqual([{ domain: 'shop', key1: 'user', key2: '', overLimit: 1 }]);

      const reset = await post('/api/reset', request('ann'));
      expect(reset.status).toBe(501);
      expect(reset.data.error).toContain('redis store cannot reset');
    } finally {
      admin.disconnect();
    }
  });
});
