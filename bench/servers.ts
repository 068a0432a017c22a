/**
 * The servers the h2load rows load, each in its own process(es): sluice with either gRPC server
 * (`node dist/main.js serve`), the no-op grpc-js handler (bench/noop-server.ts), and
 * envoyproxy/ratelimit itself on a redis-server started for it. Each reports the pids whose CPU
 * counts as the server's (the reference: its process plus its Redis).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONSOLE_POLLING, startConsolePoller } from './console-poller.js';
import { REPO_ROOT, SLUICE_MAIN } from './dist.js';
import { RULES_YAML } from './workloads.js';

/** A running server under test. */
export interface BenchServer {
  /** Short name for the table (`sluice lean`, `reference`...). */
  readonly name: string;
  /** Its gRPC port on 127.0.0.1. */
  readonly port: number;
  /** Processes whose CPU is the server's (with its Redis, for a server on Redis). */
  readonly pids: readonly number[];
  /** The server's own processes, without its Redis; `undefined`: all of {@link pids}. */
  readonly processPids?: readonly number[];
  stop(): Promise<void>;
}

/**
 * The reference binary, set by {@link referenceUnavailable}: scripts/reference.sh's choice (the
 * master build from a source snapshot when one is there, `SLUICE_SHARED_REFERENCE`; else the
 * pinned `go install`).
 */
let referenceBin: string | undefined;

/** How long a server may take to start, ms. */
const START_MS = 60_000;
const NOOP_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'noop-server.js');

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** A port that was free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address !== null
          ? resolve(address.port)
          : reject(new Error('no port')),
      );
    });
  });
}

let clockTicksPerSecond: number | undefined;

/** CPU time (user + system, all threads) of `pid` in ms, from /proc; NaN where unreadable. */
export function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name start at field 3; utime and stime are 14, 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    clockTicksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicksPerSecond;
  } catch {
    return NaN;
  }
}

/** Summed CPU ms of `pids`. */
export function cpuMs(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) total += processCpuMs(pid);
  return total;
}

function track(name: string, child: ChildProcess): { stop(): Promise<void>; stderr(): string } {
  running.add(child);
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4096);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      running.delete(child);
      if (child.exitCode !== null && child.exitCode !== 0 && stderr !== '') {
        process.stderr.write(`${name} exited with ${child.exitCode}:\n${stderr}\n`);
      }
    },
  };
}

/** Resolve once something accepts TCP connections on `port`, or fail after `ms` (START_MS). */
export async function waitForPort(
  name: string,
  port: number,
  child: ChildProcess,
  ms = START_MS,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${name} did not listen on ${port} within ${ms} ms`);
}

/**
 * The pids of `pid` and every process below it, from /proc (a sluice started with `WORKERS` > 1
 * serves from worker processes forked by the first).
 */
function processTree(pid: number): number[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const task of readdirSync(`/proc/${out[i]}/task`)) {
        const children = readFileSync(`/proc/${out[i]}/task/${task}/children`, 'utf8').trim();
        if (children !== '') out.push(...children.split(/\s+/).map(Number));
      }
    } catch {
      // Gone, or no /proc: its CPU reads as NaN anyway.
    }
  }
  return out;
}

/** sluice (`node dist/main.js serve`) with `GRPC_SERVER=kind` and the bench rules. */
export async function startSluice(
  kind: 'lean' | 'grpc-js',
  rulesDir: string,
  options: { name?: string; env?: Record<string, string>; redisPids?: readonly number[] } = {},
): Promise<BenchServer> {
  const port = await freePort();
  const debugPort = await freePort();
  const child = spawn(process.execPath, [SLUICE_MAIN, 'serve', '--config', rulesDir], {
    // A minimal environment, so settings in the caller's shell do not change the measurement.
    env: {
      PATH: process.env.PATH ?? '',
      GRPC_SERVER: kind,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(port),
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      DEBUG_PORT: String(debugPort),
      // No statsd sink (on by default), as the reference below runs without one.
      USE_STATSD: 'false',
      ...options.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const name = options.name ?? `sluice ${kind}`;
  const handle = track(name, child);
  await waitForPort(name, port, child);
  // Workers (if any) are forked before the port listens; read the tree once they all run.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const pids = processTree(child.pid!);
  const stopConsole = CONSOLE_POLLING ? startConsolePoller(debugPort) : () => {};
  return {
    name,
    port,
    pids: [...pids, ...(options.redisPids ?? [])],
    processPids: pids,
    stop: () => {
      stopConsole();
      return handle.stop();
    },
  };
}

/** A redis-server of its own for a server under test (no persistence). */
export async function startRedisServer(
  args: readonly string[] = [],
): Promise<{ port: number; pid: number; dir: string; stop(): Promise<void> }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-redis-'));
  const port = await freePort();
  const redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const handle = track('redis-server', redis);
  const stop = async (): Promise<void> => {
    await handle.stop();
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort('redis-server', port, redis);
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, pid: redis.pid!, dir, stop };
}

/** A 3-master Redis Cluster on loopback (`redis-cli --cluster create`). */
export async function startRedisCluster(): Promise<{
  url: string;
  pids: number[];
  stop(): Promise<void>;
}> {
  const nodes: Awaited<ReturnType<typeof startRedisServer>>[] = [];
  for (let k = 0; k < 3; k++) {
    nodes.push(
      await startRedisServer([
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        'nodes.conf',
        '--cluster-node-timeout',
        '2000',
      ]),
    );
  }
  const stop = async (): Promise<void> => void (await Promise.all(nodes.map((n) => n.stop())));
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  const create = spawnSync(
    'redis-cli',
    ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'],
    { encoding: 'utf8', timeout: 30_000 },
  );
  if (create.status !== 0) {
    await stop();
    throw new Error(`redis-cli --cluster create failed:\n${create.stdout}\n${create.stderr}`);
  }
  const deadline = Date.now() + 30_000;
  for (const address of addresses) {
    const [host, port] = address.split(':');
    for (;;) {
      const info = spawnSync('redis-cli', ['-h', host!, '-p', port!, 'cluster', 'info'], {
        encoding: 'utf8',
      }).stdout;
      if (info.includes('cluster_state:ok')) break;
      if (Date.now() > deadline) {
        await stop();
        throw new Error(`cluster node ${address} not ok within 30 s`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { url: addresses.join(','), pids: nodes.map((n) => n.pid), stop };
}

/** The no-op grpc-js handler answering `fixed` (descriptor count -> wire response). */
export async function startNoop(fixed: Record<string, unknown>): Promise<BenchServer> {
  const child = spawn(process.execPath, [NOOP_SERVER, JSON.stringify(fixed)], {
    env: { PATH: process.env.PATH ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const handle = track('no-op server', child);
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('no-op server did not start')), START_MS);
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening (\d+)/.exec(out);
      if (match !== null) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`no-op server exited with ${code}`));
    });
  });
  return { name: 'no-op grpc-js', port, pids: [child.pid!], stop: () => handle.stop() };
}

/**
 * Why the reference cannot run here, or `undefined` when it can (building or installing it if
 * needed with scripts/reference.sh, which prints which reference, by commit, on stderr).
 */
export function referenceUnavailable(): string | undefined {
  if (spawnSync('redis-server', ['--version']).status !== 0) return 'skipped: no redis-server';
  if (referenceBin !== undefined) return undefined;
  if (spawnSync('go', ['version']).status !== 0) return 'skipped: no Go';
  const found = spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'reference.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    timeout: 900_000,
  });
  const bin = found.stdout?.split('\n')[0];
  if (found.status !== 0 || bin === undefined || !existsSync(bin)) {
    return 'skipped: the reference could not be built or installed';
  }
  referenceBin = bin;
  return undefined;
}

/**
 * envoyproxy/ratelimit with the bench rules (the same YAML) on a fresh redis-server (no
 * persistence), as its README runs it: BACKEND_TYPE=redis, rules under RUNTIME_ROOT.
 */
export async function startReference(
  cluster?: { url: string; pids: readonly number[] },
  name = 'reference',
): Promise<BenchServer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-ref-'));
  await fs.mkdir(path.join(dir, 'runtime', 'ratelimit', 'config'), { recursive: true });
  await fs.writeFile(path.join(dir, 'runtime', 'ratelimit', 'config', 'bench.yaml'), RULES_YAML);

  const redis = cluster === undefined ? await startRedisServer() : undefined;

  const port = await freePort();
  if (referenceBin === undefined) throw new Error('call referenceUnavailable() first');
  const ref = spawn(referenceBin, [], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: cluster?.url ?? `127.0.0.1:${redis!.port}`,
      ...(cluster === undefined ? {} : { REDIS_TYPE: 'cluster' }),
      USE_STATSD: 'false',
      LOG_LEVEL: 'warn',
      RUNTIME_ROOT: path.join(dir, 'runtime'),
      RUNTIME_SUBDIRECTORY: 'ratelimit',
      RUNTIME_WATCH_ROOT: 'false',
      HOST: '127.0.0.1',
      PORT: String(await freePort()),
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: String(port),
      DEBUG_HOST: '127.0.0.1',
      DEBUG_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const refHandle = track('envoyproxy/ratelimit', ref);
  const stop = async (): Promise<void> => {
    await refHandle.stop();
    await redis?.stop();
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort('envoyproxy/ratelimit', port, ref);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    name,
    port,
    pids: [ref.pid!, ...(cluster?.pids ?? [redis!.pid])],
    processPids: [ref.pid!],
    stop,
  };
}
