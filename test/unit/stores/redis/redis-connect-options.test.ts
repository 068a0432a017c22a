/**
 * The ioredis options connect.ts builds from the `REDIS_*` settings (`redisClientPlan`): what each
 * setting becomes for a single node, a unix socket, Sentinel and Cluster, and the TLS files. The
 * clients these options make are exercised against real servers in
 * test/contract/redis-connect.test.ts (single node, auth, TLS, socket) and
 * test/contract/redis-client-topologies.test.ts (Sentinel, Cluster).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { PeerCertificate } from 'node:tls';
import type { ClusterOptions, RedisOptions } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { SluiceError } from '../../../../src/errors.js';
import {
  redisClientPlan,
  type RedisConnectionOptions,
} from '../../../../src/stores/redis/connect.js';
import { redisConnectionOptions } from '../../../helpers/redis.js';

const dir = mkdtempSync(path.join(tmpdir(), 'sluice-connect-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A file holding `text` (the options carry the bytes; nothing parses them here). */
function file(name: string, text: string): string {
  const at = path.join(dir, name);
  writeFileSync(at, text);
  return at;
}

function settings(more: Partial<RedisConnectionOptions>): RedisConnectionOptions {
  return redisConnectionOptions({ url: '127.0.0.1:6379', ...more });
}

/** The options of a `Redis` client (single node or Sentinel). */
function redisOptions(more: Partial<RedisConnectionOptions>): RedisOptions {
  const plan = redisClientPlan(settings(more));
  if (plan.kind !== 'redis') throw new Error(`expected a Redis client, got ${plan.kind}`);
  return plan.options;
}

/** Every node connection's options, before the topology adds its own. */
const failFast = {
  enableAutoPipelining: true,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  connectTimeout: 2_000,
  commandTimeout: 2_000,
  retryStrategy: expect.any(Function) as unknown,
};

/** Waits a retry strategy answers for the 1st, 2nd, 20th, 21st and 1000th attempt. */
function waits(strategy: ((times: number) => unknown) | null | undefined): unknown[] {
  expect(strategy).toBeTypeOf('function');
  return [1, 2, 20, 21, 1_000].map((times) => strategy!(times));
}

describe('redisClientPlan: a single node', () => {
  it('host:port: fails fast with REDIS_TIMEOUT for connecting and for each command, no TLS', () => {
    const options = redisOptions({ url: ' 10.1.2.3:7000 , ignored:1', timeoutMs: 1_234 });
    expect(options).toEqual({
      ...failFast,
      connectTimeout: 1_234,
      commandTimeout: 1_234,
      host: '10.1.2.3',
      port: 7000,
    });
    expect(options.tls).toBeUndefined();
    expect(options.username).toBeUndefined();
    expect(options.password).toBeUndefined();
    expect(options.db).toBeUndefined();
  });

  it('reconnects with a backoff of 50 ms per attempt, capped at one second', () => {
    expect(waits(redisOptions({}).retryStrategy)).toEqual([50, 100, 1_000, 1_000, 1_000]);
  });

  it('REDIS_AUTH: a password alone, or user:password split at the first colon', () => {
    expect(redisOptions({ auth: 'secret' })).toMatchObject({ password: 'secret' });
    expect(redisOptions({ auth: 'secret' }).username).toBeUndefined();
    expect(redisOptions({ auth: 'alice:pa:ss' })).toMatchObject({
      username: 'alice',
      password: 'pa:ss',
    });
    expect(redisOptions({ auth: ':pw' })).toMatchObject({ username: '', password: 'pw' });
  });

  it('a redis:// URL gives host, port, database and credentials, which win over REDIS_AUTH', () => {
    expect(
      redisOptions({ url: 'redis://bob:bobpw@cache.local:6380/4', auth: 'alice:alicepw' }),
    ).toMatchObject({ host: 'cache.local', port: 6380, db: 4, username: 'bob', password: 'bobpw' });
    // Only a password in the URL: REDIS_AUTH's user stays.
    expect(redisOptions({ url: 'redis://:urlpw@h:1', auth: 'alice:alicepw' })).toMatchObject({
      username: 'alice',
      password: 'urlpw',
    });
    expect(redisOptions({ url: 'redis://h:1', auth: 'alice:alicepw' })).toMatchObject({
      username: 'alice',
      password: 'alicepw',
    });
  });

  it('a rediss:// URL turns TLS on even without REDIS_TLS, with the REDIS_TLS_* files', () => {
    expect(redisOptions({ url: 'rediss://h:1' }).tls).toEqual({});
    const ca = file('url-ca.pem', 'url CA');
    expect(redisOptions({ url: 'rediss://h:1', tlsCaCert: ca }).tls).toEqual({
      ca: Buffer.from('url CA'),
    });
    // A redis:// URL leaves TLS to REDIS_TLS.
    expect(redisOptions({ url: 'redis://h:1', tlsCaCert: ca }).tls).toBeUndefined();
    expect(redisOptions({ url: 'redis://h:1', tls: true, tlsCaCert: ca }).tls).toEqual({
      ca: Buffer.from('url CA'),
    });
  });

  it('REDIS_SOCKET_TYPE=unix: the URL is the socket path, with the same fail-fast options', () => {
    const options = redisOptions({ url: '/run/redis/redis.sock', socketType: 'unix', auth: 'pw' });
    expect(options).toEqual({ ...failFast, password: 'pw', path: '/run/redis/redis.sock' });
  });
});

describe('redisClientPlan: TLS files', () => {
  it('REDIS_TLS with no files: TLS with the system CAs and host name verification', () => {
    const tls = redisOptions({ tls: true }).tls;
    expect(tls).toEqual({});
  });

  it('reads the CA bundle, the client certificate and its key', () => {
    const ca = file('ca.pem', 'the CA');
    const cert = file('client.pem', 'the client cert');
    const key = file('client.key', 'the client key');
    expect(
      redisOptions({ tls: true, tlsCaCert: ca, tlsClientCert: cert, tlsClientKey: key }).tls,
    ).toEqual({
      ca: Buffer.from('the CA'),
      cert: Buffer.from('the client cert'),
      key: Buffer.from('the client key'),
    });
    expect(redisOptions({ tls: true, tlsClientKey: key }).tls).toEqual({
      key: Buffer.from('the client key'),
    });
    expect(redisOptions({ tls: true, tlsClientCert: cert }).tls).toEqual({
      cert: Buffer.from('the client cert'),
    });
  });

  it('REDIS_TLS_SKIP_HOSTNAME_VERIFICATION accepts a certificate for any host name', () => {
    const tls = redisOptions({ tls: true, tlsSkipHostnameVerification: true }).tls;
    const check = tls?.checkServerIdentity;
    expect(check).toBeTypeOf('function');
    const cert = { subject: { CN: 'other.example' }, subjectaltname: 'DNS:other.example' };
    expect(check!('redis.example', cert as unknown as PeerCertificate)).toBeUndefined();
    expect(redisOptions({ tls: true }).tls).not.toHaveProperty('checkServerIdentity');
  });

  it('a file that cannot be read is INVALID_SETTINGS naming the setting and the file', () => {
    const missing = path.join(dir, 'nope.pem');
    for (const [field, name] of [
      ['tlsCaCert', 'REDIS_TLS_CACERT'],
      ['tlsClientCert', 'REDIS_TLS_CLIENT_CERT'],
      ['tlsClientKey', 'REDIS_TLS_CLIENT_KEY'],
    ] as const) {
      let error: unknown;
      try {
        redisClientPlan(settings({ tls: true, [field]: missing }));
      } catch (caught) {
        error = caught;
      }
      expect(error, name).toBeInstanceOf(SluiceError);
      expect((error as SluiceError).code).toBe('INVALID_SETTINGS');
      expect((error as SluiceError).message).toMatch(
        new RegExp(`^cannot read ${name} ${missing}: ENOENT`),
      );
    }
  });
});

describe('redisClientPlan: Sentinel', () => {
  it('master name then sentinels; REDIS_SENTINEL_AUTH for the sentinels, REDIS_AUTH for Redis', () => {
    const options = redisOptions({
      type: 'sentinel',
      url: ' mymaster , 10.0.0.1:26379 ,10.0.0.2:26380,',
      auth: 'app:apppw',
      sentinelAuth: 'watch:watchpw',
    });
    expect(options).toEqual({
      ...failFast,
      username: 'app',
      password: 'apppw',
      name: 'mymaster',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '10.0.0.2', port: 26380 },
      ],
      sentinelUsername: 'watch',
      sentinelPassword: 'watchpw',
      sentinelRetryStrategy: expect.any(Function) as unknown,
      enableTLSForSentinelMode: false,
    });
    expect(waits(options.sentinelRetryStrategy)).toEqual([50, 100, 1_000, 1_000, 1_000]);
  });

  it('a sentinel password alone; REDIS_TLS also covers the sentinel connections', () => {
    const options = redisOptions({
      type: 'sentinel',
      url: 'm,s:1',
      sentinelAuth: 'only',
      tls: true,
    });
    expect(options).toMatchObject({ sentinelPassword: 'only', enableTLSForSentinelMode: true });
    expect(options.sentinelUsername).toBeUndefined();
    expect(options.tls).toEqual({});
  });
});

describe('redisClientPlan: Cluster', () => {
  it('every listed node; slot refreshes bounded by REDIS_TIMEOUT; no auto-pipelining per node', () => {
    const plan = redisClientPlan(
      settings({
        type: 'cluster',
        url: ' n1:7000, n2:7001 ,,n3:7002 ',
        auth: 'pw',
        timeoutMs: 750,
      }),
    );
    expect(plan.kind).toBe('cluster');
    const { nodes, options } = plan as { nodes: unknown; options: ClusterOptions };
    expect(nodes).toEqual([
      { host: 'n1', port: 7000 },
      { host: 'n2', port: 7001 },
      { host: 'n3', port: 7002 },
    ]);
    expect(options).toEqual({
      enableOfflineQueue: false,
      enableReadyCheck: true,
      slotsRefreshTimeout: 750,
      clusterRetryStrategy: expect.any(Function) as unknown,
      scaleReads: 'master',
      redisOptions: {
        ...failFast,
        connectTimeout: 750,
        commandTimeout: 750,
        password: 'pw',
        enableAutoPipelining: false,
      },
    });
    expect(waits(options.clusterRetryStrategy as (times: number) => unknown)).toEqual([
      50, 100, 1_000, 1_000, 1_000,
    ]);
  });
});
