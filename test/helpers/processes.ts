/**
 * Child-process and port helpers for the end-to-end tier: free ports, spawned processes that are
 * always killed (afterAll, and on worker exit as a last resort), bounded readiness waits, and a real
 * sluice started from `dist/main.js`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { afterAll } from 'vitest';

/** The repository root (where package.json lives). */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** The built CLI entry point that `npm run build` produces. */
export const SLUICE_MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

/** Output kept per process, for error messages (the tail is what matters). */
const MAX_OUTPUT_CHARS = 64 * 1024;

/**
 * The lowest port of the kernel's ephemeral range (`ip_local_port_range`, Linux's default 32768),
 * from which outgoing connections take their local ports.
 */
function ephemeralStart(): number {
  try {
    const first = Number(
      readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0],
    );
    return Number.isInteger(first) && first > 12_000 ? first : 32_768;
  } catch {
    return 32_768;
  }
}

/** Whether `port` can be listened on, on every address, now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

/** Ports this process has handed out: a child may not have bound one yet when the next is drawn. */
const handedOut = new Set<number>();

/**
 * A port that was free a moment ago, for a child process to listen on. It is drawn at random
 * below the ephemeral range: a port-0 listener's port comes from that range, where any outgoing
 * connection of a parallel test (a Redis client, an HTTP request) may take it as its local port
 * before the child binds it (seen as EADDRINUSE in CI). Each vitest worker draws from a slice of
 * its own (`VITEST_POOL_ID`), and never twice the same port, so two test files running at once
 * cannot both be handed a port before either child binds it (also seen: an Envoy listener).
 */
export async function freePort(): Promise<number> {
  const top = ephemeralStart() - 1;
  const bottom = Math.max(10_000, top - 12_000);
  const slices = 8;
  const width = Math.floor((top - bottom + 1) / slices);
  const pool = Number(process.env.VITEST_POOL_ID ?? '1');
  const first = bottom + ((Number.isInteger(pool) && pool > 0 ? pool - 1 : 0) % slices) * width;
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = first + Math.floor(Math.random() * width);
    if (handedOut.has(port)) continue;
    if (await bindable(port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port found in ${first}-${first + width - 1} after 50 tries`);
}

/** Thrown by a {@link waitFor} probe to stop waiting at once (e.g. the process died). */
export class WaitAborted extends Error {
  override readonly name = 'WaitAborted';
}

/** Poll `probe` until it returns true, at most `timeoutMs`; throws naming `what` on timeout. */
export async function waitFor(
  what: string,
  probe: () => Promise<boolean> | boolean,
  options: { timeoutMs: number; intervalMs?: number; onTimeout?: () => string },
): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (error) {
      if (error instanceof WaitAborted) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) break;
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 100));
  }
  const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
  const extra = options.onTimeout ? `\n${options.onTimeout()}` : '';
  throw new Error(`timed out after ${options.timeoutMs}ms waiting for ${what}${detail}${extra}`);
}

/** Whether a TCP connection to host:port succeeds within `timeoutMs`. */
export async function canConnect(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** A spawned child whose output is captured and which can be stopped. */
export interface ManagedProcess {
  /** What it is, for messages (e.g. `envoy`). */
  readonly name: string;
  readonly child: ChildProcess;
  /** stdout and stderr interleaved, the last {@link MAX_OUTPUT_CHARS} characters. */
  output(): string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  readonly exited: Promise<number | string>;
  /** Whether it has exited. */
  hasExited(): boolean;
  /** SIGTERM, then SIGKILL after `graceMs` (default 5000); resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
}

/** Processes still running in this worker; killed on worker exit if a test forgot to. */
const live = new Set<ManagedProcess>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const proc of live) proc.child.kill('SIGKILL');
  });
}

/** Spawn `command args` with captured output; stop it with {@link ManagedProcess.stop}. */
export function spawnManaged(
  name: string,
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): ManagedProcess {
  installExitHook();
  const child = spawn(command, [...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const append = (chunk: Buffer): void => {
    output += chunk.toString('utf8');
    if (output.length > MAX_OUTPUT_CHARS) output = output.slice(-MAX_OUTPUT_CHARS);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  let exited = false;
  const exitPromise = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      exited = true;
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (error) => {
      exited = true;
      append(Buffer.from(`spawn error: ${error.message}\n`));
      resolve('spawn-error');
    });
  });
  const proc: ManagedProcess = {
    name,
    child,
    output: () => output,
    exited: exitPromise,
    hasExited: () => exited,
    async stop(graceMs = 5_000) {
      if (!exited) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exitPromise;
        clearTimeout(timer);
      }
      live.delete(proc);
    },
  };
  live.add(proc);
  void exitPromise.then(() => live.delete(proc));
  return proc;
}

/** A set of processes owned by one describe block. */
export interface ProcessGroup {
  /** Spawn and register a process; see {@link spawnManaged}. */
  spawn(
    name: string,
    command: string,
    args: readonly string[],
    options?: { env?: NodeJS.ProcessEnv; cwd?: string },
  ): ManagedProcess;
  /** Register a cleanup step (e.g. closing a server), run in afterAll after the processes stop. */
  onCleanup(step: () => Promise<void> | void): void;
  /** Stop every process of the group and run the cleanups. Idempotent. */
  stopAll(): Promise<void>;
}

/**
 * Create a process group and register its `stopAll` with `afterAll`; call it in a describe body
 * so children are killed even when a test or hook fails.
 */
export function useProcessGroup(): ProcessGroup {
  const procs: ManagedProcess[] = [];
  const cleanups: (() => Promise<void> | void)[] = [];
  const group: ProcessGroup = {
    spawn(name, command, args, options) {
      const proc = spawnManaged(name, command, args, options);
      procs.push(proc);
      return proc;
    },
    onCleanup(step) {
      cleanups.push(step);
    },
    async stopAll() {
      await Promise.all(procs.splice(0).map((p) => p.stop()));
      for (const step of cleanups.splice(0).reverse()) await step();
    },
  };
  afterAll(() => group.stopAll());
  return group;
}

/**
 * Whether this run is CI, where a test that needs a missing binary (envoy, docker-compose,
 * redis-server) must fail instead of skipping: `CI` set to anything but empty, `0` or `false`
 * (CI services set `true` or `1`; `.ci/run` sets `true`).
 */
export function inCi(env: NodeJS.ProcessEnv = process.env): boolean {
  const value = (env['CI'] ?? '').trim().toLowerCase();
  return value !== '' && value !== '0' && value !== 'false';
}

/** Whether {@link ensureBuilt} already ran (built or found dist/ current) in this process. */
let buildChecked = false;

/** Held (a directory, created atomically) by the test process that is checking or building dist/. */
const BUILD_LOCK = path.join(REPO_ROOT, '.cache', 'ensure-built.lock');

/** The newest modification time (ms) of any file under `dir`, or `-Infinity` when there is none. */
function newestMtimeMs(dir: string): number {
  let newest = -Infinity;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtimeMs(full));
    else if (entry.isFile()) newest = Math.max(newest, statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * Why `dist/` must be rebuilt: `dist/main.js` is missing, or a file under `src/` or `proto/` is
 * newer than it (so `npm run test:e2e` right after editing `src/` never tests a stale build);
 * `undefined` when dist/ is current.
 */
function staleBuildReason(): string | undefined {
  if (!existsSync(SLUICE_MAIN)) return 'dist/main.js is missing';
  const builtMs = statSync(SLUICE_MAIN).mtimeMs;
  for (const dir of ['src', 'proto']) {
    if (newestMtimeMs(path.join(REPO_ROOT, dir)) > builtMs) {
      return `a file under ${dir}/ is newer than dist/main.js`;
    }
  }
  return undefined;
}

/**
 * Run `fn` while holding {@link BUILD_LOCK}, so test workers of one run (integration and e2e both
 * need dist/) never build at the same time, nor start sluice from a half-written dist/. Waits
 * (bounded) for another holder; a lock older than any build is left over from a killed run.
 */
function withBuildLock<T>(fn: () => T): T {
  mkdirSync(path.dirname(BUILD_LOCK), { recursive: true });
  const deadline = Date.now() + 240_000;
  for (;;) {
    try {
      mkdirSync(BUILD_LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const ageMs = Date.now() - (statSync(BUILD_LOCK, { throwIfNoEntry: false })?.mtimeMs ?? 0);
    if (ageMs > 300_000) {
      rmSync(BUILD_LOCK, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${BUILD_LOCK} (remove it if no test run is building)`);
    }
    // A synchronous sleep: the callers are synchronous beforeAll hooks.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
  }
  try {
    return fn();
  } finally {
    rmSync(BUILD_LOCK, { recursive: true, force: true });
  }
}

/**
 * Run `npm run build` when dist/ is stale (see {@link staleBuildReason}); `npm test` builds first,
 * so this only builds for `npm run test:e2e` or `test:integration` on a fresh checkout or after an
 * edit. Checks (and builds) at most once per process. Throws with the build output on failure.
 */
export function ensureBuilt(): void {
  if (buildChecked) return;
  withBuildLock(() => {
    const reason = staleBuildReason();
    if (reason === undefined) return;
    const result = spawnSync('npm', ['run', '--silent', 'build'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 180_000,
    });
    if (result.status !== 0 || !existsSync(SLUICE_MAIN)) {
      throw new Error(
        `npm run build (${reason}) failed (status ${String(result.status)}):\n${result.stdout}\n${result.stderr}`,
      );
    }
  });
  buildChecked = true;
}

/** Ask `grpc.health.v1.Health/Check` (overall service, name '') for the serving status. */
export async function grpcHealthStatus(address: string, timeoutMs = 1_000): Promise<string> {
  const Client = grpc.makeGenericClientConstructor(healthService, 'Health');
  // The generic client's methods are added at run time from the service definition.
  const client = new Client(
    address,
    grpc.credentials.createInsecure(),
  ) as unknown as grpc.Client & {
    Check(
      request: { service: string },
      options: grpc.CallOptions,
      callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
    ): void;
  };
  try {
    return await new Promise<string>((resolve, reject) => {
      client.Check({ service: '' }, { deadline: Date.now() + timeoutMs }, (error, response) => {
        if (error) reject(error);
        else resolve(response?.status ?? 'UNKNOWN');
      });
    });
  } finally {
    client.close();
  }
}

/**
 * `GRPC_SERVER` of the test project, when it sets one (vitest.config.ts runs the transport suites
 * once per server), for the environment of an app or process under test; else nothing.
 */
export function serverUnderTest(): Record<string, string> {
  return process.env.GRPC_SERVER ? { GRPC_SERVER: process.env.GRPC_SERVER } : {};
}

/** A sluice child process serving gRPC on 127.0.0.1:`grpcPort`. */
export interface SluiceProcess {
  readonly proc: ManagedProcess;
  readonly grpcPort: number;
}

/**
 * Start `node dist/main.js serve [--config <configDir>]` with GRPC_HOST=127.0.0.1 and the given
 * port, and wait (bounded) until its gRPC health check answers SERVING. Without `configDir` the
 * rules come from the environment (`RUNTIME_*`), as the reference is started.
 */
export async function startSluice(
  group: ProcessGroup,
  options: {
    configDir?: string;
    grpcPort: number;
    env?: Record<string, string>;
    /** More `serve` flags, after `--config`. */
    args?: readonly string[];
    timeoutMs?: number;
  },
): Promise<SluiceProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: String(options.grpcPort),
    LOG_LEVEL: process.env['LOG_LEVEL'] ?? 'warn',
    // The HTTP and debug listeners (PORT 8080, DEBUG_PORT 6070 by default) get free ports too, so a
    // sluice or demo already running on this machine never clashes with the test's.
    PORT: String(await freePort()),
    DEBUG_PORT: String(await freePort()),
    ...options.env,
  };
  const proc = group.spawn(
    'sluice',
    process.execPath,
    [
      SLUICE_MAIN,
      'serve',
      ...(options.configDir === undefined ? [] : ['--config', options.configDir]),
      ...(options.args ?? []),
    ],
    { env },
  );
  const address = `127.0.0.1:${options.grpcPort}`;
  await waitFor(
    `sluice gRPC health SERVING on ${address}`,
    async () => {
      if (proc.hasExited()) {
        throw new WaitAborted(
          `sluice exited early (${String(await proc.exited)}):\n${proc.output()}`,
        );
      }
      if (!(await canConnect('127.0.0.1', options.grpcPort))) return false;
      return (await grpcHealthStatus(address)) === 'SERVING';
    },
    {
      timeoutMs: options.timeoutMs ?? 15_000,
      intervalMs: 100,
      onTimeout: () => `sluice output:\n${proc.output()}`,
    },
  );
  return { proc, grpcPort: options.grpcPort };
}
