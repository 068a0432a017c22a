/**
 * The container tier's tools: podman (root, as installed by `.ci/run`), the stand-in base images
 * (scripts/test-container-images.sh), the sluice image built from the project's Dockerfile, and a
 * health ticker that runs each container's HEALTHCHECK the way a Docker daemon or podman's systemd
 * timer would (this sandbox has no systemd, so podman schedules none by itself).
 *
 * A missing podman or debootstrap skips the tier with a visible reason locally and fails it under
 * CI (`inCi`).
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../helpers/processes.js';
import { requireBinaries, type Requirement } from '../helpers/require-binaries.js';

const execFileAsync = promisify(execFile);

/**
 * The test-only containers.conf: the ulimits this sandbox allows, plus runc as the runtime on a
 * host whose cgroups are hybrid or v1, where crun cannot create containers
 * (scripts/containers-conf.sh decides, and says what to install when runc is missing).
 */
function containersConf(): string {
  const given = process.env['CONTAINERS_CONF'];
  if (given !== undefined && given !== '') return given;
  try {
    return execFileSync('bash', [path.join(REPO_ROOT, 'scripts/containers-conf.sh')], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr ?? String(err);
    throw new Error(`scripts/containers-conf.sh failed: ${stderr.trim()}`, { cause: err });
  }
}

const CONTAINERS_CONF = containersConf();

/** The environment every podman / compose command of the tier runs with. */
export const PODMAN_ENV: NodeJS.ProcessEnv = { ...process.env, CONTAINERS_CONF };

/** Whether the tier runs, is skipped (locally), or must fail (under CI). */
export type ContainerRequirement = Requirement;

/** What the tier needs (podman, debootstrap, root), by {@link requireBinaries}. */
export function containerRequirement(label: string): ContainerRequirement {
  const install = 'apt-get install podman buildah debootstrap docker-compose';
  return requireBinaries(label, [
    { name: 'podman', install },
    { name: 'debootstrap', install },
    {
      name: 'root',
      missing: () =>
        process.getuid?.() === 0
          ? undefined
          : 'not root (debootstrap and root podman build the stand-in images)',
      install: 'run the container tier as root',
    },
  ]);
}

/** Throw the requirement's reason (under CI, where the tier must not be skipped). */
export function assertRequirement(requirement: ContainerRequirement): void {
  if (requirement.reason !== undefined)
    throw new Error(`${requirement.reason} (under CI a missing container engine fails)`);
}

/**
 * How much longer than usual the tier may take: `SLUICE_CONTAINER_TIME_SCALE` (default 1), for a
 * slow host such as an emulated virtual machine (docs/testing.md, "A pure cgroup v2 host"). Every
 * time bound of the tier (commands, polls, requests, the tests' own time-outs) is multiplied by
 * it; what the tests assert does not change.
 */
const TIME_SCALE = ((): number => {
  const raw = process.env['SLUICE_CONTAINER_TIME_SCALE'] ?? '';
  const value = Number(raw);
  if (raw === '') return 1;
  if (!Number.isFinite(value) || value < 1)
    throw new Error(`SLUICE_CONTAINER_TIME_SCALE=${raw}: give a number of at least 1`);
  return value;
})();

/** `ms` multiplied by {@link TIME_SCALE}. */
export function scaled(ms: number): number {
  return Math.round(ms * TIME_SCALE);
}

/** The result of one finished command. */
export interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Run a command to completion (bounded by `timeoutMs`), never throwing on a non-zero exit. */
export async function run(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<Run> {
  const timeoutMs = scaled(options.timeoutMs ?? 60_000);
  try {
    const { stdout, stderr } = await execFileAsync(command, args, {
      cwd: options.cwd ?? REPO_ROOT,
      env: options.env ?? PODMAN_ENV,
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
      killSignal: 'SIGKILL',
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: unknown; stdout?: string; stderr?: string; killed?: boolean };
    const code = typeof e.code === 'number' ? e.code : -1;
    const killed = e.killed === true ? ` (killed after ${timeoutMs} ms)` : '';
    return { code, stdout: e.stdout ?? '', stderr: `${e.stderr ?? ''}${killed}` };
  }
}

/** `podman ARGS`, bounded. */
export function podman(args: readonly string[], timeoutMs = 60_000): Promise<Run> {
  return run('podman', args, { timeoutMs });
}

/** `podman ARGS`, failing with its output when it exits non-zero; resolves to trimmed stdout. */
export async function podmanOk(args: readonly string[], timeoutMs = 60_000): Promise<string> {
  const result = await podman(args, timeoutMs);
  if (result.code !== 0)
    throw new Error(
      `podman ${args.join(' ')} exited ${result.code}:\n${result.stdout}${result.stderr}`,
    );
  return result.stdout.trim();
}

/** Build (or find current) the stand-in base images; resolves to the script's log. */
export async function ensureStandInImages(): Promise<string> {
  const result = await run('bash', ['scripts/test-container-images.sh'], { timeoutMs: 900_000 });
  if (result.code !== 0)
    throw new Error(`scripts/test-container-images.sh failed:\n${result.stdout}${result.stderr}`);
  return result.stderr;
}

/** The tag the tier builds the project's Dockerfile as. */
export const SLUICE_TEST_IMAGE = 'localhost/sluice-test/sluice:current';

/**
 * Build the project's Dockerfile unchanged (its default base, the stand-in `node:24-slim`) in the
 * docker image format, which keeps HEALTHCHECK (the OCI format drops it).
 */
export async function buildSluiceImage(tag = SLUICE_TEST_IMAGE): Promise<void> {
  await podmanOk(['build', '--format', 'docker', '--pull=never', '--tag', tag, REPO_ROOT], 900_000);
}

/** Poll `check` until it returns true or `timeoutMs` (scaled) passes; false on time-out. */
export async function waitFor(
  check: () => Promise<boolean>,
  timeoutMs: number,
  intervalMs = 500,
): Promise<boolean> {
  const deadline = Date.now() + scaled(timeoutMs);
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The host port podman published for `containerPort`/tcp of `container`. */
export async function hostPort(container: string, containerPort: number): Promise<number> {
  const out = await podmanOk(['port', container, `${containerPort}/tcp`]);
  const port = Number(out.split('\n')[0]?.split(':').at(-1));
  if (!Number.isInteger(port)) throw new Error(`podman port ${container} ${containerPort}: ${out}`);
  return port;
}

/** `podman healthcheck run`: the image's (or compose's) HEALTHCHECK command, run once now. */
export async function healthcheckRun(container: string): Promise<Run> {
  return podman(['healthcheck', 'run', container], 30_000);
}

/**
 * Runs `podman healthcheck run` every `intervalMs` on every running container whose name starts
 * with `prefix` and that has a health check: what podman's per-container systemd timers do on a
 * host with systemd (and a Docker daemon does itself), so compose's `condition: service_healthy`
 * and `docker ps` health work here. The checks run are the containers' own.
 */
export function startHealthTicker(
  prefix: string,
  intervalMs = scaled(2000),
): { stop(): Promise<void> } {
  let stopped = false;
  let current: Promise<unknown> = Promise.resolve();
  const tick = async (): Promise<void> => {
    const ps = await podman(
      ['ps', '--filter', `name=^${prefix}`, '--format', '{{.Names}} {{.Status}}'],
      20_000,
    );
    const names = ps.stdout
      .split('\n')
      .filter((line) => /\((starting|healthy|unhealthy)\)/.test(line))
      .map((line) => line.split(' ')[0] ?? '');
    await Promise.all(names.map((name) => healthcheckRun(name)));
  };
  const loop = async (): Promise<void> => {
    while (!stopped) {
      current = tick();
      await current.catch(() => undefined);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  };
  void loop();
  return {
    async stop() {
      stopped = true;
      await current.catch(() => undefined);
    },
  };
}

/**
 * `podman system service` on a private socket, for Docker-API clients (docker-compose).
 * Resolves once the socket answers; `stop()` ends the service (by its pid).
 */
export async function startPodmanService(
  socketPath: string,
): Promise<{ url: string; stop(): Promise<void>; child: ChildProcess }> {
  const url = `unix://${socketPath}`;
  const child = spawn('podman', ['system', 'service', '--time=0', url], {
    env: PODMAN_ENV,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-20_000)));
  const up = await waitFor(
    async () =>
      (
        await run('curl', ['-s', '--unix-socket', socketPath, 'http://d/_ping'], {
          timeoutMs: 5_000,
        })
      ).stdout === 'OK',
    30_000,
    200,
  );
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await exited;
    clearTimeout(timer);
  };
  if (!up) {
    await stop();
    throw new Error(`podman system service did not answer on ${url}:\n${stderr}`);
  }
  return { url, stop, child };
}
