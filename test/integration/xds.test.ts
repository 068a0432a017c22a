/**
 * Rules over xDS (CONFIG_TYPE=GRPC_XDS_SOTW) against a real management server: test/tools/xds-server,
 * go-control-plane v0.14.0's ADS server and snapshot cache serving RateLimitConfig resources (the
 * reference's own integration tests and Envoy Gateway serve them the same way).
 *
 * Every scenario runs against sluice (`node dist/main.js serve`) and, when its binary is here,
 * against the reference (envoyproxy/ratelimit's service_cmd), both started with the same
 * environment and counting in a real redis-server, and the answers are compared: the same calls
 * get the same codes, limits and remaining counts (sluice with DEFAULT_ALGORITHM=fixed_window,
 * the reference's window). Where the two differ on purpose (NACK text), the test says so.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCa, issueCert, requireOpenssl } from '../helpers/certs.js';
import {
  createEnvoyRlsClient,
  rlsRequest,
  type EnvoyResponse,
} from '../helpers/envoy-rls-client.js';
import {
  canConnect,
  ensureBuilt,
  freePort,
  inCi,
  REPO_ROOT,
  SLUICE_MAIN,
  useProcessGroup,
  waitFor,
  WaitAborted,
  type ManagedProcess,
  type ProcessGroup,
} from '../helpers/processes.js';
import { requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';
import {
  buildXdsServer,
  requireXdsServer,
  startXdsServer,
  type XdsServer,
  type XdsSnapshot,
} from '../helpers/xds-server.js';

const xdsRequirement = requireXdsServer('xds');
const redisRequirement = requireRedis('xds');
const opensslRequirement = requireOpenssl('xds');

/**
 * The reference binary: SLUICE_REFERENCE_BIN, else the master build in .cache/reference, else the
 * pinned one `.ci/run` installs into .cache/go-bin.
 */
const REFERENCE_BIN = [
  process.env['SLUICE_REFERENCE_BIN'],
  path.join(REPO_ROOT, '.cache', 'reference', 'service_cmd'),
  path.join(REPO_ROOT, '.cache', 'go-bin', 'service_cmd'),
].find((candidate) => candidate !== undefined && existsSync(candidate));
if (REFERENCE_BIN === undefined) {
  console.warn(
    '[xds] the reference part is SKIPPED: no service_cmd in .cache/reference or .cache/go-bin (see .ci/run)',
  );
}
const referenceSkip = REFERENCE_BIN === undefined && !inCi();

type Kind = 'sluice' | 'reference';

/** A started implementation. */
interface Impl {
  readonly proc: ManagedProcess;
  readonly grpcPort: number;
  readonly httpPort: number;
  call(domain: string, entries: Record<string, string>): Promise<EnvoyResponse>;
  stop(): Promise<void>;
}

/** What the comparisons look at: code, limit and remaining of the one status. */
function brief(response: EnvoyResponse): string {
  const status = response.statuses[0]!;
  const limit = status.current_limit;
  return `${status.code} ${limit === null ? '-' : `${limit.requests_per_unit}/${limit.unit}`} remaining ${status.limit_remaining}`;
}

const scenarios = (kind: Kind) => {
  const group: ProcessGroup = useProcessGroup();
  let xdsBin = '';
  let redis: RedisServer;
  let dir = '';
  const clients: ReturnType<typeof createEnvoyRlsClient>[] = [];

  beforeAll(async () => {
    ensureBuilt();
    xdsBin = buildXdsServer(xdsRequirement);
    redis = await startRedis(group);
    dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-xds-'));
  }, 600_000);
  afterAll(() => {
    for (const client of clients) client.close();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });

  /** Start the implementation under test with the xDS environment plus `env`. */
  async function startImpl(xdsPort: number, env: Record<string, string>): Promise<Impl> {
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const common: Record<string, string> = {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xdsPort}`,
      CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL: '200ms',
      XDS_CLIENT_BACKOFF_INITIAL_INTERVAL: '300ms',
      XDS_CLIENT_BACKOFF_MAX_INTERVAL: '1s',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: redis.address,
      BACKEND_TYPE: 'redis',
      // Both count in one redis-server; distinct prefixes keep their counters apart.
      CACHE_KEY_PREFIX: `${kind}-${grpcPort}:`,
      DEFAULT_ALGORITHM: 'fixed_window',
      USE_STATSD: 'false',
      LOG_LEVEL: 'debug',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(grpcPort),
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(await freePort()),
      ...env,
    };
    const proc =
      kind === 'sluice'
        ? group.spawn('sluice', process.execPath, [SLUICE_MAIN, 'serve'], {
            env: { PATH: process.env['PATH'] ?? '', ...pickGrpcServer(), ...common },
          })
        : group.spawn('reference', REFERENCE_BIN!, [], {
            env: { PATH: process.env['PATH'] ?? '', ...common },
          });
    const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
    clients.push(client);
    return {
      proc,
      grpcPort,
      httpPort,
      call: (domain, entries) => client.shouldRateLimit(rlsRequest(domain, [entries])),
      stop: () => proc.stop(),
    };
  }

  async function waitListening(impl: Impl): Promise<void> {
    await waitFor(
      `${kind} gRPC port`,
      () => {
        if (impl.proc.hasExited()) throw new WaitAborted(`${kind} exited:\n${impl.proc.output()}`);
        return canConnect('127.0.0.1', impl.grpcPort);
      },
      { timeoutMs: 20_000, intervalMs: 50, onTimeout: () => impl.proc.output() },
    );
  }

  /** Call until the answer's limit is `limit` (rules arrive asynchronously). */
  async function waitForLimit(
    impl: Impl,
    domain: string,
    entries: Record<string, string>,
    limit: string,
  ): Promise<void> {
    await waitFor(
      `${kind} to serve ${domain} ${JSON.stringify(entries)} with ${limit}`,
      async () => {
        // Each probe charges `entries`: callers use a value no other assertion counts on.
        const real = await impl.call(domain, entries).catch(() => null);
        const current = real?.statuses[0]?.current_limit;
        return current != null && `${current.requests_per_unit}/${current.unit}` === limit;
      },
      { timeoutMs: 20_000, intervalMs: 100, onTimeout: () => impl.proc.output() },
    );
  }

  async function newServer(
    name: string,
    snapshot: XdsSnapshot | undefined,
    extra: { grpcPort?: number; tls?: { cert: string; key: string; clientCa?: string } } = {},
  ): Promise<XdsServer> {
    return startXdsServer(group, xdsBin, { nodeId: name, snapshot, dir, ...extra });
  }

  const edge = (limit: number, version: string): XdsSnapshot => ({
    version,
    resources: [
      {
        name: 'edge-rules',
        domain: 'edge',
        descriptors: [{ key: 'client', rate_limit: { unit: 'HOUR', requests_per_unit: limit } }],
      },
    ],
  });

  it('rules arrive and limit; the ACK carries version and nonce; node, metadata and headers reach the server', async () => {
    const server = await newServer('node-a', edge(2, '1'));
    const impl = await startImpl(server.grpcPort, {
      CONFIG_GRPC_XDS_NODE_ID: 'node-a',
      CONFIG_GRPC_XDS_NODE_METADATA: 'zone=z1,team=payments',
      CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: 'x-token:abc',
    });
    await waitListening(impl);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(brief(await impl.call('edge', { client: 'alice' })));
    answers.push(brief(await impl.call('edge', { client: 'bob' })));
    expect(answers).toEqual([
      'OK 2/HOUR remaining 1',
      'OK 2/HOUR remaining 0',
      'OVER_LIMIT 2/HOUR remaining 0',
      'OK 2/HOUR remaining 1',
    ]);
    const requests = await server.requests();
    const ack = requests.find((r) => r.version_info === '1');
    expect(ack).toMatchObject({
      node_id: 'node-a',
      node_metadata: { zone: 'z1', team: 'payments' },
      type_url: 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig',
      error_detail: null,
    });
    expect(ack!.response_nonce).not.toBe('');
    expect(ack!.headers?.['x-token']).toBe('abc');
    await impl.stop();
    await server.stop();
  });

  it('an update changes the limits without a restart; an invalid one is NACKed with its problems and the old rules keep serving', async () => {
    const server = await newServer('node-b', edge(2, '1'));
    const impl = await startImpl(server.grpcPort, { CONFIG_GRPC_XDS_NODE_ID: 'node-b' });
    await waitListening(impl);
    expect(brief(await impl.call('edge', { client: 'carol' }))).toBe('OK 2/HOUR remaining 1');

    await server.setSnapshot(edge(5, '2'));
    await waitForLimit(impl, 'edge', { client: 'dave' }, '5/HOUR');
    expect(brief(await impl.call('edge', { client: 'erin' }))).toBe('OK 5/HOUR remaining 4');
    expect(impl.proc.hasExited()).toBe(false);

    // Two resources, one problem each: an empty key and a unit of UNKNOWN.
    await server.setSnapshot({
      version: '3',
      resources: [
        {
          name: 'bad-key',
          domain: 'edge',
          descriptors: [{ key: '', rate_limit: { unit: 'HOUR', requests_per_unit: 1 } }],
        },
        {
          name: 'bad-unit',
          domain: 'other',
          descriptors: [{ key: 'k', rate_limit: { unit: 'UNKNOWN', requests_per_unit: 1 } }],
        },
      ],
    });
    let nack: Awaited<ReturnType<XdsServer['requests']>>[number] | undefined;
    await waitFor(
      'a NACK',
      async () => {
        nack = (await server.requests()).find((r) => r.error_detail !== null);
        return nack !== undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, onTimeout: () => impl.proc.output() },
    );
    // A NACK names the last version accepted and the nonce of the response it refuses.
    expect(nack!.version_info).toBe('2');
    expect(nack!.response_nonce).not.toBe('');
    const message = nack!.error_detail!.message;
    if (kind === 'sluice') {
      // Every problem, each with the resource and where in it.
      expect(message).toContain('bad-key: descriptors[0].key: descriptor has empty key');
      expect(message).toContain(
        "bad-unit: descriptors[0].rate_limit.unit: invalid rate limit unit 'UNKNOWN'",
      );
    } else {
      // The reference names its first problem only.
      expect(message).toMatch(/descriptor has empty key|invalid rate limit unit 'UNKNOWN'/);
    }
    expect(brief(await impl.call('edge', { client: 'erin' }))).toBe('OK 5/HOUR remaining 3');
    await impl.stop();
    await server.stop();
  });

  it('keeps serving while the server is away and takes its rules when it is back', async () => {
    const first = await newServer('node-c', edge(2, '1'));
    const port = first.grpcPort;
    const impl = await startImpl(port, { CONFIG_GRPC_XDS_NODE_ID: 'node-c' });
    await waitListening(impl);
    expect(brief(await impl.call('edge', { client: 'fay' }))).toBe('OK 2/HOUR remaining 1');
    await first.stop();
    expect(brief(await impl.call('edge', { client: 'fay' }))).toBe('OK 2/HOUR remaining 0');
    const back = await newServer('node-c', edge(7, 'after-restart'), { grpcPort: port });
    await waitForLimit(impl, 'edge', { client: 'gus' }, '7/HOUR');
    expect(brief(await impl.call('edge', { client: 'hal' }))).toBe('OK 7/HOUR remaining 6');
    expect((await back.requests()).some((r) => r.version_info === 'after-restart')).toBe(true);
    await impl.stop();
    await back.stop();
  });

  it('refuses a response larger than XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES and keeps asking', async () => {
    const big: XdsSnapshot = {
      version: '1',
      resources: [
        {
          name: 'big',
          domain: 'edge',
          descriptors: Array.from({ length: 40 }, (_, i) => ({
            key: `key-number-${i}`,
            rate_limit: { unit: 'HOUR', requests_per_unit: 1 },
          })),
        },
      ],
    };
    const server = await newServer('node-size', big);
    const impl = await startImpl(server.grpcPort, {
      CONFIG_GRPC_XDS_NODE_ID: 'node-size',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: '256',
    });
    await waitListening(impl);
    // A new stream per attempt: its first request arrives each time, never an ACK of version 1.
    await waitFor(
      'three subscriptions',
      async () => new Set((await server.requests()).map((r) => r.stream)).size >= 3,
      { timeoutMs: 20_000, intervalMs: 100, onTimeout: () => impl.proc.output() },
    );
    expect((await server.requests()).some((r) => r.version_info === '1')).toBe(false);
    await expect(impl.call('edge', { 'key-number-1': 'x' })).rejects.toMatchObject({
      code: 2,
      details: 'no rate limit configuration loaded',
    });
    await impl.stop();
    await server.stop();
  });

  describe.skipIf(opensslRequirement.skip)('mTLS to the server', () => {
    let certs: {
      ca: string;
      serverCert: string;
      serverKey: string;
      clientCert: string;
      clientKey: string;
    };
    beforeAll(() => {
      const ca = createCa(dir, `xds-${kind}`);
      const server = issueCert(ca, dir, `xds-server-${kind}`, {
        sans: ['DNS:xds.test'],
        usage: 'serverAuth',
      });
      const client = issueCert(ca, dir, `xds-client-${kind}`, {
        sans: ['DNS:ratelimit.test'],
        usage: 'clientAuth',
      });
      certs = {
        ca: ca.cert,
        serverCert: server.cert,
        serverKey: server.key,
        clientCert: client.cert,
        clientKey: client.key,
      };
    });
    const tlsEnv = (san: string, withClientCert: boolean): Record<string, string> => ({
      CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
      CONFIG_GRPC_XDS_SERVER_TLS_CACERT: certs.ca,
      CONFIG_GRPC_XDS_SERVER_TLS_SAN: san,
      ...(withClientCert
        ? {
            CONFIG_GRPC_XDS_CLIENT_TLS_CERT: certs.clientCert,
            CONFIG_GRPC_XDS_CLIENT_TLS_KEY: certs.clientKey,
          }
        : {}),
    });

    it('gets rules over mTLS with the server SAN checked', async () => {
      const server = await newServer('node-tls', edge(3, '1'), {
        tls: { cert: certs.serverCert, key: certs.serverKey, clientCa: certs.ca },
      });
      const impl = await startImpl(server.grpcPort, {
        CONFIG_GRPC_XDS_NODE_ID: 'node-tls',
        ...tlsEnv('xds.test', true),
      });
      await waitListening(impl);
      expect(brief(await impl.call('edge', { client: 'ivy' }))).toBe('OK 3/HOUR remaining 2');
      await impl.stop();
      await server.stop();
    });

    it.each([
      ['a server certificate without the SAN asked for', 'other.test', true],
      ['no client certificate', 'xds.test', false],
    ])('gets no rules with %s', async (_what, san, withClientCert) => {
      const server = await newServer('node-tls-bad', edge(3, '1'), {
        tls: { cert: certs.serverCert, key: certs.serverKey, clientCa: certs.ca },
      });
      const impl = await startImpl(server.grpcPort, {
        CONFIG_GRPC_XDS_NODE_ID: 'node-tls-bad',
        FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
        ...tlsEnv(san, withClientCert),
      });
      await waitListening(impl);
      // Two refused handshakes: the client tried, failed and tried again.
      await waitFor(
        'two failed TLS handshakes on the server',
        async () => (await server.handshakeFailures()) >= 2,
        {
          timeoutMs: 20_000,
          intervalMs: 100,
          onTimeout: () => `${server.output()}\n${impl.proc.output()}`,
        },
      );
      expect(await server.requests()).toEqual([]);
      await expect(impl.call('edge', { client: 'jo' })).rejects.toMatchObject({
        code: 2,
        details: 'no rate limit configuration loaded',
      });
      await impl.stop();
      await server.stop();
    });
  });

  it('without FORCE_START_WITHOUT_INITIAL_CONFIG, no port opens before the first rule set', async () => {
    const server = await newServer('node-d', undefined);
    const impl = await startImpl(server.grpcPort, { CONFIG_GRPC_XDS_NODE_ID: 'node-d' });
    await waitFor('the client to subscribe', async () => (await server.requests()).length > 0, {
      timeoutMs: 20_000,
      intervalMs: 50,
      onTimeout: () => impl.proc.output(),
    });
    expect(await canConnect('127.0.0.1', impl.grpcPort)).toBe(false);
    expect(await canConnect('127.0.0.1', impl.httpPort)).toBe(false);
    await server.setSnapshot(edge(4, '1'));
    await waitListening(impl);
    expect(brief(await impl.call('edge', { client: 'kim' }))).toBe('OK 4/HOUR remaining 3');
    await impl.stop();
    await server.stop();
  });

  it('with FORCE_START_WITHOUT_INITIAL_CONFIG, serves at once: calls fail and health is OK until rules arrive', async () => {
    const server = await newServer('node-e', undefined);
    const impl = await startImpl(server.grpcPort, {
      CONFIG_GRPC_XDS_NODE_ID: 'node-e',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
    });
    await waitListening(impl);
    await expect(impl.call('edge', { client: 'lee' })).rejects.toMatchObject({
      code: 2,
      details: 'no rate limit configuration loaded',
    });
    expect((await healthcheck(impl)).status).toBe(200);
    const json = await fetch(`http://127.0.0.1:${impl.httpPort}/json`, {
      method: 'POST',
      body: JSON.stringify({
        domain: 'edge',
        descriptors: [{ entries: [{ key: 'client', value: 'lee' }] }],
      }),
    });
    // A deliberate difference (docs/compatibility.md): the reference answers 400 here.
    expect(json.status).toBe(kind === 'sluice' ? 503 : 400);
    await server.setSnapshot(edge(4, '1'));
    await waitForLimit(impl, 'edge', { client: 'lee' }, '4/HOUR');
    await impl.stop();
    await server.stop();
  });

  it('with HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED too, /healthcheck fails until a rule set with a domain arrives', async () => {
    const server = await newServer('node-f', undefined);
    const impl = await startImpl(server.grpcPort, {
      CONFIG_GRPC_XDS_NODE_ID: 'node-f',
      FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
      HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED: 'true',
    });
    await waitFor('the HTTP port', () => canConnect('127.0.0.1', impl.httpPort), {
      timeoutMs: 20_000,
      intervalMs: 50,
      onTimeout: () => impl.proc.output(),
    });
    expect((await healthcheck(impl)).status).toBe(500);
    await server.setSnapshot(edge(4, '1'));
    await waitFor('/healthcheck 200', async () => (await healthcheck(impl)).status === 200, {
      timeoutMs: 20_000,
      intervalMs: 100,
      onTimeout: () => impl.proc.output(),
    });
    // An empty rule set (no resources) has no domain: unhealthy again.
    await server.setSnapshot({ version: '2', resources: [] });
    await waitFor('/healthcheck 500', async () => (await healthcheck(impl)).status === 500, {
      timeoutMs: 20_000,
      intervalMs: 100,
      onTimeout: () => impl.proc.output(),
    });
    await impl.stop();
    await server.stop();
  });
};

async function healthcheck(impl: Impl): Promise<Response> {
  return fetch(`http://127.0.0.1:${impl.httpPort}/healthcheck`);
}

/** The gRPC server under test (vitest.config.ts sets GRPC_SERVER per project). */
function pickGrpcServer(): Record<string, string> {
  const server = process.env['GRPC_SERVER'];
  return server === undefined ? {} : { GRPC_SERVER: server };
}

describe.skipIf(xdsRequirement.skip || redisRequirement.skip)('rules over xDS', () => {
  describe('sluice', () => scenarios('sluice'));
  describe.skipIf(referenceSkip)('the reference, same scenarios', () => scenarios('reference'));
});

describe('CONFIG_TYPE', () => {
  it('an unknown value stops `sluice serve` with one clear message and exit code 1', () => {
    ensureBuilt();
    const result = spawnSync(process.execPath, [SLUICE_MAIN, 'serve'], {
      env: { PATH: process.env['PATH'] ?? '', CONFIG_TYPE: 'GRPC_XDS_DELTA', GRPC_PORT: '0' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      'sluice: invalid settings:\n  - CONFIG_TYPE="GRPC_XDS_DELTA": expected FILE (rules from files, the default) or GRPC_XDS_SOTW (rules from an xDS management server)\n',
    );
  });
});
