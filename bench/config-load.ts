/**
 * Call latency while sluice loads a large rule set (issue 31, item 4; the figures are in
 * docs/operations.md, "Large rule sets"). `sluice serve` (dist/) starts on a small rule set; one
 * client calls ShouldRateLimit in a loop, one call at a time. After a quiet phase that sets the
 * baseline, a rule set of RULES rules in five files (or xDS resources) replaces it, and the loop
 * goes on until the new rules answer. It prints the worst and the 99th percentile latency of each
 * phase, and the time the load took. A measurement, not a test: nothing is asserted.
 *
 * Usage: `npm run bench:config-load [-- RULES [files|xds]]` (default 100000, `CONFIG_MAX_RULES`'s
 * default, from files). `xds` needs the test management server (`bash
 * scripts/build-xds-server.sh`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createEnvoyRlsClient, rlsRequest } from '../test/helpers/envoy-rls-client.js';
import { REPO_ROOT, SLUICE_MAIN } from './dist.js';
import { freePort, waitForPort } from './servers.js';

const RULES = Number(process.argv[2] ?? 100_000);
const SOURCE = process.argv[3] === 'xds' ? 'xds' : 'files';
const FILES = 5;
/** The quiet phase before the load, ms. */
const BASELINE_MS = 5_000;
/** Longest the load may take before the run gives up, ms. */
const LOAD_LIMIT_MS = 600_000;

const SMALL =
  'domain: small\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n';

/** One file (or resource) of the large set, as YAML. */
function ruleFile(domain: string, count: number): string {
  const lines = [`domain: ${domain}`, 'descriptors:'];
  for (let i = 0; i < count; i++) {
    lines.push(`  - {key: k${i}, value: v${i}, rate_limit: {unit: second, requests_per_unit: 5}}`);
  }
  return `${lines.join('\n')}\n`;
}

/** The same set as the test xDS server's snapshot JSON. */
function xdsSnapshot(version: string, count: number): string {
  const resources = Array.from({ length: FILES }, (_, f) => ({
    name: `set-${f}`,
    domain: `d${f}`,
    descriptors: Array.from({ length: count }, (_, i) => ({
      key: `k${i}`,
      value: `v${i}`,
      rate_limit: { unit: 'SECOND', requests_per_unit: 5 },
    })),
  }));
  return JSON.stringify({ version, resources });
}

function summary(latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? NaN;
  return `${sorted.length} calls, p99 ${p99.toFixed(1)} ms, worst ${(sorted.at(-1) ?? NaN).toFixed(1)} ms`;
}

/** The test xDS server on a small snapshot; returns its ports and the process. */
async function startXds(
  dir: string,
): Promise<{ grpc: number; control: number; child: ChildProcess }> {
  const binary = path.join(REPO_ROOT, '.cache', 'go-bin', 'xds-server');
  if (!existsSync(binary)) throw new Error(`${binary} missing: bash scripts/build-xds-server.sh`);
  const file = path.join(dir, 'small.json');
  writeFileSync(
    file,
    JSON.stringify({
      version: 'v0',
      resources: [{ name: 'small', domain: 'small', descriptors: [{ key: 'k' }] }],
    }),
  );
  const child = spawn(
    binary,
    ['-node-id', 'bench', '-grpc-addr', '127.0.0.1:0', '-snapshot', file],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const ports = await new Promise<{ grpc_port: number; control_port: number }>(
    (resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const line = /\{"control_port":\d+,"grpc_port":\d+\}/.exec(out);
        if (line !== null)
          resolve(JSON.parse(line[0]) as { grpc_port: number; control_port: number });
      });
      child.once('exit', () => reject(new Error(`xds-server exited:\n${out}`)));
    },
  );
  return { grpc: ports.grpc_port, control: ports.control_port, child };
}

async function main(): Promise<void> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-config-load-'));
  const rules = path.join(dir, 'rules');
  await fs.mkdir(rules);
  await fs.writeFile(path.join(rules, 'small.yaml'), SMALL);
  const xds = SOURCE === 'xds' ? await startXds(dir) : undefined;
  const env: Record<string, string> = {
    // The small set's one rule stays next to the large set.
    CONFIG_MAX_RULES: String(RULES + 1),
    CONFIG_MAX_RULES_PER_FILE: String(Math.max(Math.ceil(RULES / FILES), 1)),
    LOG_LEVEL: process.env['BENCH_LOG_LEVEL'] ?? 'warn',
  };
  if (xds !== undefined) {
    Object.assign(env, {
      CONFIG_TYPE: 'GRPC_XDS_SOTW',
      CONFIG_GRPC_XDS_SERVER_URL: `127.0.0.1:${xds.grpc}`,
      CONFIG_GRPC_XDS_NODE_ID: 'bench',
      // The control port's snapshot replaces the whole set, as a management server does.
      XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: String(64 * 1024 * 1024),
    });
  }
  // Started here rather than by startSluice, which names a rule directory (refused with xDS).
  const port = await freePort();
  const args = [SLUICE_MAIN, 'serve', ...(xds === undefined ? ['--config', rules] : [])];
  const child = spawn(process.execPath, args, {
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(port),
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      DEBUG_PORT: String(await freePort()),
      USE_STATSD: 'false',
      ...env,
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  await waitForPort('sluice', port, child);
  const server = { port, stop: () => void child.kill() };
  const client = createEnvoyRlsClient(`127.0.0.1:${server.port}`);
  try {
    const probe = rlsRequest('d0', [{ k0: 'v0' }]);
    const call = async (): Promise<{ ms: number; newRules: boolean }> => {
      const started = performance.now();
      const response = await client.shouldRateLimit(probe, 60_000);
      return {
        ms: performance.now() - started,
        newRules: response.statuses[0]?.current_limit != null,
      };
    };
    for (let i = 0; i < 200; i++) await call();

    const baseline: number[] = [];
    const baselineEnd = performance.now() + BASELINE_MS;
    while (performance.now() < baselineEnd) baseline.push((await call()).ms);

    const perFile = Math.ceil(RULES / FILES);
    const loadStart = performance.now();
    if (xds === undefined) {
      // Written under other names and renamed, so the watcher sees whole files.
      for (let f = 0; f < FILES; f++) {
        const tmp = path.join(rules, `.d${f}.tmp`);
        await fs.writeFile(tmp, ruleFile(`d${f}`, perFile));
        await fs.rename(tmp, path.join(rules, `d${f}.yaml`));
      }
    } else {
      const response = await fetch(`http://127.0.0.1:${xds.control}/snapshot`, {
        method: 'PUT',
        body: xdsSnapshot('v1', perFile),
      });
      if (response.status !== 204) throw new Error(`PUT /snapshot: ${response.status}`);
    }
    const during: number[] = [];
    for (;;) {
      const result = await call();
      during.push(result.ms);
      if (result.newRules) break;
      if (performance.now() - loadStart > LOAD_LIMIT_MS) throw new Error('the load never ended');
    }
    const loadMs = performance.now() - loadStart;
    const load = os.loadavg()[0]!.toFixed(1);
    console.log(
      `config load of ${RULES} rules from ${SOURCE} (${os.cpus().length} cores, load average ${load})`,
    );
    console.log(`  before the load: ${summary(baseline)}`);
    console.log(
      `  during the load (${Math.round(loadMs)} ms until the new rules answered): ${summary(during)}`,
    );
  } finally {
    client.close();
    server.stop();
    xds?.child.kill();
    await fs.rm(dir, { recursive: true, force: true });
  }
}

await main();
