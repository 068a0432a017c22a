/**
 * The docker-compose demo, run for real: `docker-compose` (Debian's, v1) against podman's Docker
 * API (`podman system service`), on the stand-in envoy, redis and node images. The compose files
 * run unchanged from a copy of the checkout (so editing a rule file there cannot touch the repo).
 *
 * docker-compose.yml: up --build, every health check passing, then the README's "Demo with Envoy"
 * console block run from the host command by command and compared with the output it shows; a
 * rule edited on the host changes the limit (the bind mount and hot reload); sluice stopped, Envoy
 * fails open; down. docker-compose.redis.yml on top: two replicas on one Redis give exactly five
 * 200s, and `podman stop` of one replica while calls come in fails none of them open.
 */
import {
  cpSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  chmodSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT, ensureBuilt } from '../helpers/processes.js';
import {
  PODMAN_ENV,
  assertRequirement,
  containerRequirement,
  ensureStandInImages,
  podman,
  run,
  scaled,
  startHealthTicker,
  startPodmanService,
  waitFor,
  type Run,
} from './podman.js';

const requirement = containerRequirement('container: compose');

/** The host ports docker-compose.yml publishes. */
const PUBLISHED = [10000, 9901, 8080, 8081];

/** What a fresh clone holds that the compose files and the README's commands use. */
const CHECKOUT = [
  'Dockerfile',
  '.dockerignore',
  'docker-compose.yml',
  'docker-compose.redis.yml',
  'package.json',
  'package-lock.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'proto',
  'src',
  'console',
  'envoy',
];

/** One `$ command` of a README console block and the output shown under it. */
interface Step {
  readonly command: string;
  readonly expected: string[];
}

/** The first ```console block after `heading` in README.md, as commands and their output. */
export function readmeConsoleBlock(readme: string, heading: string): Step[] {
  const from = readme.indexOf(heading);
  if (from < 0) throw new Error(`README.md has no "${heading}"`);
  const open = readme.indexOf('```console\n', from);
  const close = readme.indexOf('\n```', open + 1);
  const lines = readme.slice(open + '```console\n'.length, close).split('\n');
  const steps: { command: string; expected: string[] }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    if (line.startsWith('$ ')) {
      let command = line.slice(2);
      while (command.endsWith('\\') && i + 1 < lines.length)
        command = `${command.slice(0, -1)}${lines[++i]}`;
      steps.push({ command, expected: [] });
    } else {
      steps.at(-1)?.expected.push(line);
    }
  }
  return steps;
}

/** Output lines with the parts that differ from run to run (how long until a reset) replaced. */
function normalize(lines: readonly string[]): string[] {
  return lines.map((line) =>
    line
      .replace(/^(x-ratelimit-reset: )(\d+)$/, (_, p: string, n: string) => {
        // A one-minute sliding window: 60 s plus up to one sub-bucket (3 s), in whole seconds.
        expect(Number(n), line).toBeGreaterThanOrEqual(55);
        expect(Number(n), line).toBeLessThanOrEqual(63);
        return `${p}<seconds>`;
      })
      .replace(/reset in \d+(\.\d+)?s/, 'reset in <seconds>'),
  );
}

async function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '0.0.0.0', () => server.close(() => resolve(true)));
  });
}

/** `bash -c COMMAND` in the checkout copy, as a user types it. */
function sh(dir: string, command: string, timeoutMs = 60_000): Promise<Run> {
  return run('bash', ['-c', command], { cwd: dir, env: process.env, timeoutMs });
}

/** The status codes of `n` requests to the demo listener. */
async function statuses(n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const res = await fetch('http://127.0.0.1:10000/', {
      signal: AbortSignal.timeout(scaled(5_000)),
    });
    await res.arrayBuffer();
    out.push(res.status);
  }
  return out;
}

/** One Envoy admin counter (0 when absent). */
async function envoyStat(name: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:9901/stats?filter=^${name.replace(/\./g, '\\.')}$`);
  const match = /: (\d+)/.exec(await res.text());
  return Number(match?.[1] ?? 0);
}

describe.skipIf(requirement.skip)(
  requirement.skip
    ? `the compose demo (SKIPPED: ${requirement.reason})`
    : 'the compose demo, run for real',
  () => {
    let dir = '';
    let service: Awaited<ReturnType<typeof startPodmanService>> | undefined;
    let ticker: { stop(): Promise<void> } | undefined;
    const project = `sluicect${process.pid}`;
    const composeEnv = (): NodeJS.ProcessEnv => ({
      ...PODMAN_ENV,
      DOCKER_HOST: service?.url ?? '',
      // Build through podman's API, as README.md's podman lines do: by default docker-compose
      // 1.29 builds by running a `docker` command, which a podman-only host does not have.
      COMPOSE_DOCKER_CLI_BUILD: '0',
      COMPOSE_PROJECT_NAME: project,
    });
    const compose = async (
      files: string[],
      args: string[],
      timeoutMs = 120_000,
    ): Promise<string> => {
      const result = await run('docker-compose', [...files.flatMap((f) => ['-f', f]), ...args], {
        cwd: dir,
        env: composeEnv(),
        timeoutMs,
      });
      if (result.code !== 0)
        throw new Error(
          `docker-compose ${args.join(' ')} exited ${result.code}:\n${result.stdout}${result.stderr}`,
        );
      return `${result.stdout}${result.stderr}`;
    };
    /** Each running container of the project and its health. */
    const health = async (): Promise<Record<string, string>> => {
      const ps = await podman([
        'ps',
        '--filter',
        `name=^${project}_`,
        '--format',
        '{{.Names}}|{{.Status}}',
      ]);
      return Object.fromEntries(
        ps.stdout
          .trim()
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => {
            const [name = '', status = ''] = l.split('|');
            return [name.slice(project.length + 1), /\((\w+)\)/.exec(status)?.[1] ?? 'none'];
          }),
      );
    };

    beforeAll(async () => {
      assertRequirement(requirement);
      ensureBuilt();
      const busy: number[] = [];
      for (const port of PUBLISHED) if (!(await portFree(port))) busy.push(port);
      if (busy.length > 0)
        throw new Error(
          `docker-compose.yml publishes ${busy.join(', ')}, in use on this host: stop what listens there`,
        );
      console.log(await ensureStandInImages());
      dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-compose-'));
      chmodSync(dir, 0o755);
      for (const entry of CHECKOUT)
        cpSync(path.join(REPO_ROOT, entry), path.join(dir, entry), { recursive: true });
      // `npx sluice` in the README runs the clone's build: this checkout's.
      symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
      symlinkSync(path.join(REPO_ROOT, 'dist'), path.join(dir, 'dist'));
      service = await startPodmanService(path.join(dir, 'podman.sock'));
      ticker = startHealthTicker(`${project}_`);
    }, scaled(1_800_000));

    afterAll(async () => {
      if (service !== undefined) {
        for (const files of [
          ['docker-compose.yml', 'docker-compose.redis.yml'],
          ['docker-compose.yml'],
        ])
          await run(
            'docker-compose',
            [...files.flatMap((f) => ['-f', f]), 'down', '--timeout', '5'],
            {
              cwd: dir,
              env: composeEnv(),
              timeoutMs: 120_000,
            },
          );
      }
      await ticker?.stop();
      await service?.stop();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    }, scaled(300_000));

    it("docker-compose.yml: up --build, healthy, the README's demo as written, hot reload, fail-open, down", async () => {
      const files = ['docker-compose.yml'];
      // Detached, else as the README says. No service waits on a health condition (podman
      // without systemd runs no checks); the README's first step waits for sluice and Envoy.
      await compose(files, ['up', '--detach', '--build'], 1_200_000);

      // The README's console block, command by command, from the host, right after `up`: its
      // first step is the only wait (what a podman user without health checks has too).
      const steps = readmeConsoleBlock(
        readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8'),
        '## Demo with Envoy',
      );
      expect(steps.map((s) => s.command)).toEqual([
        expect.stringMatching(/^until curl -sf .*localhost:8080\/healthcheck.*; done$/),
        expect.stringMatching(/^for i in \$\(seq 1 8\); do curl .* localhost:10000\/; done$/),
        'curl -si localhost:10000/ | grep -i ratelimit',
        expect.stringMatching(/^npx sluice query /),
        'curl -s localhost:8080/healthcheck; echo',
        expect.stringMatching(/^curl -s localhost:8080\/metrics \| grep /),
      ]);
      const captured: string[] = [];
      for (const step of steps) {
        const result = await sh(dir, step.command, 180_000);
        // curl -i prints header lines with CRLF; a terminal shows them as the README does.
        const out = result.stdout.replace(/\r/g, '').replace(/\n$/, '');
        const lines = out === '' ? [] : out.split('\n');
        captured.push(`$ ${step.command}`, ...lines);
        expect(normalize(lines), `output of \`${step.command}\`\n${result.stderr}`).toEqual(
          normalize(step.expected),
        );
      }
      // Every container's own health check passes (run by the ticker, as systemd timers would).
      expect(
        await waitFor(
          async () => Object.values(await health()).every((h) => h === 'healthy'),
          60_000,
        ),
        `all healthy: ${JSON.stringify(await health())}`,
      ).toBe(true);
      expect(Object.keys(await health()).sort()).toEqual(['envoy_1', 'sluice_1', 'upstream_1']);
      console.log(`[compose demo] captured:\n${captured.join('\n')}`);

      // A rule edited on the host: the bind mount shows it to sluice, which reloads it.
      const rules = path.join(dir, 'envoy/ratelimit/edge.yaml');
      const text = readFileSync(rules, 'utf8');
      const edited = text.replace(
        /(key: generic_key\n\s+value: default\n\s+rate_limit:\n\s+unit: minute\n\s+requests_per_unit: )5\n/,
        '$150\n',
      );
      expect(edited).not.toBe(text);
      writeFileSync(rules, edited);
      const reloaded = await waitFor(async () => {
        const res = await fetch('http://127.0.0.1:10000/', {
          signal: AbortSignal.timeout(scaled(5_000)),
        });
        await res.arrayBuffer();
        return res.status === 200 && res.headers.get('x-ratelimit-limit') === '50, 50;w=60';
      }, 30_000);
      expect(reloaded, 'the edited limit (50/minute) answers within 30 s').toBe(true);

      // sluice stopped: Envoy fails open and counts it.
      await compose(files, ['stop', 'sluice']);
      const allowedBefore = await envoyStat('cluster.upstream.ratelimit.failure_mode_allowed');
      expect(await statuses(8)).toEqual(Array(8).fill(200));
      expect(await envoyStat('cluster.upstream.ratelimit.failure_mode_allowed')).toBe(
        allowedBefore + 8,
      );

      await compose(files, ['down', '--timeout', '5']);
      expect(await health()).toEqual({});
    });

    it('docker-compose.redis.yml on top: two replicas on one Redis, exactly five 200s, and stopping one replica fails no call open', async () => {
      const files = ['docker-compose.yml', 'docker-compose.redis.yml'];
      // The rule file the previous test edited, back to the shipped one.
      cpSync(path.join(REPO_ROOT, 'envoy/ratelimit'), path.join(dir, 'envoy/ratelimit'), {
        recursive: true,
      });
      await compose(files, ['up', '--detach', '--build'], 1_200_000);
      expect(
        await waitFor(
          async () => Object.values(await health()).every((h) => h === 'healthy'),
          60_000,
        ),
        `all healthy: ${JSON.stringify(await health())}`,
      ).toBe(true);
      expect(Object.keys(await health()).sort()).toEqual([
        'envoy_1',
        'redis_1',
        'sluice-2_1',
        'sluice_1',
        'upstream_1',
      ]);

      // The README's curl loop, as written.
      const loop = await sh(
        dir,
        "for i in $(seq 1 8); do curl -s -o /dev/null -w '%{http_code}\\n' localhost:10000/; done",
      );
      // A 200 among the 429s is Envoy failing open (its rate limit call past envoy.yaml's 0.5 s
      // timeout, as on a slow host): say so in the failure.
      const failedOpen = await envoyStat('cluster.upstream.ratelimit.failure_mode_allowed');
      expect(loop.stdout.trim().split('\n'), `Envoy failed open ${failedOpen} times`).toEqual([
        '200',
        '200',
        '200',
        '200',
        '200',
        '429',
        '429',
        '429',
      ]);
      // Both replicas answer calls (Envoy spreads them), counting in one Redis. Eight calls can
      // all land on one replica (Envoy's DNS view of the two may lag, or its round robin start
      // on one): more calls (429s from the shared count, unless the minute has passed) until both
      // have answered, at most 40, bounded in time too.
      const answered = async (replica: string): Promise<boolean> => {
        const metrics = await podman([
          'exec',
          `${project}_${replica}`,
          'node',
          '-e',
          "fetch('http://127.0.0.1:8080/metrics').then(r=>r.text()).then(t=>process.stdout.write(t))",
        ]);
        return /^ratelimit_service_total_requests\{grpc_method="ShouldRateLimit"\} [1-9]/m.test(
          metrics.stdout,
        );
      };
      let extra = 0;
      const both = await waitFor(async () => {
        if ((await answered('sluice_1')) && (await answered('sluice-2_1'))) return true;
        if (extra >= 40) return false;
        extra += 5;
        await sh(dir, 'for i in $(seq 1 5); do curl -s -o /dev/null localhost:10000/; done');
        return false;
      }, 60_000);
      expect(both, `both replicas answered calls (after ${extra} more)`).toBe(true);

      // One replica stopped while calls keep coming: on SIGTERM it fails its gRPC health at once
      // and keeps answering for SHUTDOWN_DELAY_MS, Envoy's health check (envoy.yaml) moves the
      // calls to the other replica, which answers from the same Redis counts. No call fails open.
      const errorsBefore = await envoyStat('cluster.upstream.ratelimit.error');
      const allowedBefore = await envoyStat('cluster.upstream.ratelimit.failure_mode_allowed');
      const stop = podman(['stop', '--time', '10', `${project}_sluice-2_1`]);
      let stopped = false;
      void stop.finally(() => {
        stopped = true;
      });
      const during: number[] = [];
      // Bounded: the stop takes SHUTDOWN_DELAY_MS plus the drain, well under 200 rounds.
      for (let round = 0; round < 200 && !stopped; round++) during.push(...(await statuses(2)));
      expect((await stop).code).toBe(0);
      // And after it: the stopped replica's name no longer resolves.
      const after = await statuses(8);
      console.log(
        `[compose demo] one replica stopped: ${during.length} call(s) during the stop, ${after.length} after`,
      );
      expect(during.length, 'calls sent while the replica stopped').toBeGreaterThan(0);
      expect([...during, ...after].filter((s) => s !== 429)).toEqual([]);
      expect(await envoyStat('cluster.upstream.ratelimit.error')).toBe(errorsBefore);
      expect(await envoyStat('cluster.upstream.ratelimit.failure_mode_allowed')).toBe(
        allowedBefore,
      );

      await compose(files, ['down', '--timeout', '5']);
      expect(await health()).toEqual({});
    });
  },
);
