/**
 * The real xDS management server for the xDS tests: test/tools/xds-server (go-control-plane's ADS
 * server and snapshot cache, serving RateLimitConfig), built by `scripts/build-xds-server.sh` into
 * .cache/go-bin. Without Go the suites are skipped with a visible reason locally and fail under CI.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, waitFor, WaitAborted, type ProcessGroup } from './processes.js';
import { onPath, requireBinaries, type Requirement } from './require-binaries.js';

/** Go (needed to build the server), by {@link requireBinaries}. */
export function requireXdsServer(suite: string): Requirement {
  return requireBinaries(suite, [
    {
      name: 'go',
      missing: () => onPath('go') && 'Go not found (needed to build test/tools/xds-server)',
      install: 'Go 1.24+ (scripts/install-go.sh), then: bash scripts/build-xds-server.sh',
    },
  ]);
}

/** Build the server (a no-op when current) and return the binary's path; throws on failure. */
export function buildXdsServer(requirement: Requirement): string {
  if (requirement.reason !== undefined) {
    throw new Error(`${requirement.reason} (under CI a missing xDS server fails)`);
  }
  const result = spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'build-xds-server.sh')], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 600_000,
  });
  const binary = result.stdout.trim().split('\n').pop() ?? '';
  if (result.status !== 0 || binary === '') {
    throw new Error(
      `scripts/build-xds-server.sh failed (status ${String(result.status)}):\n${result.stdout}\n${result.stderr}`,
    );
  }
  return binary;
}

/** A RateLimitDescriptor as the server's JSON takes it. */
export interface XdsDescriptor {
  key: string;
  value?: string;
  rate_limit?: {
    // A RateLimitUnit name (SECOND ... YEAR, WEEK), or its number as text.
    unit?: string;
    requests_per_unit?: number;
    unlimited?: boolean;
    name?: string;
    replaces?: { name: string }[];
  };
  descriptors?: XdsDescriptor[];
  shadow_mode?: boolean;
  detailed_metric?: boolean;
  quota_mode?: boolean;
  metadata?: Record<string, unknown>;
}

/** A RateLimitConfig resource. */
export interface XdsRuleSet {
  name: string;
  domain: string;
  descriptors?: XdsDescriptor[];
}

/** One snapshot: a version and every resource. */
export interface XdsSnapshot {
  version: string;
  resources: XdsRuleSet[];
}

/** A DiscoveryRequest the server received. */
export interface SeenRequest {
  stream: number;
  node_id: string;
  node_metadata: Record<string, unknown> | null;
  user_agent_name: string;
  type_url: string;
  version_info: string;
  response_nonce: string;
  error_detail: { code: number; message: string } | null;
  headers: Record<string, string> | null;
}

/** A running server. */
export interface XdsServer {
  /** The ADS port on 127.0.0.1. */
  readonly grpcPort: number;
  /** Replace the snapshot of the node id the server was started with. */
  setSnapshot(snapshot: XdsSnapshot): Promise<void>;
  /** Every request received so far. */
  requests(): Promise<SeenRequest[]>;
  /** How many TLS handshakes the server refused or saw fail. */
  handshakeFailures(): Promise<number>;
  /** Its output. */
  output(): string;
  /** Stop the process. */
  stop(): Promise<void>;
}

/** Options of {@link startXdsServer}. */
export interface XdsServerOptions {
  /** The node id snapshots are set for. */
  readonly nodeId: string;
  /** The initial snapshot (none: the server answers nothing until one is set). */
  readonly snapshot?: XdsSnapshot;
  /** ADS port (default: any free one); fixed to restart a server on the same port. */
  readonly grpcPort?: number;
  /** TLS: server certificate and key, and a client CA to require client certificates. */
  readonly tls?: { cert: string; key: string; clientCa?: string };
  /** Where to write the snapshot file (a temp dir of the test). */
  readonly dir: string;
}

/** Start the server and wait until it prints its ports. */
export async function startXdsServer(
  group: ProcessGroup,
  binary: string,
  options: XdsServerOptions,
): Promise<XdsServer> {
  const args = ['-node-id', options.nodeId, '-grpc-addr', `127.0.0.1:${options.grpcPort ?? 0}`];
  if (options.snapshot !== undefined) {
    const file = path.join(options.dir, `xds-snapshot-${Date.now()}-${Math.random()}.json`);
    writeFileSync(file, JSON.stringify(options.snapshot));
    args.push('-snapshot', file);
  }
  if (options.tls !== undefined) {
    args.push('-tls-cert', options.tls.cert, '-tls-key', options.tls.key);
    if (options.tls.clientCa !== undefined) args.push('-client-ca', options.tls.clientCa);
  }
  // grpc-go logs failed TLS handshakes at warning level; tests wait for those lines.
  const proc = group.spawn('xds-server', binary, args, {
    env: {
      ...process.env,
      GRPC_GO_LOG_SEVERITY_LEVEL: 'warning',
      GRPC_GO_LOG_VERBOSITY_LEVEL: '2',
    },
  });
  let ports: { grpc_port: number; control_port: number } | undefined;
  await waitFor(
    'the xDS server to print its ports',
    () => {
      if (proc.hasExited()) throw new WaitAborted(`xds-server exited:\n${proc.output()}`);
      const line = /^\{"control_port":\d+,"grpc_port":\d+\}$/m.exec(proc.output());
      if (line !== null) ports = JSON.parse(line[0]) as typeof ports;
      return ports !== undefined;
    },
    { timeoutMs: 15_000, intervalMs: 20 },
  );
  const control = `http://127.0.0.1:${ports!.control_port}`;
  return {
    grpcPort: ports!.grpc_port,
    async setSnapshot(snapshot) {
      const response = await fetch(`${control}/snapshot`, {
        method: 'PUT',
        body: JSON.stringify(snapshot),
      });
      if (response.status !== 204) {
        throw new Error(`PUT /snapshot: ${response.status} ${await response.text()}`);
      }
    },
    async requests() {
      const response = await fetch(`${control}/requests`);
      return ((await response.json()) as SeenRequest[] | null) ?? [];
    },
    async handshakeFailures() {
      return Number(await (await fetch(`${control}/handshake-failures`)).text());
    },
    output: () => proc.output(),
    stop: () => proc.stop(),
  };
}
