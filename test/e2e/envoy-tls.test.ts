/**
 * End to end over mTLS: a real Envoy (the pinned binary) calls sluice's gRPC port through the
 * `UpstreamTlsContext` docs/operations-tls.md shows, presenting a client certificate, while sluice
 * requires one from its CA with a SAN (GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN). A second
 * Envoy whose certificate lacks the SAN is refused by sluice and fails open (envoy.yaml's
 * `failure_mode_deny: false`) without anything being counted. Certificates come from openssl;
 * sluice runs in-process with the server GRPC_SERVER names.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApp, type RunningApp } from '../helpers/app.js';
import {
  createCa,
  issueCert,
  requireOpenssl,
  type TestCa,
  type TestCert,
} from '../helpers/certs.js';
import {
  DEMO_RULES_DIR,
  envoyBinary,
  envoyStats,
  loadShippedEnvoyConfig,
  requireEnvoy,
  rewriteForLoopback,
  startEnvoyOnLoopback,
  startLoopbackUpstream,
  type EnvoyConfig,
  type EnvoyProcess,
  type LoopbackPorts,
  type LoopbackUpstream,
} from '../helpers/envoy.js';
import { useProcessGroup } from '../helpers/processes.js';

const envoy = requireEnvoy('e2e: Envoy to sluice over mTLS');
const openssl = requireOpenssl('e2e: Envoy to sluice over mTLS');
const SERVER = process.env['GRPC_SERVER'] === 'grpc-js' ? 'grpc-js' : 'lean';

/** The name sluice's certificate carries and Envoy checks. */
const SLUICE_NAME = 'ratelimit.sluice.test';
/** The SAN sluice requires of its clients. */
const ENVOY_NAME = 'envoy.sluice.test';

const STAT_OK = 'cluster.upstream.ratelimit.ok';
const STAT_OVER_LIMIT = 'cluster.upstream.ratelimit.over_limit';
const STAT_ERROR = 'cluster.upstream.ratelimit.error';
const STAT_FAILURE_MODE_ALLOWED = 'cluster.upstream.ratelimit.failure_mode_allowed';

/**
 * The shipped envoy.yaml on loopback, its `sluice` cluster speaking TLS (ALPN h2, SNI, sluice's
 * certificate checked against the CA and its SAN) and presenting `client`.
 */
function envoyConfig(ports: LoopbackPorts, ca: TestCa, client: TestCert): EnvoyConfig {
  const config = rewriteForLoopback(loadShippedEnvoyConfig(), ports);
  const cluster = (config['static_resources'].clusters as EnvoyConfig[]).find(
    (c) => c['name'] === 'sluice',
  );
  if (cluster === undefined) throw new Error('envoy.yaml: no sluice cluster');
  cluster['transport_socket'] = {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      sni: SLUICE_NAME,
      common_tls_context: {
        alpn_protocols: ['h2'],
        tls_certificates: [
          {
            certificate_chain: { filename: client.cert },
            private_key: { filename: client.key },
          },
        ],
        validation_context: {
          trusted_ca: { filename: ca.cert },
          match_typed_subject_alt_names: [{ san_type: 'DNS', matcher: { exact: SLUICE_NAME } }],
        },
      },
    },
  };
  return config;
}

/** GET `path` through Envoy with an `x-api-key` (the demo's /api rule: 4 a minute per key). */
async function getApi(baseUrl: string, key: string): Promise<number> {
  const response = await fetch(new URL('/api/orders', baseUrl), {
    headers: { 'x-api-key': key },
    signal: AbortSignal.timeout(5_000),
  });
  await response.arrayBuffer();
  return response.status;
}

describe.skipIf(envoy.skip || openssl.skip)(
  `Envoy calls sluice over mTLS (GRPC_SERVER=${SERVER})`,
  () => {
    const group = useProcessGroup();
    let dir: string;
    let running: RunningApp;
    let upstream: LoopbackUpstream;
    let trusted: EnvoyProcess;
    let intruder: EnvoyProcess;

    beforeAll(async () => {
      const binary = envoyBinary(envoy);
      if (openssl.reason !== undefined) {
        throw new Error(`${openssl.reason} (required under CI)`);
      }
      dir = mkdtempSync(path.join(tmpdir(), 'sluice-envoy-tls-'));
      const ca = createCa(dir, 'mesh');
      const server = issueCert(ca, dir, 'sluice', {
        sans: [`DNS:${SLUICE_NAME}`, 'IP:127.0.0.1'],
        usage: 'serverAuth',
      });
      const envoyCert = issueCert(ca, dir, 'envoy', {
        sans: [`DNS:${ENVOY_NAME}`],
        usage: 'clientAuth',
      });
      const intruderCert = issueCert(ca, dir, 'intruder', {
        sans: ['DNS:intruder.sluice.test'],
        usage: 'clientAuth',
      });
      running = await startApp([DEMO_RULES_DIR], {
        GRPC_SERVER_USE_TLS: 'true',
        GRPC_SERVER_TLS_CERT: server.cert,
        GRPC_SERVER_TLS_KEY: server.key,
        GRPC_CLIENT_TLS_CACERT: ca.cert,
        GRPC_CLIENT_TLS_SAN: ENVOY_NAME,
      });
      upstream = await startLoopbackUpstream(group);
      const start = (client: TestCert): Promise<EnvoyProcess> =>
        startEnvoyOnLoopback(group, {
          binary,
          sluicePort: running.port,
          upstreamPort: upstream.port,
          config: (ports) => envoyConfig(ports, ca, client),
        });
      trusted = await start(envoyCert);
      intruder = await start(intruderCert);
    }, 60_000);
    afterAll(async () => {
      await running?.stop();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    it('an Envoy whose certificate lacks the SAN is refused, fails open, and counts nothing', async () => {
      for (let i = 0; i < 3; i++) {
        expect(await getApi(intruder.baseUrl, 'key-shared')).toBe(200);
      }
      const stats = await envoyStats(intruder.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
      expect(stats.get(STAT_ERROR)).toBe(3);
      expect(stats.get(STAT_FAILURE_MODE_ALLOWED)).toBe(3);
      expect(stats.get(STAT_OK) ?? 0).toBe(0);
    });

    it('the Envoy with the right certificate is rate limited by sluice over mTLS', async () => {
      // The refused calls above counted nothing: the key still has its whole allowance of 4.
      const statuses: number[] = [];
      for (let i = 0; i < 5; i++) statuses.push(await getApi(trusted.baseUrl, 'key-shared'));
      expect(statuses).toEqual([200, 200, 200, 200, 429]);
      const stats = await envoyStats(trusted.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
      expect(stats.get(STAT_OK)).toBe(4);
      expect(stats.get(STAT_OVER_LIMIT)).toBe(1);
      expect(stats.get(STAT_ERROR) ?? 0).toBe(0);
    });
  },
);
