/**
 * Real Redis servers for tests: a standalone `redis-server`, a 3-master cluster (`redis-cli
 * --cluster create`) and a master + replica + sentinel, each on free loopback ports with a
 * throwaway directory, stopped by the owning process group. A suite that needs `redis-server`
 * is skipped with a visible reason when it is missing, and fails under CI (see `inCi`).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import type { StoreMetricsSink } from '../../src/metrics/metrics.js';
import type { CounterStore } from '../../src/stores/counter-store.js';
import { createRedisClient, type RedisConnectionOptions } from '../../src/stores/redis/connect.js';
import {
  createRedisStore,
  type RedisClient,
  type RedisStoreOptions,
} from '../../src/stores/redis/redis-store.js';
import {
  freePort,
  useProcessGroup,
  waitFor,
  type ManagedProcess,
  type ProcessGroup,
} from './processes.js';
import { requireBinaries, type Requirement } from './require-binaries.js';

/** `redis-server`, `redis-cli` (and `redis-sentinel` when `sentinel`), by {@link requireBinaries}. */
export function requireRedis(suite: string, sentinel = false): Requirement {
  const install = 'Debian: apt-get install redis-server redis-sentinel';
  return requireBinaries(
    suite,
    ['redis-server', 'redis-cli', ...(sentinel ? ['redis-sentinel'] : [])].map((name) => ({
      name,
      install,
    })),
  );
}

/**
 * Connection settings for `createRedisClient` as settings.ts makes them for one plain server over
 * TCP (no auth, no TLS, the default pool of 10) with a 2 s timeout; `more` sets the URL and adds
 * or overrides the rest.
 */
export function redisConnectionOptions(
  more: Partial<RedisConnectionOptions> = {},
): RedisConnectionOptions {
  return {
    url: '',
    socketType: 'tcp',
    type: 'single',
    auth: '',
    sentinelAuth: '',
    tls: false,
    tlsCaCert: '',
    tlsClientCert: '',
    tlsClientKey: '',
    tlsSkipHostnameVerification: false,
    poolSize: 10,
    timeoutMs: 2_000,
    ...more,
  };
}

/**
 * Call once at the top of a test file: a maker of clients from `createRedisClient` on
 * {@link redisConnectionOptions}(`more`), their errors ignored (tests assert on readiness and
 * replies), all disconnected after the file's tests.
 */
export function useRedisClients(): (more: Partial<RedisConnectionOptions>) => RedisClient {
  const clients: RedisClient[] = [];
  afterAll(() => {
    for (const client of clients.splice(0)) client.disconnect();
  });
  return (more) => {
    const made = createRedisClient(redisConnectionOptions(more));
    made.on('error', () => undefined);
    clients.push(made);
    return made;
  };
}

/** The settings of the Redis store on `address` (`host:port`) over TCP, as sluice and the reference read them. */
export function redisBackendEnv(address: string): Record<string, string> {
  return { BACKEND_TYPE: 'redis', REDIS_SOCKET_TYPE: 'tcp', REDIS_URL: address };
}

/** A running Redis process. */
export interface RedisServer {
  readonly port: number;
  readonly dir: string;
  readonly proc: ManagedProcess;
  /** `127.0.0.1:port`. */
  readonly address: string;
  /** Stop it (SIGKILL when `kill`, as a crash would). */
  stop(kill?: boolean): Promise<void>;
}

/** Wait until `redis-cli -p port PING` answers PONG. */
async function waitForPing(port: number, proc: ManagedProcess): Promise<void> {
  await waitFor(
    `redis on port ${port}`,
    async () => {
      if (proc.hasExited()) throw new Error(`redis exited early:\n${proc.output()}`);
      const client = new Redis({
        port,
        host: '127.0.0.1',
        lazyConnect: true,
        retryStrategy: () => null,
      });
      client.on('error', () => undefined);
      try {
        await client.connect();
        return (await client.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        client.disconnect();
      }
    },
    { timeoutMs: 10_000, intervalMs: 50 },
  );
}

/**
 * Start `redis-server` on a free loopback port (or `port`) with no persistence, in a throwaway
 * directory; `args` are appended (e.g. `['--cluster-enabled', 'yes']`).
 */
export async function startRedis(
  group: ProcessGroup,
  options: { port?: number; args?: readonly string[]; dir?: string } = {},
): Promise<RedisServer> {
  const port = options.port ?? (await freePort());
  const dir = options.dir ?? mkdtempSync(path.join(tmpdir(), 'sluice-redis-'));
  const proc = group.spawn('redis-server', 'redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    '--appendonly',
    'no',
    '--dir',
    dir,
    ...(options.args ?? []),
  ]);
  group.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  await waitForPing(port, proc);
  return {
    port,
    dir,
    proc,
    address: `127.0.0.1:${port}`,
    async stop(kill = false) {
      if (kill) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      } else {
        await proc.stop();
      }
    },
  };
}

/** A client for test assertions (INFO, TTL, SCRIPT FLUSH...). */
export function adminClient(port: number): Redis {
  const client = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  return client;
}

/** A Redis store a contract test opened, with its client and key prefix. */
export interface TestRedisStore {
  readonly client: Redis;
  readonly store: CounterStore;
  /** The store's random key prefix (`<tag>-<uuid>:`), so tests on one server never share keys. */
  readonly prefix: string;
}

/**
 * A Redis store on the `redis-server` at `port` for a contract test: a new client (connected
 * before this resolves), a random key prefix tagged `tag`, a 5 s timeout and keys kept an hour past
 * their windows (a manual clock does not move Redis's own expiry); `options` adds or overrides the
 * rest (clocks, metrics, the per-second client, the local cache). The caller closes the store.
 */
export async function openTestStore(
  port: number,
  tag: string,
  options: Partial<Omit<RedisStoreOptions, 'client' | 'keyPrefix'>> = {},
): Promise<TestRedisStore> {
  const prefix = `${tag}-${randomUUID()}:`;
  const client = new Redis({ port, host: '127.0.0.1' });
  const store = createRedisStore({
    timeoutMs: 5_000,
    ttlGraceMs: 3_600_000,
    ...options,
    client,
    keyPrefix: prefix,
  });
  await client.ping();
  return { client, store, prefix };
}

/**
 * One `redis-server` the tests of a file share, started before them and stopped after them with
 * everything opened on it through this object.
 */
export interface SharedRedis {
  /** Whether the file's suites are skipped (`redis-server` missing, locally), and why. */
  readonly requirement: Requirement;
  /** The file's process group, for the servers a test starts on its own. */
  readonly group: ProcessGroup;
  /** The shared server; read it inside tests (it starts in `beforeAll`). */
  readonly server: RedisServer;
  /** A client on the server for assertions (INFO, KEYS, TTL, DUMP...). */
  readonly admin: Redis;
  /** Close `stores` after the file's tests. */
  track(...stores: CounterStore[]): void;
  /** {@link openTestStore} on the shared server; the store is closed after the file's tests. */
  openStore(
    tag: string,
    options?: Partial<Omit<RedisStoreOptions, 'client' | 'keyPrefix'>>,
  ): Promise<TestRedisStore>;
  /** A new client on the shared server (`options` added), disconnected after the file's tests. */
  client(options?: RedisOptions): Redis;
}

/**
 * Call once at the top of a test file: a `redis-server` for its tests ({@link requireRedis} with
 * `suite` decides whether they run), an admin client, and the stores and clients the tests open,
 * all closed after the file's tests.
 */
export function useSharedRedis(suite: string): SharedRedis {
  const requirement = requireRedis(suite);
  const group = useProcessGroup();
  let server: RedisServer | undefined;
  let admin: Redis | undefined;
  const stores: CounterStore[] = [];
  const clients: Redis[] = [];

  beforeAll(async () => {
    if (requirement.skip) return;
    server = await startRedis(group);
    admin = adminClient(server.port);
  });
  afterAll(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
    for (const client of clients.splice(0)) client.disconnect();
    admin?.disconnect();
    await group.stopAll();
  });

  const started = (): RedisServer => {
    if (server === undefined) throw new Error(`${suite}: the shared redis-server is not started`);
    return server;
  };
  const shared: SharedRedis = {
    requirement,
    group,
    get server() {
      return started();
    },
    get admin() {
      started();
      return admin!;
    },
    track(...opened) {
      stores.push(...opened);
    },
    async openStore(tag, options = {}) {
      const opened = await openTestStore(started().port, tag, options);
      stores.push(opened.store);
      return opened;
    },
    client(options = {}) {
      const client = new Redis({ port: started().port, host: '127.0.0.1', ...options });
      clients.push(client);
      return client;
    },
  };
  return shared;
}

/** A store metrics sink that records what a store reports to it. */
export interface RecordingStoreMetrics extends StoreMetricsSink {
  /**
   * Every report, in order: `evicted:<reason>:<count>`, `error:<kind>`, `cache:<count>`,
   * `fallback:<policy>`.
   */
  readonly events: string[];
  /** The kinds of the `storeError` reports only, in order. */
  errors(): string[];
}

/** A new {@link RecordingStoreMetrics}, empty. */
export function recordingStoreMetrics(): RecordingStoreMetrics {
  const events: string[] = [];
  return {
    events,
    errors: () => events.filter((e) => e.startsWith('error:')).map((e) => e.slice('error:'.length)),
    evicted: (reason, count) => void events.push(`evicted:${reason}:${count}`),
    storeError: (kind) => void events.push(`error:${kind}`),
    localCacheOverLimit: (count) => void events.push(`cache:${count}`),
    fallback: (policy) => void events.push(`fallback:${policy}`),
  };
}

/** Calls of the apply script (EVALSHA and EVAL) since the last `CONFIG RESETSTAT`. */
export async function scriptCalls(admin: Redis): Promise<number> {
  const calls = await commandCalls(admin);
  return (calls.get('evalsha') ?? 0) + (calls.get('eval') ?? 0);
}

/** Calls of each command since the last `CONFIG RESETSTAT`, from `INFO commandstats`. */
export async function commandCalls(client: Redis): Promise<Map<string, number>> {
  const info = await client.info('commandstats');
  const calls = new Map<string, number>();
  for (const line of info.split('\n')) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match !== null) calls.set(match[1]!, Number(match[2]));
  }
  return calls;
}

/** A 3-master Redis Cluster on loopback. */
export interface RedisCluster {
  readonly nodes: readonly RedisServer[];
  /** `host:port,host:port,host:port` as `REDIS_URL` takes it with `REDIS_TYPE=cluster`. */
  readonly url: string;
}

/** Start three cluster-enabled servers and join them with `redis-cli --cluster create`. */
export async function startRedisCluster(group: ProcessGroup): Promise<RedisCluster> {
  const nodes: RedisServer[] = [];
  for (let k = 0; k < 3; k++) {
    nodes.push(
      await startRedis(group, {
        args: [
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          'nodes.conf',
          '--cluster-node-timeout',
          '2000',
        ],
      }),
    );
  }
  const create = spawnSync(
    'redis-cli',
    [
      '--cluster',
      'create',
      ...nodes.map((n) => n.address),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (create.status !== 0) {
    throw new Error(`redis-cli --cluster create failed:\n${create.stdout}\n${create.stderr}`);
  }
  await waitFor(
    'cluster_state:ok on every node',
    async () => {
      for (const node of nodes) {
        const client = adminClient(node.port);
        try {
          const info = await client.cluster('INFO');
          if (!String(info).includes('cluster_state:ok')) return false;
        } finally {
          client.disconnect();
        }
      }
      return true;
    },
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  return { nodes, url: nodes.map((n) => n.address).join(',') };
}

/** A master, a replica of it and one sentinel watching them. */
export interface RedisSentinelSetup {
  readonly master: RedisServer;
  readonly replica: RedisServer;
  readonly sentinel: RedisServer;
  /** The master name the sentinel knows. */
  readonly name: string;
  /** `name,127.0.0.1:sentinelPort` as `REDIS_URL` takes it with `REDIS_TYPE=sentinel`. */
  readonly url: string;
}

/** Start a master, a replica and a sentinel (quorum 1, fast failover). */
export async function startRedisSentinel(group: ProcessGroup): Promise<RedisSentinelSetup> {
  const name = 'sluicemaster';
  const master = await startRedis(group);
  const replica = await startRedis(group, {
    args: ['--replicaof', '127.0.0.1', String(master.port)],
  });
  const sentinelPort = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-sentinel-'));
  const conf = path.join(dir, 'sentinel.conf');
  writeFileSync(
    conf,
    [
      `port ${sentinelPort}`,
      'bind 127.0.0.1',
      `dir ${dir}`,
      `sentinel monitor ${name} 127.0.0.1 ${master.port} 1`,
      `sentinel down-after-milliseconds ${name} 1000`,
      `sentinel failover-timeout ${name} 5000`,
      `sentinel parallel-syncs ${name} 1`,
      '',
    ].join('\n'),
  );
  const proc = group.spawn('redis-sentinel', 'redis-sentinel', [conf]);
  group.onCleanup(() => rmSync(dir, { recursive: true, force: true }));
  await waitForPing(sentinelPort, proc);
  // The sentinel must have found the replica before a failover can promote it.
  await waitFor(
    'the sentinel to see the replica',
    async () => {
      const client = adminClient(sentinelPort);
      try {
        const replicas = (await client.call('SENTINEL', 'REPLICAS', name)) as unknown[];
        return Array.isArray(replicas) && replicas.length > 0;
      } finally {
        client.disconnect();
      }
    },
    { timeoutMs: 15_000, intervalMs: 200 },
  );
  const sentinel: RedisServer = {
    port: sentinelPort,
    dir,
    proc,
    address: `127.0.0.1:${sentinelPort}`,
    stop: async () => proc.stop(),
  };
  return { master, replica, sentinel, name, url: `${name},127.0.0.1:${sentinelPort}` };
}
