/**
 * The image, built from the project's Dockerfile (unchanged: its default base `node:24-slim` is
 * the stand-in scripts/test-container-images.sh builds) and run with podman, tested from outside:
 * its metadata, the published ports, /healthcheck through the image's own HEALTHCHECK (failing
 * while Redis is down, passing when it is back), SIGTERM, the non-root user, rules mounted the
 * reference's ways, and `/bin/ratelimit` as Envoy Gateway's Deployment runs it.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { ensureBuilt } from '../helpers/processes.js';
import {
  SLUICE_TEST_IMAGE,
  assertRequirement,
  buildSluiceImage,
  containerRequirement,
  ensureStandInImages,
  healthcheckRun,
  hostPort,
  podman,
  podmanOk,
  scaled,
  waitFor,
} from './podman.js';

const requirement = containerRequirement('container: image');
const prefix = `sluice-ct-${process.pid}-`;
const network = `${prefix}net`;
const created: string[] = [];
let rulesDir = '';

/** A rule file of its own, so answers show that the mounted rules (not the image's) are served. */
const RULES = `domain: container
descriptors:
  - key: k
    value: v
    rate_limit: { unit: minute, requests_per_unit: 2 }
`;

/** `podman run -d` a container of the sluice image (or `image`); its name is recorded for cleanup. */
async function runContainer(
  name: string,
  args: string[],
  image = SLUICE_TEST_IMAGE,
): Promise<string> {
  const full = `${prefix}${name}`;
  created.push(full);
  await podmanOk(['run', '-d', '--name', full, '--network', network, ...args, image]);
  return full;
}

/** POST a one-descriptor /json request to the published HTTP port; resolves to the status. */
async function json(port: number, key: string, value: string): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${port}/json`, {
    method: 'POST',
    body: JSON.stringify({ domain: 'container', descriptors: [{ entries: [{ key, value }] }] }),
    signal: AbortSignal.timeout(scaled(5_000)),
  });
  await res.arrayBuffer();
  return res.status;
}

async function get(port: number, urlPath: string): Promise<{ status: number; body: string }> {
  try {
    const res = await fetch(`http://127.0.0.1:${port}${urlPath}`, {
      signal: AbortSignal.timeout(scaled(5_000)),
    });
    return { status: res.status, body: await res.text() };
  } catch {
    return { status: 0, body: '' };
  }
}

/** Wait until the container's /healthcheck, asked from the host, answers `status`. */
async function waitHealth(port: number, status: number, timeoutMs = 30_000): Promise<void> {
  const ok = await waitFor(
    async () => (await get(port, '/healthcheck')).status === status,
    timeoutMs,
  );
  expect(ok, `/healthcheck on 127.0.0.1:${port} answers ${status} within ${timeoutMs} ms`).toBe(
    true,
  );
}

/** Stop a container with SIGTERM (SIGKILL only after 30 s); resolves to its exit code. */
async function stopAndExitCode(container: string): Promise<number> {
  await podmanOk(['stop', '--time', '30', container], 60_000);
  return Number(await podmanOk(['inspect', '--format', '{{.State.ExitCode}}', container]));
}

describe.skipIf(requirement.skip)(
  requirement.skip ? `the image (SKIPPED: ${requirement.reason})` : 'the image, built and run',
  () => {
    beforeAll(async () => {
      assertRequirement(requirement);
      ensureBuilt();
      console.log(await ensureStandInImages());
      const started = Date.now();
      await buildSluiceImage();
      console.log(
        `[container: image] the Dockerfile built in ${Math.round((Date.now() - started) / 1000)} s`,
      );
      rulesDir = mkdtempSync(path.join(os.tmpdir(), 'sluice-ct-rules-'));
      writeFileSync(path.join(rulesDir, 'container.yaml'), RULES);
      // A mounted directory keeps its host modes; mkdtemp's 0700 would hide it from the image's user.
      chmodSync(rulesDir, 0o755);
      chmodSync(path.join(rulesDir, 'container.yaml'), 0o644);
      await podmanOk(['network', 'create', network]);
    }, scaled(1_800_000));

    afterAll(async () => {
      if (created.length > 0) await podman(['rm', '--force', '--time', '0', ...created], 120_000);
      await podman(['network', 'rm', '--force', network]);
      if (rulesDir !== '') rmSync(rulesDir, { recursive: true, force: true });
    }, scaled(180_000));

    it('runs Node 24 as a non-root user, exposes 8080 8081 6070 and checks health on /healthcheck', async () => {
      const [image] = JSON.parse(await podmanOk(['image', 'inspect', SLUICE_TEST_IMAGE])) as [
        {
          Config: {
            User: string;
            ExposedPorts: Record<string, unknown>;
            Entrypoint: string[];
            Cmd: string[];
          };
          Healthcheck?: { Test: string[] };
        },
      ];
      const config = image.Config;
      expect(config.User).toBe('node');
      expect(Object.keys(config.ExposedPorts).sort()).toEqual(['6070/tcp', '8080/tcp', '8081/tcp']);
      expect(image.Healthcheck?.Test.join(' ')).toMatch(/\/healthcheck/);
      expect(config.Entrypoint).toEqual(['node', 'dist/main.js']);
      expect(config.Cmd).toEqual(['serve']);
      const version = await podmanOk([
        'run',
        '--rm',
        '--entrypoint',
        'node',
        SLUICE_TEST_IMAGE,
        '--version',
      ]);
      expect(version).toMatch(/^v24\./);
    });

    it("serves rules mounted at the reference's default layout on the published ports, healthy, as non-root, and exits 0 on SIGTERM", async () => {
      const name = await runContainer('default', [
        '--publish',
        '127.0.0.1::8080',
        '--publish',
        '127.0.0.1::8081',
        '--publish',
        '127.0.0.1::6070',
        '--env',
        'DEBUG_HOST=0.0.0.0',
        '--volume',
        `${rulesDir}:/srv/runtime_data/current/config:ro`,
      ]);
      const http = await hostPort(name, 8080);
      const grpc = await hostPort(name, 8081);
      const debug = await hostPort(name, 6070);
      await waitHealth(http, 200);
      expect(await get(http, '/healthcheck')).toEqual({ status: 200, body: 'OK' });

      // The image's own HEALTHCHECK command, run by podman inside the container.
      const health = await healthcheckRun(name);
      expect(health.code, `${health.stdout}${health.stderr}`).toBe(0);

      // The mounted rules, over HTTP /json and over the published gRPC port.
      expect([
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
      ]).toEqual([200, 200, 429]);
      const query = await runCli([
        'query',
        '--addr',
        `127.0.0.1:${grpc}`,
        '--domain',
        'container',
        '--descriptor',
        'k=v',
      ]);
      expect(query.code, query.stderr).toBe(2);
      expect(query.stdout).toMatch(
        /^overall: OVER_LIMIT\n {2}\[0\] k=v: OVER_LIMIT {2}limit 2\/minute/,
      );

      const metrics = await get(http, '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.body).toMatch(/^sluice_/m);
      const rlconfig = await get(debug, '/rlconfig');
      expect(rlconfig.status).toBe(200);
      expect(rlconfig.body).toContain('container.k_v');

      // Non-root: the serving process (PID 1) and anything exec'd run as node (1000).
      expect(await podmanOk(['exec', name, 'id', '-u'])).toBe('1000');
      expect(await podmanOk(['top', name, 'pid', 'user'])).toMatch(/^\s*1\s+node$/m);

      // SIGTERM (podman stop): sluice drains and exits 0 before the 30 s SIGKILL.
      expect(await stopAndExitCode(name)).toBe(0);
      const logs = await podman(['logs', name]);
      expect(`${logs.stdout}${logs.stderr}`).toContain('sluice listening');
    });

    it("runs as Envoy Gateway's Deployment runs the reference: /bin/ratelimit, another UID, read-only root, RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config", async () => {
      const name = await runContainer('gateway', [
        '--entrypoint',
        '/bin/ratelimit',
        '--user',
        '65534:65534',
        '--read-only',
        '--publish',
        '127.0.0.1::8080',
        '--env',
        'RUNTIME_ROOT=/data',
        '--env',
        'RUNTIME_SUBDIRECTORY=ratelimit',
        '--env',
        'RUNTIME_IGNOREDOTFILES=true',
        '--env',
        'LOG_LEVEL=info',
        '--volume',
        `${rulesDir}:/data/ratelimit/config:ro`,
      ]);
      const http = await hostPort(name, 8080);
      await waitHealth(http, 200);
      const health = await healthcheckRun(name);
      expect(health.code, `${health.stdout}${health.stderr}`).toBe(0);
      expect([
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
      ]).toEqual([200, 200, 429]);
      expect(await podmanOk(['exec', name, 'id', '-u'])).toBe('65534');
      // /bin/ratelimit execs node, so node is PID 1 and gets SIGTERM itself.
      expect(await stopAndExitCode(name)).toBe(0);
    });

    it('with Redis: the HEALTHCHECK fails while Redis is down and passes when it is back', async () => {
      const redis = await runContainer('redis', [], 'docker.io/library/redis:7');
      const name = await runContainer('redis-backed', [
        '--publish',
        '127.0.0.1::8080',
        '--env',
        'BACKEND_TYPE=redis',
        '--env',
        'REDIS_SOCKET_TYPE=tcp',
        '--env',
        `REDIS_URL=${redis}:6379`,
        '--env',
        'REDIS_TIMEOUT=100ms',
        '--env',
        'LOG_LEVEL=info',
        '--volume',
        `${rulesDir}:/srv/runtime_data/current/config:ro`,
      ]);
      const http = await hostPort(name, 8080);
      await waitHealth(http, 200);
      const passing = await healthcheckRun(name);
      expect(passing.code, `${passing.stdout}${passing.stderr}`).toBe(0);
      expect([
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
        await json(http, 'k', 'v'),
      ]).toEqual([200, 200, 429]);

      await podmanOk(['stop', '--time', '5', redis]);
      const failing = await waitFor(async () => (await healthcheckRun(name)).code !== 0, 30_000);
      expect(failing, 'HEALTHCHECK fails within 30 s of Redis stopping').toBe(true);
      const down = await healthcheckRun(name);
      expect(down.code).not.toBe(0);
      expect(down.stdout.trim()).toBe('unhealthy');
      expect((await get(http, '/healthcheck')).status).toBe(500);

      await podmanOk(['start', redis]);
      const back = await waitFor(async () => (await healthcheckRun(name)).code === 0, 60_000);
      expect(back, 'HEALTHCHECK passes within 60 s of Redis starting again').toBe(true);
      expect(await get(http, '/healthcheck')).toEqual({ status: 200, body: 'OK' });
      expect(await podmanOk(['inspect', '--format', '{{.State.Health.Status}}', name])).toBe(
        'healthy',
      );
    });
  },
);
