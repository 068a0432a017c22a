/**
 * ioredis clients from the reference's `REDIS_*` settings (docs/configuration.md): a single node
 * (TCP `host:port`, `redis://`/`rediss://` URL, or a unix socket), Sentinel
 * (`master-name,sentinel1:port,...`) or Cluster (`node1:port,node2:port,...`).
 *
 * Every client fails fast: no offline queue (a call while disconnected fails at once), no resend
 * of calls in flight when the connection drops, connect and command timeouts of `REDIS_TIMEOUT`,
 * and reconnection in the background with a capped backoff.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { Cluster, Redis, type ClusterNode, type ClusterOptions, type RedisOptions } from 'ioredis';
import { SluiceError } from '../../errors.js';
import { parseAddress } from './address.js';
import type { RedisClient } from './redis-store.js';

/** One Redis connection (`REDIS_*`, or `REDIS_PERSECOND_*` for the per-second one). */
export interface RedisConnectionOptions {
  /**
   * `REDIS_URL`: `host:port` or a `redis://`/`rediss://` URL (single), a socket path
   * (`REDIS_SOCKET_TYPE=unix`), `master-name,sentinel:port,...` (sentinel) or
   * `node:port,node:port,...` (cluster).
   */
  readonly url: string;
  /** `REDIS_SOCKET_TYPE`: `tcp` or `unix` (unset: `unix` when the URL starts with `/`). */
  readonly socketType: 'tcp' | 'unix';
  /** `REDIS_TYPE`: `single` (default), `sentinel` or `cluster`, case-insensitive. */
  readonly type: 'single' | 'sentinel' | 'cluster';
  /** `REDIS_AUTH`: `password` or `user:password`; '' for none. */
  readonly auth: string;
  /** `REDIS_SENTINEL_AUTH`: the sentinels' own `password` or `user:password`; '' for none. */
  readonly sentinelAuth: string;
  /** `REDIS_TLS`: connect with TLS. */
  readonly tls: boolean;
  /** `REDIS_TLS_CACERT`: CA bundle file; '' for the system's. */
  readonly tlsCaCert: string;
  /** `REDIS_TLS_CLIENT_CERT`: client certificate file; '' for none. */
  readonly tlsClientCert: string;
  /** `REDIS_TLS_CLIENT_KEY`: client key file; '' for none. */
  readonly tlsClientKey: string;
  /** `REDIS_TLS_SKIP_HOSTNAME_VERIFICATION`: accept a certificate for another host name. */
  readonly tlsSkipHostnameVerification: boolean;
  /**
   * `REDIS_POOL_SIZE` (default 10): accepted for compatibility and validated; sluice pipelines
   * every call over one connection per Redis node.
   */
  readonly poolSize: number;
  /** `REDIS_TIMEOUT` in ms (the reference's duration format, default `10s`). */
  readonly timeoutMs: number;
}

/** Longest wait between reconnection attempts, in ms. */
const MAX_RECONNECT_DELAY_MS = 1_000;

/** `user:password` or `password` (the reference's `REDIS_AUTH` format). */
function splitAuth(auth: string): { username?: string; password?: string } {
  if (auth === '') return {};
  const colon = auth.indexOf(':');
  return colon < 0
    ? { password: auth }
    : { username: auth.slice(0, colon), password: auth.slice(colon + 1) };
}

function tlsOptions(settings: RedisConnectionOptions): ConnectionOptions {
  const read = (file: string, what: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (error) {
      throw new SluiceError(
        'INVALID_SETTINGS',
        `cannot read ${what} ${file}: ${(error as Error).message}`,
      );
    }
  };
  const options: ConnectionOptions = {};
  if (settings.tlsCaCert !== '') options.ca = read(settings.tlsCaCert, 'REDIS_TLS_CACERT');
  if (settings.tlsClientCert !== '')
    options.cert = read(settings.tlsClientCert, 'REDIS_TLS_CLIENT_CERT');
  if (settings.tlsClientKey !== '')
    options.key = read(settings.tlsClientKey, 'REDIS_TLS_CLIENT_KEY');
  if (settings.tlsSkipHostnameVerification) options.checkServerIdentity = () => undefined;
  return options;
}

/**
 * Options every node connection shares. Auto-pipelining: script calls made in one tick (the
 * requests being served concurrently) leave in one write and Redis reads them with one read,
 * which roughly halves Redis CPU per call outside the script itself (BENCHMARKS.md); each
 * request still has its own script call and its own reply.
 */
function baseOptions(settings: RedisConnectionOptions): RedisOptions {
  return {
    ...splitAuth(settings.auth),
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    maxRetriesPerRequest: 0,
    connectTimeout: settings.timeoutMs,
    commandTimeout: settings.timeoutMs,
    retryStrategy: (times: number) => Math.min(times * 50, MAX_RECONNECT_DELAY_MS),
    tls: settings.tls ? tlsOptions(settings) : undefined,
  };
}

/**
 * The ioredis client {@link createRedisClient} makes for `settings`: a `Redis` (single node, also
 * through Sentinel) with its options, or a `Cluster` with its startup nodes and options.
 */
export type RedisClientPlan =
  | { readonly kind: 'redis'; readonly options: RedisOptions }
  | {
      readonly kind: 'cluster';
      readonly nodes: ClusterNode[];
      readonly options: ClusterOptions;
    };

/**
 * What client {@link createRedisClient} makes for `settings` (see {@link RedisClientPlan}). Reads
 * the TLS files; throws INVALID_SETTINGS when one cannot be read.
 */
export function redisClientPlan(settings: RedisConnectionOptions): RedisClientPlan {
  const base = baseOptions(settings);
  const parts = settings.url
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '');
  switch (settings.type) {
    case 'single': {
      if (settings.socketType === 'unix') {
        return { kind: 'redis', options: { ...base, path: settings.url } };
      }
      const address = parseAddress(parts[0] ?? '');
      return {
        kind: 'redis',
        options: {
          ...base,
          host: address.host,
          port: address.port,
          username: address.username ?? base.username,
          password: address.password ?? base.password,
          db: address.db,
          tls: address.tls ? (base.tls ?? tlsOptions(settings)) : base.tls,
        },
      };
    }
    case 'sentinel': {
      const [name, ...sentinels] = parts;
      const sentinelAuth = splitAuth(settings.sentinelAuth);
      return {
        kind: 'redis',
        options: {
          ...base,
          name,
          sentinels: sentinels.map((part) => {
            const address = parseAddress(part);
            return { host: address.host, port: address.port };
          }),
          sentinelUsername: sentinelAuth.username,
          sentinelPassword: sentinelAuth.password,
          sentinelRetryStrategy: (times: number) => Math.min(times * 50, MAX_RECONNECT_DELAY_MS),
          enableTLSForSentinelMode: settings.tls,
        },
      };
    }
    case 'cluster': {
      const nodes: ClusterNode[] = parts.map((part) => {
        const address = parseAddress(part);
        return { host: address.host, port: address.port };
      });
      return {
        kind: 'cluster',
        nodes,
        options: {
          enableOfflineQueue: false,
          enableReadyCheck: true,
          slotsRefreshTimeout: settings.timeoutMs,
          clusterRetryStrategy: (times: number) => Math.min(times * 50, MAX_RECONNECT_DELAY_MS),
          scaleReads: 'master',
          // ioredis 6 refuses an auto-pipeline of script calls whose keys sit in different slots
          // of one node ("All keys in the pipeline should belong to the same slots allocation
          // group"), so cluster connections send each script call on its own.
          redisOptions: { ...base, enableAutoPipelining: false },
        },
      };
    }
  }
}

/** Create (and start connecting) the client the settings describe. */
export function createRedisClient(settings: RedisConnectionOptions): RedisClient {
  const plan = redisClientPlan(settings);
  return plan.kind === 'cluster' ? new Cluster(plan.nodes, plan.options) : new Redis(plan.options);
}

/** Resolve once `client` is ready, or after `timeoutMs` (then it keeps connecting). */
export function waitUntilReady(client: RedisClient, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const done = (ok: boolean): void => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ok);
    };
    const onReady = (): void => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}
