/**
 * The servers the h2load rows load, each in its own process(es): sluice with either gRPC server
 * (`node dist/main.js serve`), the no-op grpc-js handler (bench/noop-server.ts), and
 * envoyproxy/ratelimit itself on a redis-server started for it. Each reports the pids whose CPU
 * counts as the server's (the reference: its process plus its Redis).
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
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
  /** Processes whose CPU is the server's. */
  readonly pids: readonly number[];
  stop(): Promise<void>;
}

/**
 * The reference binary, set by {@link referenceUnavailable}: scripts/reference.sh's choice (the
 * master build from ../shared/reference when that folder exists, else the pinned `go install`).
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

/** sluice (`node dist/main.js serve`) with `GRPC_SERVER=kind` and the bench rules. */
export async function startSluice(
  kind: 'lean' | 'grpc-js',
  rulesDir: string,
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
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const handle = track(`sluice (${kind})`, child);
  await waitForPort(`sluice (${kind})`, port, child);
  const stopConsole = CONSOLE_POLLING ? startConsolePoller(debugPort) : () => {};
  return {
    name: `sluice ${kind}`,
    port,
    pids: [child.pid!],
    stop: () => {
      stopConsole();
      return handle.stop();
    },
  };
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
export async function startReference(): Promise<BenchServer> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-ref-'));
  await fs.mkdir(path.join(dir, 'runtime', 'ratelimit', 'config'), { recursive: true });
  await fs.writeFile(path.join(dir, 'runtime', 'ratelimit', 'config', 'bench.yaml'), RULES_YAML);

  const redisPort = await freePort();
  const redis = spawn(
    'redis-server',
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  const redisHandle = track('redis-server', redis);
  try {
    await waitForPort('redis-server', redisPort, redis);
  } catch (err) {
    await redisHandle.stop();
    throw err;
  }

  const port = await freePort();
  if (referenceBin === undefined) throw new Error('call referenceUnavailable() first');
  const ref = spawn(referenceBin, [], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      BACKEND_TYPE: 'redis',
      REDIS_SOCKET_TYPE: 'tcp',
      REDIS_URL: `127.0.0.1:${redisPort}`,
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
    await redisHandle.stop();
    await fs.rm(dir, { recursive: true, force: true });
  };
  try {
    await waitForPort('envoyproxy/ratelimit', port, ref);
  } catch (err) {
    await stop();
    throw err;
  }
  return { name: 'reference', port, pids: [ref.pid!, redis.pid!], stop };
}
