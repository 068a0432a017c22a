/**
 * docker-compose.yml, Dockerfile and .dockerignore, checked without a Docker daemon:
 * `docker-compose config -q` accepts the compose file (skipped with a reason locally when no compose
 * CLI is installed, failing under CI); every file and directory they reference exists; the
 * compose wiring matches envoy/envoy.yaml; and the health check one-liners really work.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEFAULT_RUNTIME_ROOT, loadSettings } from '../../src/settings.js';
import { loadShippedEnvoyConfig } from '../helpers/envoy.js';
import { REPO_ROOT, freePort, inCi, waitFor } from '../helpers/processes.js';

const compose = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, any>;
};
const dockerfile = readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');

/** The Dockerfile's instructions: continuation lines joined, comments and blank lines dropped. */
const instructions = dockerfile
  .replace(/\\\n\s*/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l !== '' && !l.startsWith('#'));

/** The instructions of the last stage (the runtime image). */
const finalStage = instructions.slice(instructions.findLastIndex((l) => l.startsWith('FROM ')));

/** The runtime image's `ENV KEY=VALUE ...` settings (values without spaces or quotes). */
function dockerfileEnv(): Record<string, string> {
  const pairs = finalStage
    .filter((l) => l.startsWith('ENV '))
    .flatMap((l) => l.slice('ENV '.length).trim().split(/\s+/));
  return Object.fromEntries(
    pairs.map((pair) => {
      expect(pair, 'ENV in KEY=VALUE form').toMatch(/^[A-Z_]+=\S*$/);
      const at = pair.indexOf('=');
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
}

/** A compose CLI: Debian's `docker-compose` (v1) or the `docker compose` plugin (v2). */
function findComposeCli(): { command: string; args: string[] } | undefined {
  for (const candidate of [
    { command: 'docker-compose', args: [] },
    { command: 'docker', args: ['compose'] },
  ]) {
    const result = spawnSync(candidate.command, [...candidate.args, 'version'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    if (result.status === 0) return candidate;
  }
  return undefined;
}

const cli = findComposeCli();
const skipCli = cli === undefined && !inCi();
const missingCli =
  'no compose CLI found (tried `docker-compose` and `docker compose`); install one, e.g. `apt-get install docker-compose`';
if (skipCli) console.warn(`[docker-compose config] SKIPPED: ${missingCli}`);

describe.skipIf(skipCli)(
  skipCli ? `docker-compose config (SKIPPED: ${missingCli})` : 'docker-compose config',
  () => {
    it('accepts docker-compose.yml (config -q)', () => {
      if (cli === undefined)
        throw new Error(`${missingCli} (under CI a missing compose CLI fails)`);
      const result = spawnSync(cli.command, [...cli.args, 'config', '-q'], {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
    });

    it('rejects a broken copy, so the check can fail', () => {
      if (cli === undefined)
        throw new Error(`${missingCli} (under CI a missing compose CLI fails)`);
      const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-compose-'));
      try {
        const file = path.join(dir, 'docker-compose.yml');
        const text = readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8');
        writeFileSync(file, text.replace('condition: service_started', 'condition: when_ready'));
        const result = spawnSync(
          cli.command,
          [...cli.args, '-f', file, '--project-directory', REPO_ROOT, 'config', '-q'],
          { encoding: 'utf8', timeout: 30_000 },
        );
        expect(result.status).not.toBe(0);
        expect(`${result.stdout}${result.stderr}`).toMatch(/when_ready/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  },
);

/** Host path of a short-syntax volume (`./a:/b[:ro]`), `undefined` for named volumes. */
function hostPath(volume: string | { type?: string; source?: string }): string | undefined {
  if (typeof volume !== 'string') return volume.type === 'bind' ? volume.source : undefined;
  const source = volume.split(':')[0] ?? '';
  return source.startsWith('.') || source.startsWith('/') ? source : undefined;
}

/**
 * Whether `.dockerignore` leaves `rel` in the build context: Docker's rules (the last matching
 * pattern wins, `!` re-includes, a pattern matching a parent directory matches its contents).
 */
function inBuildContext(rel: string, patterns: readonly string[]): boolean {
  let included = true;
  const parts = rel.split('/');
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    const re = new RegExp(
      `^${pattern
        .split('**')
        .map((s) =>
          s
            .split('*')
            .map((t) => t.replace(/[.+^${}()|[\]\\?]/g, '\\$&'))
            .join('[^/]*'),
        )
        .join('.*')}$`,
    );
    for (let i = 1; i <= parts.length; i++) {
      if (re.test(parts.slice(0, i).join('/'))) {
        included = negate;
        break;
      }
    }
  }
  return included;
}

describe('files referenced by docker-compose.yml and the Dockerfile', () => {
  it('has a build context and Dockerfile that exist', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      if (service.build === undefined) continue;
      const context = path.resolve(
        REPO_ROOT,
        typeof service.build === 'string' ? service.build : (service.build.context ?? '.'),
      );
      expect(statSync(context).isDirectory(), `${name}: build context ${context}`).toBe(true);
      const file = path.resolve(context, service.build.dockerfile ?? 'Dockerfile');
      expect(existsSync(file), `${name}: Dockerfile ${file}`).toBe(true);
    }
  });

  it('mounts only host paths that exist', () => {
    const mounts = Object.entries(compose.services).flatMap(([name, service]) =>
      ((service.volumes ?? []) as any[]).map((v) => [name, hostPath(v)] as const),
    );
    expect(mounts.length).toBeGreaterThan(0);
    for (const [name, host] of mounts) {
      if (host === undefined) continue;
      expect(existsSync(path.resolve(REPO_ROOT, host)), `${name}: ${host}`).toBe(true);
    }
  });

  it('COPYs only sources that exist and that .dockerignore keeps in the context', () => {
    const ignore = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    const copies = dockerfile
      .split('\n')
      .filter((l) => /^COPY\s/.test(l) && !/--from=/.test(l))
      .flatMap((l) => l.trim().split(/\s+/).slice(1, -1));
    expect(copies).toEqual(
      expect.arrayContaining([
        'package.json',
        'package-lock.json',
        'src',
        'proto',
        'envoy/ratelimit',
      ]),
    );
    for (const source of copies) {
      expect(existsSync(path.join(REPO_ROOT, source)), `COPY ${source}`).toBe(true);
      expect(inBuildContext(source, ignore), `.dockerignore keeps ${source}`).toBe(true);
    }
    for (const heavy of ['node_modules', 'dist', '.cache', '.git', 'test']) {
      expect(inBuildContext(heavy, ignore), `.dockerignore drops ${heavy}`).toBe(false);
    }
  });
});

describe('the compose wiring', () => {
  const envoyConfig = loadShippedEnvoyConfig();
  const endpoint = (cluster: string): { address: string; port_value: number } =>
    (envoyConfig['static_resources'].clusters as any[]).find((c) => c.name === cluster)
      .load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;

  it('runs envoy v1.40 on the shipped envoy.yaml with 10000 published and admin 9901 on loopback', () => {
    const envoy = compose.services['envoy'];
    expect(envoy.image).toBe('docker.io/envoyproxy/envoy:v1.40-latest');
    expect(envoy.volumes).toContain('./envoy/envoy.yaml:/etc/envoy/envoy.yaml:ro');
    expect(envoy.command).toEqual(expect.arrayContaining(['-c', '/etc/envoy/envoy.yaml']));
    expect(envoy.ports).toEqual(['10000:10000', '127.0.0.1:9901:9901']);
  });

  it('builds sluice from the Dockerfile with the rules at RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config', () => {
    const sluice = compose.services['sluice'];
    expect(sluice.build).toMatchObject({ context: '.', dockerfile: 'Dockerfile' });
    // The reference's docker-compose layout, kept so its users mount their rules the same way.
    expect(sluice.environment).toMatchObject({
      RUNTIME_ROOT: '/data',
      RUNTIME_SUBDIRECTORY: 'ratelimit',
    });
    expect(sluice.volumes).toContain('./envoy/ratelimit:/data/ratelimit/config:ro');
    // Compose's environment overrides the image's ENV; sluice's own resolution of the result must
    // land on the directory the volume mounts.
    const runtimeEnv = Object.fromEntries(
      Object.entries(sluice.environment as Record<string, string>).filter(([k]) =>
        k.startsWith('RUNTIME_'),
      ),
    );
    const mounted = (sluice.volumes as string[])
      .filter((v) => v.startsWith('./envoy/ratelimit:'))
      .map((v) => v.split(':')[1]);
    expect(loadSettings({ ...dockerfileEnv(), ...runtimeEnv }).config).toEqual({
      origin: 'runtime',
      paths: mounted,
    });
  });

  it("matches envoy.yaml's cluster addresses to compose service names and ports", () => {
    expect(endpoint('sluice')).toEqual({ address: 'sluice', port_value: 8081 });
    expect(endpoint('upstream')).toEqual({ address: 'upstream', port_value: 8080 });
    expect(Object.keys(compose.services)).toEqual(
      expect.arrayContaining(['envoy', 'sluice', 'upstream']),
    );
    expect(compose.services['upstream'].environment).toMatchObject({ PORT: 8080 });
  });

  it('starts envoy after sluice and upstream without waiting on a health check runner, and every service has a health check', () => {
    // podman without systemd runs no health checks: `service_healthy` would wait forever there.
    expect(compose.services['envoy'].depends_on).toEqual({
      sluice: { condition: 'service_started' },
      upstream: { condition: 'service_started' },
    });
    for (const [name, service] of Object.entries(compose.services)) {
      expect(service.healthcheck?.test, `${name} health check`).toBeDefined();
    }
  });

  it('names every pulled image fully qualified (podman resolves no short names), in both files', () => {
    for (const file of ['docker-compose.yml', 'docker-compose.redis.yml']) {
      const text = readFileSync(path.join(REPO_ROOT, file), 'utf8');
      const services = (parse(text) as { services: Record<string, any> }).services;
      for (const [name, service] of Object.entries(services)) {
        const image = service.image as string | undefined;
        if (image === undefined || service.build !== undefined || image === 'sluice:local')
          continue;
        expect(image, `${file} ${name}`).toMatch(/^docker\.io\/[a-z0-9-]+\/[a-z0-9-]+:[\w.-]+$/);
      }
      expect(text, file).not.toMatch(/^\s+condition: service_healthy/m);
    }
  });
});

describe('the Dockerfile', () => {
  const stages = instructions.filter((l) => l.startsWith('FROM '));

  it('builds in one stage and runs production dependencies only in the last', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(instructions).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^RUN npm ci\b(?!.*--omit=dev)/),
        'RUN npm run build',
      ]),
    );
    expect(finalStage).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^RUN npm ci --omit=dev/),
        'COPY --from=build /app/dist ./dist',
        'COPY proto ./proto',
        'ENTRYPOINT ["node", "dist/main.js"]',
        'CMD ["serve"]',
      ]),
    );
    const user = finalStage.filter((l) => l.startsWith('USER ')).at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^USER (root|0)(:|$)/);
  });

  it('exposes what sluice serves: gRPC 8081, HTTP 8080, debug 6070', () => {
    expect(finalStage.filter((l) => l.startsWith('EXPOSE '))).toEqual(['EXPOSE 8081 8080 6070']);
  });

  it('builds on a Node 24 base given as a build argument', () => {
    expect(instructions[0]).toBe('ARG NODE_IMAGE=docker.io/library/node:24-slim');
    expect(stages).toEqual(['FROM ${NODE_IMAGE} AS build', 'FROM ${NODE_IMAGE} AS runtime']);
  });

  it("puts the demo rules at the reference's default RUNTIME_ROOT layout, readable by its user", () => {
    const env = dockerfileEnv();
    // The reference's default, written out: sluice reads RUNTIME_* only when one is set.
    expect(env['RUNTIME_ROOT']).toBe(DEFAULT_RUNTIME_ROOT);
    expect(env['RUNTIME_SUBDIRECTORY']).toBeUndefined();
    expect(env['RUNTIME_APPDIRECTORY']).toBeUndefined();
    const rulesDir = `${DEFAULT_RUNTIME_ROOT}/config`;
    expect(loadSettings(env).config).toEqual({ origin: 'runtime', paths: [rulesDir] });
    expect(finalStage).toContain(`COPY envoy/ratelimit ${rulesDir}`);
    // Made readable (as root, before USER) for the non-root user, whatever the context's modes.
    const chmod = finalStage.findIndex(
      (l) =>
        /^RUN chmod -R a\+rX /.test(l) &&
        l
          .split(/\s+/)
          .slice(4)
          .some((p) => rulesDir === p || rulesDir.startsWith(`${p.replace(/\/$/, '')}/`)),
    );
    expect(chmod, `RUN chmod -R a+rX covering ${rulesDir}`).toBeGreaterThanOrEqual(0);
    expect(chmod).toBeLessThan(finalStage.findLastIndex((l) => l.startsWith('USER ')));
  });
});

/** Run a `node -e` one-liner with extra env; resolves to its exit code (bounded). */
async function runNodeOneLiner(code: string, env: Record<string, string>): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      env: { ...process.env, ...env },
      stdio: 'ignore',
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    child.once('error', reject);
    child.once('exit', (status) => {
      clearTimeout(timer);
      resolve(status);
    });
  });
}

/** The `node -e` script of a health check `test: [CMD, node, -e, SCRIPT]`. */
function nodeScript(test: string[]): string {
  expect(test.slice(0, 3)).toEqual(['CMD', 'node', '-e']);
  return test[3] ?? '';
}

describe('the health check one-liners, run for real', () => {
  async function withListener<T>(fn: (port: number) => Promise<T>): Promise<T> {
    const server = net.createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      return await fn((server.address() as net.AddressInfo).port);
    } finally {
      server.close();
    }
  }

  /** An HTTP server on a free loopback port answering /healthcheck with `status`. */
  async function withHealth<T>(status: number, fn: (port: number) => Promise<T>): Promise<T> {
    const server = http.createServer((req, res) => {
      res.writeHead(req.url === '/healthcheck' ? status : 404);
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      return await fn((server.address() as net.AddressInfo).port);
    } finally {
      server.close();
    }
  }

  const dockerfileCheck = (): string[] => {
    const line = dockerfile.replace(/\\\n\s*/g, ' ').match(/^HEALTHCHECK .*CMD (\[.*\])$/m);
    return ['CMD', ...(JSON.parse(line?.[1] ?? '[]') as string[])];
  };

  it("the Dockerfile's HEALTHCHECK passes on /healthcheck 200 and fails on 500 or nothing listening", async () => {
    const script = nodeScript(dockerfileCheck());
    await withHealth(200, async (port) => {
      expect(await runNodeOneLiner(script, { PORT: String(port) })).toBe(0);
    });
    await withHealth(500, async (port) => {
      expect(await runNodeOneLiner(script, { PORT: String(port) })).toBe(1);
    });
    // A TCP listener that is not sluice's HTTP port (the old check's blind spot) fails too.
    await withListener(async (port) => {
      expect(await runNodeOneLiner(script, { PORT: String(port) })).toBe(1);
    });
    expect(await runNodeOneLiner(script, { PORT: String(await freePort()) })).toBe(1);
  });

  it("compose's sluice check is the Dockerfile's, with no space in it (podman's Docker API splits CMD at spaces)", () => {
    const test = compose.services['sluice'].healthcheck.test as string[];
    expect(test).toEqual(dockerfileCheck());
    expect(compose.services['upstream'].healthcheck.test.join('\n')).not.toMatch(/ /);
    expect(test.join('\n')).not.toMatch(/ /);
  });

  it("compose's upstream answers 200 for any path and its check passes", async () => {
    const upstream = compose.services['upstream'];
    expect(upstream.command.slice(0, 2)).toEqual(['node', '-e']);
    const port = await freePort();
    const child = spawn(process.execPath, ['-e', upstream.command[2]], {
      env: { ...process.env, PORT: String(port) },
      stdio: 'ignore',
    });
    try {
      let status = 0;
      await waitFor(
        'the upstream to answer',
        async () => {
          status = (await fetch(`http://127.0.0.1:${port}/any/path?q=1`)).status;
          return true;
        },
        { timeoutMs: 10_000 },
      );
      expect(status).toBe(200);
      expect(
        await runNodeOneLiner(nodeScript(upstream.healthcheck.test), { PORT: String(port) }),
      ).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
