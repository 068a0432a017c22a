/**
 * sluice in Envoy Gateway's place for the reference: Envoy Gateway v1.9.1 itself, in standalone
 * mode (file provider, host infrastructure), running the pinned Envoy 1.40; sluice started with
 * the environment Envoy Gateway's Kubernetes Deployment gives the reference (paths and ports mapped
 * to loopback), getting its rules from Envoy Gateway's xDS server. A BackendTrafficPolicy with a
 * global limit turns one client's requests from 200 into 429 while another's stay 200.
 *
 * What standalone mode needs beyond that environment (docs/envoy-gateway.md): certificates from
 * `envoy-gateway certgen --local`, the Envoy binary where func-e looks for it, and an
 * EnvoyPatchPolicy pointing Envoy's `ratelimit_cluster` at sluice (host mode starts no rate limit
 * service, and the cluster names a Kubernetes Service and the in-container CA path /certs/ca.crt).
 *
 * Envoy Gateway binds fixed ports (18000 and 18001 for xDS, 18002, 19000 admin, 8081 health):
 * the suite fails with a clear message when one is taken.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envoyBinary, requireEnvoy, startLoopbackUpstream } from '../helpers/envoy.js';
import {
  canConnect,
  ensureBuilt,
  freePort,
  REPO_ROOT,
  SLUICE_MAIN,
  useProcessGroup,
  waitFor,
  WaitAborted,
  type ManagedProcess,
} from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';
import { requireBinaries, type Requirement } from '../helpers/require-binaries.js';

/** The pinned Envoy Gateway (`.ci/run` installs it with `go install`). */
const EG_VERSION = 'v1.9.1';
const EG_BIN =
  process.env['ENVOY_GATEWAY_BIN'] ?? path.join(REPO_ROOT, '.cache', 'go-bin', 'envoy-gateway');
const EG_INSTALL = `GOBIN=$PWD/.cache/go-bin go install github.com/envoyproxy/gateway/cmd/envoy-gateway@${EG_VERSION}`;
/** Ports Envoy Gateway binds whatever its config says. */
const EG_FIXED_PORTS = [18000, 18001, 18002, 8081];

/** Why the pinned Envoy Gateway is missing, or `undefined` when it is there. */
function egMissing(): string | undefined {
  if (!existsSync(EG_BIN)) return `Envoy Gateway not found at ${EG_BIN}`;
  if (process.env['ENVOY_GATEWAY_BIN'] !== undefined) return undefined;
  // `go install` leaves `envoy-gateway version` empty; the module version is in the binary.
  const info = spawnSync('go', ['version', '-m', EG_BIN], { encoding: 'utf8', timeout: 30_000 });
  if (new RegExp(`\\smod\\s+github.com/envoyproxy/gateway\\s+${EG_VERSION}\\s`).test(info.stdout)) {
    return undefined;
  }
  return `${EG_BIN} is not Envoy Gateway ${EG_VERSION} (go version -m: ${info.stdout.split('\n').find((l) => l.includes('mod\t')) ?? info.stderr})`;
}

function egRequirement(): Requirement {
  return requireBinaries('envoy-gateway', [
    { name: 'envoy-gateway', missing: egMissing, install: EG_INSTALL },
  ]);
}

const eg = egRequirement();
const envoy = requireEnvoy('envoy-gateway');
const redisRequirement = requireRedis('envoy-gateway');

describe.skipIf(eg.skip || envoy.skip || redisRequirement.skip)(
  'Envoy Gateway standalone with sluice as its rate limit service',
  () => {
    const group = useProcessGroup();
    let root = '';
    let gatewayPort = 0;
    let sluice: ManagedProcess;
    let sluiceHttpPort = 0;

    beforeAll(async () => {
      if (eg.reason !== undefined)
        throw new Error(`${eg.reason} (under CI a missing Envoy Gateway fails)`);
      const envoyBin = envoyBinary(envoy);
      ensureBuilt();
      for (const port of EG_FIXED_PORTS) {
        if (await canConnect('127.0.0.1', port)) {
          throw new Error(
            `port ${port} is taken; Envoy Gateway standalone binds it (is another Envoy Gateway running?)`,
          );
        }
      }
      root = mkdtempSync(path.join(os.tmpdir(), 'sluice-eg-'));
      const home = {
        configHome: path.join(root, 'config'),
        dataHome: path.join(root, 'data'),
        stateHome: path.join(root, 'state'),
        runtimeDir: path.join(root, 'run'),
      };
      const resources = path.join(root, 'resources');
      mkdirSync(resources);
      // Envoy Gateway runs Envoy with func-e, which takes an installed version from
      // <dataHome>/envoy-versions/<version>/bin/envoy instead of downloading it.
      const envoyVersion = /\/(\d+\.\d+\.\d+)\//.exec(
        spawnSync(envoyBin, ['--version'], { encoding: 'utf8' }).stdout,
      )?.[1];
      expect(envoyVersion).toBeDefined();
      const versionDir = path.join(home.dataHome, 'envoy-versions', envoyVersion!, 'bin');
      mkdirSync(versionDir, { recursive: true });
      symlinkSync(envoyBin, path.join(versionDir, 'envoy'));
      // The control plane's certificates: its xDS servers refuse to start without them.
      const certgen = spawnSync(EG_BIN, ['certgen', '--local', '--config-home', home.configHome], {
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(certgen.status, certgen.stderr).toBe(0);
      const certs = path.join(home.configHome, 'certs');

      const redis = await startRedis(group);
      const upstream = await startLoopbackUpstream(group);
      gatewayPort = await freePort();
      const grpcPort = await freePort();
      sluiceHttpPort = await freePort();

      writeFileSync(
        path.join(root, 'envoy-gateway.yaml'),
        stringify({
          apiVersion: 'gateway.envoyproxy.io/v1alpha1',
          kind: 'EnvoyGateway',
          gateway: { controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' },
          provider: {
            type: 'Custom',
            custom: {
              resource: { type: 'File', file: { paths: [resources] } },
              infrastructure: { type: 'Host', host: home },
            },
          },
          logging: { level: { default: 'info' } },
          extensionApis: { enableBackend: true, enableEnvoyPatchPolicy: true },
          rateLimit: {
            backend: { type: 'Redis', redis: { url: `redis://${redis.address}` } },
            // Envoy's default (20 ms) is short for a busy test machine; and fail closed, so every
            // 200 below is sluice's decision, never Envoy failing open.
            timeout: '1s',
            failClosed: true,
          },
        }),
      );
      const docs = [
        {
          apiVersion: 'gateway.networking.k8s.io/v1',
          kind: 'GatewayClass',
          metadata: { name: 'eg' },
          spec: {
            controllerName: 'gateway.envoyproxy.io/gatewayclass-controller',
            parametersRef: {
              group: 'gateway.envoyproxy.io',
              kind: 'EnvoyProxy',
              name: 'host-proxy',
              namespace: 'default',
            },
          },
        },
        {
          apiVersion: 'gateway.envoyproxy.io/v1alpha1',
          kind: 'EnvoyProxy',
          metadata: { name: 'host-proxy', namespace: 'default' },
          spec: { provider: { type: 'Host', host: { envoyVersion } } },
        },
        {
          apiVersion: 'gateway.networking.k8s.io/v1',
          kind: 'Gateway',
          metadata: { name: 'eg', namespace: 'default' },
          spec: {
            gatewayClassName: 'eg',
            listeners: [{ name: 'http', protocol: 'HTTP', port: gatewayPort }],
          },
        },
        {
          apiVersion: 'gateway.networking.k8s.io/v1',
          kind: 'HTTPRoute',
          metadata: { name: 'backend', namespace: 'default' },
          spec: {
            parentRefs: [{ name: 'eg' }],
            rules: [
              {
                backendRefs: [{ group: 'gateway.envoyproxy.io', kind: 'Backend', name: 'backend' }],
              },
            ],
          },
        },
        {
          apiVersion: 'gateway.envoyproxy.io/v1alpha1',
          kind: 'Backend',
          metadata: { name: 'backend', namespace: 'default' },
          spec: { endpoints: [{ ip: { address: '127.0.0.1', port: upstream.port } }] },
        },
        {
          apiVersion: 'gateway.envoyproxy.io/v1alpha1',
          kind: 'BackendTrafficPolicy',
          metadata: { name: 'per-client', namespace: 'default' },
          spec: {
            targetRefs: [
              { group: 'gateway.networking.k8s.io', kind: 'HTTPRoute', name: 'backend' },
            ],
            rateLimit: {
              type: 'Global',
              global: {
                rules: [
                  {
                    clientSelectors: [{ headers: [{ name: 'x-client', type: 'Distinct' }] }],
                    limit: { requests: 3, unit: 'Hour' },
                  },
                ],
              },
            },
          },
        },
        {
          // Host mode starts no rate limit service; point Envoy's cluster at sluice, and at a CA
          // file that exists outside a container.
          apiVersion: 'gateway.envoyproxy.io/v1alpha1',
          kind: 'EnvoyPatchPolicy',
          metadata: { name: 'ratelimit-on-host', namespace: 'default' },
          spec: {
            targetRef: { group: 'gateway.networking.k8s.io', kind: 'Gateway', name: 'eg' },
            type: 'JSONPatch',
            jsonPatches: [
              {
                type: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
                name: 'ratelimit_cluster',
                operation: {
                  op: 'replace',
                  path: '/transport_socket/typed_config/common_tls_context/validation_context/trusted_ca/filename',
                  value: path.join(certs, 'envoy-rate-limit', 'ca.crt'),
                },
              },
              {
                type: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
                name: 'ratelimit_cluster',
                operation: {
                  op: 'replace',
                  path: '/load_assignment/endpoints/0/lb_endpoints/0/endpoint/address/socket_address',
                  value: { address: '127.0.0.1', port_value: grpcPort },
                },
              },
            ],
          },
        },
      ];
      writeFileSync(
        path.join(resources, 'gateway.yaml'),
        docs.map((doc) => stringify(doc)).join('---\n'),
      );

      const egProc = group.spawn('envoy-gateway', EG_BIN, [
        'server',
        '--config-path',
        path.join(root, 'envoy-gateway.yaml'),
      ]);

      // The Deployment's environment (Envoy Gateway v1.9.1), with /certs, /data, the Redis and
      // envoy-gateway:18001 mapped to this machine. In host mode the control plane's certificate
      // names envoy-gateway (not localhost), hence the SAN.
      const rl = path.join(certs, 'envoy-rate-limit');
      sluice = group.spawn('sluice', process.execPath, [SLUICE_MAIN, 'serve'], {
        env: {
          PATH: process.env['PATH'] ?? '',
          ...(process.env['GRPC_SERVER'] ? { GRPC_SERVER: process.env['GRPC_SERVER'] } : {}),
          REDIS_SOCKET_TYPE: 'tcp',
          REDIS_URL: redis.address,
          RUNTIME_ROOT: path.join(root, 'data-volume'),
          RUNTIME_SUBDIRECTORY: 'ratelimit',
          RUNTIME_IGNOREDOTFILES: 'true',
          RUNTIME_WATCH_ROOT: 'false',
          LOG_LEVEL: 'info',
          USE_STATSD: 'false',
          CONFIG_TYPE: 'GRPC_XDS_SOTW',
          CONFIG_GRPC_XDS_SERVER_URL: 'localhost:18001',
          CONFIG_GRPC_XDS_SERVER_TLS_SAN: 'envoy-gateway',
          CONFIG_GRPC_XDS_NODE_ID: 'envoy-ratelimit',
          GRPC_SERVER_USE_TLS: 'true',
          GRPC_SERVER_TLS_CERT: path.join(rl, 'tls.crt'),
          GRPC_SERVER_TLS_KEY: path.join(rl, 'tls.key'),
          GRPC_SERVER_TLS_CA_CERT: path.join(rl, 'ca.crt'),
          CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
          CONFIG_GRPC_XDS_CLIENT_TLS_CERT: path.join(rl, 'tls.crt'),
          CONFIG_GRPC_XDS_CLIENT_TLS_KEY: path.join(rl, 'tls.key'),
          CONFIG_GRPC_XDS_SERVER_TLS_CACERT: path.join(rl, 'ca.crt'),
          FORCE_START_WITHOUT_INITIAL_CONFIG: 'true',
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(grpcPort),
          HOST: '127.0.0.1',
          PORT: String(sluiceHttpPort),
          DEBUG_HOST: '127.0.0.1',
          DEBUG_PORT: String(await freePort()),
        },
      });
      const alive = (proc: ManagedProcess): void => {
        if (proc.hasExited()) throw new WaitAborted(`${proc.name} exited:\n${proc.output()}`);
      };
      const both = (): string => `envoy-gateway:\n${egProc.output()}\nsluice:\n${sluice.output()}`;
      // The readiness probe Envoy Gateway's Deployment uses.
      await waitFor(
        'sluice /healthcheck',
        async () => {
          alive(sluice);
          const response = await fetch(`http://127.0.0.1:${sluiceHttpPort}/healthcheck`).catch(
            () => null,
          );
          return response?.status === 200;
        },
        { timeoutMs: 30_000, intervalMs: 200, onTimeout: both },
      );
      await waitFor(
        "the Gateway's listener (Envoy started by Envoy Gateway)",
        () => {
          alive(egProc);
          return canConnect('127.0.0.1', gatewayPort);
        },
        { timeoutMs: 90_000, intervalMs: 250, onTimeout: both },
      );
      // Until the patched cluster and sluice's rules are in place, calls fail (500, fail closed);
      // a response with rate limit headers means sluice decided.
      let warm = 0;
      await waitFor(
        'a request decided by sluice (x-ratelimit-limit on the response)',
        async () => {
          alive(egProc);
          alive(sluice);
          const response = await fetch(`http://127.0.0.1:${gatewayPort}/`, {
            headers: { 'x-client': `warm-up-${warm++}` },
          }).catch(() => null);
          if (response === null) return false;
          await response.arrayBuffer();
          return response.headers.get('x-ratelimit-limit') !== null;
        },
        { timeoutMs: 90_000, intervalMs: 250, onTimeout: both },
      );
    }, 300_000);

    afterAll(async () => {
      await group.stopAll();
      if (root !== '') rmSync(root, { recursive: true, force: true });
    });

    it('turns one client from 200 into 429 and keeps another at 200', async () => {
      const send = async (client: string): Promise<string> => {
        const response = await fetch(`http://127.0.0.1:${gatewayPort}/`, {
          headers: { 'x-client': client },
        });
        await response.arrayBuffer();
        return `${response.status} remaining ${response.headers.get('x-ratelimit-remaining')}`;
      };
      const one = [];
      for (let i = 0; i < 5; i++) one.push(await send('one'));
      expect(one).toEqual([
        '200 remaining 2',
        '200 remaining 1',
        '200 remaining 0',
        '429 remaining 0',
        '429 remaining 0',
      ]);
      expect(await send('two')).toBe('200 remaining 2');
      // The rules came over xDS: sluice's log names Envoy Gateway's rule set.
      expect(sluice.output()).toContain('rate limit config loaded from xds source');
    });
  },
);
