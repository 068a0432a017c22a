/**
 * Redis clients from the `REDIS_*` settings (src/stores/redis/connect.ts) and the store factory
 * (src/stores/index.ts), against real `redis-server` processes: TCP, URL with credentials and a
 * database, password and ACL user auth, unix socket, TLS (REDIS_TLS and rediss://, CA bundle,
 * client certificate, host name verification); every client fails fast (no offline queue,
 * REDIS_TIMEOUT on commands). Sentinel and Cluster clients: redis-client-topologies.test.ts. Servers start lazily in the tests that need
 * them, so a run filtered to one test starts only its own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { SluiceError } from '../../src/errors.js';
import { createLogger, silentLogger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { createStore } from '../../src/stores/index.js';
import { waitUntilReady } from '../../src/stores/redis/connect.js';
import { createCa, issueCert, requireOpenssl } from '../helpers/certs.js';
import { freePort, useProcessGroup } from '../helpers/processes.js';
import {
  adminClient,
  recordingStoreMetrics,
  useRedisClients,
  requireRedis,
  startRedis,
  type RedisServer,
} from '../helpers/redis.js';
import { specBuilder } from '../helpers/specs.js';

const requirement = requireRedis('redis clients');
const opensslRequirement = requireOpenssl('redis clients over TLS');
const group = useProcessGroup();

afterAll(async () => {
  await group.stopAll();
});
// Registered after the group's hook, so the clients are disconnected before the servers stop.
const client = useRedisClients();

/** Start once, on first use. */
function lazy<T>(start: () => Promise<T>): () => Promise<T> {
  let started: Promise<T> | undefined;
  return () => (started ??= start());
}

const plain = lazy<RedisServer>(() => startRedis(group));
/** A server with a default-user password (`pw`) and an ACL user `alice` (`alicepw`). */
const withPassword = lazy<RedisServer>(async () => {
  const server = await startRedis(group);
  const admin = adminClient(server.port);
  try {
    await admin.call('ACL', 'SETUSER', 'alice', 'on', '>alicepw', '~*', '&*', '+@all');
    await admin.config('SET', 'requirepass', 'pw');
  } finally {
    admin.disconnect();
  }
  return server;
});
const socketDir = mkdtempSync(path.join(tmpdir(), 'sluice-sock-'));
group.onCleanup(() => rmSync(socketDir, { recursive: true, force: true }));
const overSocket = lazy<RedisServer>(() =>
  startRedis(group, { args: ['--unixsocket', path.join(socketDir, 'redis.sock')] }),
);

/**
 * Certificates for the TLS servers: a CA, a server certificate for 127.0.0.1, one for another
 * host name only, and a client certificate.
 */
const tlsFiles = lazy(() => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-redis-tls-'));
  group.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  const ca = createCa(dir, 'redis');
  return Promise.resolve({
    ca,
    server: issueCert(ca, dir, 'server', { sans: ['IP:127.0.0.1'], usage: 'serverAuth' }),
    elsewhere: issueCert(ca, dir, 'elsewhere', {
      sans: ['DNS:elsewhere.example'],
      usage: 'serverAuth',
    }),
    client: issueCert(ca, dir, 'client', { sans: [], usage: 'clientAuth' }),
  });
});

/** A server that also listens with TLS on `tlsPort`, with `cert` as its certificate. */
async function startTlsRedis(
  which: 'server' | 'elsewhere',
  clientCerts: 'yes' | 'no',
): Promise<{ tlsPort: number }> {
  const files = await tlsFiles();
  const tlsPort = await freePort();
  await startRedis(group, {
    args: [
      '--tls-port',
      String(tlsPort),
      '--tls-cert-file',
      files[which].cert,
      '--tls-key-file',
      files[which].key,
      '--tls-ca-cert-file',
      files.ca.cert,
      '--tls-auth-clients',
      clientCerts,
    ],
  });
  return { tlsPort };
}

/** TLS for 127.0.0.1, client certificates required. */
const tlsServer = lazy(() => startTlsRedis('server', 'yes'));
/** TLS with a certificate for elsewhere.example only, no client certificates. */
const tlsElsewhere = lazy(() => startTlsRedis('elsewhere', 'no'));

const spec = specBuilder({ algorithm: 'fixed_window' });

describe.skipIf(requirement.skip)('createRedisClient', () => {
  it('single node over TCP, host:port', async () => {
    const server = await plain();
    const made = client({ url: ` ${server.address} ` });
    expect(await waitUntilReady(made, 5_000)).toBe(true);
    // Already ready: resolves at once.
    expect(await waitUntilReady(made, 1)).toBe(true);
    expect(await made.ping()).toBe('PONG');
  });

  it('a redis:// URL selects its database', async () => {
    const server = await plain();
    const made = client({ url: `redis://127.0.0.1:${server.port}/3` });
    expect(await waitUntilReady(made, 5_000)).toBe(true);
    await made.set('sluice-db-test', 'x');
    const admin = adminClient(server.port);
    try {
      expect(await admin.exists('sluice-db-test')).toBe(0);
      await admin.select(3);
      expect(await admin.get('sluice-db-test')).toBe('x');
    } finally {
      admin.disconnect();
    }
  });

  it('REDIS_AUTH as password or user:password; credentials in the URL win', async () => {
    const server = await withPassword();
    for (const more of [
      { url: server.address, auth: 'pw' },
      { url: server.address, auth: 'alice:alicepw' },
      { url: `redis://alice:alicepw@127.0.0.1:${server.port}`, auth: 'wrong' },
      { url: `redis://:pw@127.0.0.1:${server.port}` },
    ]) {
      const made = client(more);
      expect(await waitUntilReady(made, 5_000), JSON.stringify(more)).toBe(true);
      expect(await made.ping()).toBe('PONG');
    }
    const wrong = client({ url: server.address, auth: 'alice:nope' });
    expect(await waitUntilReady(wrong, 500)).toBe(false);
    const none = client({ url: server.address });
    expect(await waitUntilReady(none, 500)).toBe(false);
  });

  it('a unix socket path', async () => {
    await overSocket();
    const made = client({ url: path.join(socketDir, 'redis.sock'), socketType: 'unix' });
    expect(await waitUntilReady(made, 5_000)).toBe(true);
    expect(await made.ping()).toBe('PONG');
  });

  it('fails fast: not ready within the timeout, and a call while disconnected fails at once', async () => {
    const port = await freePort();
    const made = client({ url: `127.0.0.1:${port}`, timeoutMs: 200 });
    // The wait lasts exactly its timeout (on a fake clock), then answers false.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let ready: boolean | undefined;
    const listeners = made.listenerCount('ready');
    try {
      void waitUntilReady(made, 300).then((ok) => (ready = ok));
      expect(made.listenerCount('ready')).toBe(listeners + 1);
      await vi.advanceTimersByTimeAsync(299);
      expect(ready).toBeUndefined();
      await vi.advanceTimersByTimeAsync(1);
      expect(ready).toBe(false);
      // A wait that ended leaves no listener behind (a client is waited on at every start).
      expect(made.listenerCount('ready')).toBe(listeners);
    } finally {
      vi.useRealTimers();
    }
    // At once: refused by the client (no offline queue), not left to time out.
    await expect(made.ping()).rejects.toThrow(/enableOfflineQueue/);
    // It keeps trying in the background with a capped backoff.
    const retry = (made as unknown as { options: { retryStrategy: (times: number) => number } })
      .options.retryStrategy;
    expect([1, 2, 20, 21, 1_000].map((n) => retry(n))).toEqual([50, 100, 1_000, 1_000, 1_000]);
  });

  it('commands time out after REDIS_TIMEOUT when the server stops answering', async () => {
    const server = await startRedis(group);
    const made = client({ url: server.address, timeoutMs: 300 });
    expect(await waitUntilReady(made, 5_000)).toBe(true);
    server.proc.child.kill('SIGSTOP');
    try {
      // ioredis's command timeout, set from REDIS_TIMEOUT, is what failed the call.
      expect(
        (made as unknown as { options: { commandTimeout: number } }).options.commandTimeout,
      ).toBe(300);
      await expect(made.ping()).rejects.toThrow(/^Command timed out$/);
    } finally {
      server.proc.child.kill('SIGCONT');
      await server.stop();
    }
  });
});

describe.skipIf(requirement.skip || opensslRequirement.skip)('createRedisClient over TLS', () => {
  it('REDIS_TLS with a CA bundle and a client certificate, or a rediss:// URL with the same files', async () => {
    const { tlsPort } = await tlsServer();
    const { ca, client: cert } = await tlsFiles();
    const files = { tlsCaCert: ca.cert, tlsClientCert: cert.cert, tlsClientKey: cert.key };
    for (const more of [
      { url: `127.0.0.1:${tlsPort}`, tls: true, ...files },
      { url: `rediss://127.0.0.1:${tlsPort}`, ...files },
    ]) {
      const made = client(more);
      expect(await waitUntilReady(made, 5_000), more.url).toBe(true);
      expect(await made.ping()).toBe('PONG');
    }
    // The server requires a client certificate: without one the handshake fails.
    const anonymous = client({ url: `127.0.0.1:${tlsPort}`, tls: true, tlsCaCert: ca.cert });
    expect(await waitUntilReady(anonymous, 500)).toBe(false);
    // Without the CA bundle the server's certificate is not trusted.
    const untrusting = client({ url: `127.0.0.1:${tlsPort}`, tls: true, ...files, tlsCaCert: '' });
    expect(await waitUntilReady(untrusting, 500)).toBe(false);
  });

  it('a certificate for another host name: refused, unless REDIS_TLS_SKIP_HOSTNAME_VERIFICATION', async () => {
    const { tlsPort } = await tlsElsewhere();
    const { ca } = await tlsFiles();
    const base = { url: `127.0.0.1:${tlsPort}`, tls: true, tlsCaCert: ca.cert };
    const verifying = client(base);
    expect(await waitUntilReady(verifying, 500)).toBe(false);
    const skipping = client({ ...base, tlsSkipHostnameVerification: true });
    expect(await waitUntilReady(skipping, 5_000)).toBe(true);
    expect(await skipping.ping()).toBe('PONG');
  });
});

/** Lines a logger wrote, parsed. */
function capture(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) {
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  return { lines, stream };
}

describe('createStore', () => {
  it('BACKEND_TYPE=memory: a memory store capped at MEMORY_MAX_KEYS, LRU evictions counted and logged', async () => {
    const { lines, stream } = capture();
    const logger = createLogger({ level: 'warn', format: 'json', destination: stream });
    const metrics = recordingStoreMetrics();
    const clock = createManualClock(1_699_999_980_000);
    const store = await createStore(loadSettings({ MEMORY_MAX_KEYS: '64' }), {
      clock: clock.now,
      logger,
      metrics,
    });
    try {
      for (let i = 0; i < 64; i++) await store.apply([spec(`k${i}`, 1, 5)]);
      expect(store.size()).toBe(64);
      expect(metrics.events).toEqual([]);
      await store.apply([spec('k64', 1, 5)]);
      expect(store.size()).toBe(64);
      expect(metrics.events).toEqual(['evicted:lru:1']);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        module: 'memory-store',
        count: 1,
        maxKeys: 64,
        msg: 'evicted live counters: MEMORY_MAX_KEYS reached',
      });
      // Expired counters are counted too, and not logged as a warning.
      clock.advance(120_000);
      await store.apply([spec('fresh', 1, 5)]);
      expect(metrics.events.filter((e) => e.startsWith('evicted:expired:')).length).toBe(
        metrics.events.length - 1,
      );
      expect(lines).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  it.skipIf(requirement.skip)(
    'BACKEND_TYPE=redis: the Redis store behind the failure policy, with the per-second client',
    async () => {
      const server = await plain();
      const { lines, stream } = capture();
      const logger = createLogger({ level: 'info', format: 'json', destination: stream });
      const metrics = recordingStoreMetrics();
      const env = {
        REDIS_URL: server.address,
        REDIS_PERSECOND: 'true',
        REDIS_PERSECOND_URL: `redis://127.0.0.1:${server.port}/1`,
        CACHE_KEY_PREFIX: 'factory:',
        LOCAL_CACHE_SIZE_IN_BYTES: '4096',
        STORE_FAILURE_MODE: 'allow',
        REDIS_WAIT_AT_START: 'true',
      };
      const store = await createStore(loadSettings(env), { clock: Date.now, logger, metrics });
      try {
        expect(store.healthy()).toBe(true);
        const batch = await store.apply([{ ...spec('s', 1, 5), windowMs: 1_000 }, spec('m', 2, 5)]);
        expect(batch.results.map((r) => r.remaining)).toEqual([4, 3]);
        const admin = adminClient(server.port);
        try {
          expect((await admin.keys('factory:*')).map((k) => k.replace(/\{.*\}v2\|/, ''))).toEqual([
            'factory:m',
          ]);
          await admin.select(1);
          expect((await admin.keys('factory:*')).map((k) => k.replace(/\{.*\}v2\|/, ''))).toEqual([
            'factory:s',
          ]);
        } finally {
          admin.disconnect();
        }
        const created = lines.find((line) => line['msg'] === 'redis store created');
        expect(created).toMatchObject({
          module: 'redis-store',
          redisType: 'single',
          perSecond: true,
          localCacheBytes: 4096,
          failureMode: 'allow',
          connected: true,
        });
        expect(lines.some((line) => String(line['msg']).includes('BACKEND_TYPE is not set'))).toBe(
          true,
        );
      } finally {
        await store.close();
      }
    },
  );

  it.skipIf(requirement.skip)(
    'STORE_FAILURE_MODE=memory: a Redis that is not there answers from memory; error fails',
    async () => {
      const port = await freePort();
      const logger = silentLogger();
      const base = {
        BACKEND_TYPE: 'redis',
        REDIS_URL: `127.0.0.1:${port}`,
        REDIS_TIMEOUT: '100ms',
      };
      const metrics = recordingStoreMetrics();
      const memory = await createStore(loadSettings({ ...base, STORE_FAILURE_MODE: 'memory' }), {
        clock: Date.now,
        logger,
        metrics,
      });
      const failing = await createStore(loadSettings(base), { clock: Date.now, logger });
      try {
        // memory: healthy (the replica answers) and decides from its own counts.
        expect(memory.healthy()).toBe(true);
        const first = await memory.apply([spec('a', 1, 1)]);
        expect(first.admitted).toBe(true);
        const second = await memory.apply([spec('a', 1, 1)]);
        expect(second.admitted).toBe(false);
        expect(metrics.events.filter((e) => e === 'fallback:memory')).toHaveLength(2);
        expect(memory.size()).toBe(1);
        // error (default): unhealthy, and the call fails.
        expect(failing.healthy()).toBe(false);
        const error = await failing.apply([spec('a', 1, 1)]).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(SluiceError);
        expect((error as SluiceError).code).toBe('STORE_UNAVAILABLE');
      } finally {
        await Promise.all([memory.close(), failing.close()]);
      }
    },
  );
});
