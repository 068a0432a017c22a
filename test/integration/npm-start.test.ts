/**
 * `npm start` builds only when it must (scripts/build-if-stale.mjs): a fresh clone (no dist/) and
 * any edit under src/ or proto/ build first; an unchanged checkout starts without compiling.
 * Run on a throwaway project whose `build` script only records that it ran, and on this repo.
 * And `npm run build` from scratch leaves a bin that runs (`npx sluice` executes dist/main.js).
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEnvoyRls, rlsRequest, type EnvoyResponse } from '../helpers/envoy-rls-client.js';
import {
  connectHttp2,
  grpcFrame,
  parseGrpcFrames,
  pingHttp2,
  startRawCall,
} from '../helpers/grpc-wire.js';
import {
  canConnect,
  ensureBuilt,
  freePort,
  grpcHealthStatus,
  REPO_ROOT,
  SLUICE_MAIN,
  waitFor,
} from '../helpers/processes.js';

const SCRIPT = path.join(REPO_ROOT, 'scripts', 'build-if-stale.mjs');

function run(root?: string): { status: number | null; stderr: string } {
  const result = spawnSync(process.execPath, root === undefined ? [SCRIPT] : [SCRIPT, root], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: result.status, stderr: result.stderr };
}

describe('npm start: build only when dist/ is stale', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'sluice-start-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  // The project's "build" writes dist/main.js and appends one line to builds.log.
  const builds = (): number =>
    readFileSync(path.join(root, 'builds.log'), { encoding: 'utf8', flag: 'a+' }).length;

  it('builds a fresh clone, not again when nothing changed, again after an edit', () => {
    const build =
      "const fs=require('fs');fs.mkdirSync('dist',{recursive:true});fs.writeFileSync('dist/main.js','');fs.appendFileSync('builds.log','x')";
    writeFileSync(
      path.join(root, 'package.json'),
      JSON.stringify({ name: 'fake', scripts: { build: `node -e "${build}"` } }),
    );
    mkdirSync(path.join(root, 'src'));
    writeFileSync(path.join(root, 'src', 'main.ts'), 'export {};\n');
    // Sources from the past, so that the build's output is newer whatever the file system's
    // timestamp resolution.
    const past = new Date(Date.now() - 60_000);
    utimesSync(path.join(root, 'src', 'main.ts'), past, past);
    utimesSync(path.join(root, 'package.json'), past, past);

    const first = run(root);
    expect(first.status).toBe(0);
    expect(first.stderr).toMatch(/building \(dist\/main\.js is missing\)/);
    expect(builds()).toBe(1);

    const second = run(root);
    expect(second).toEqual({ status: 0, stderr: '' });
    expect(builds()).toBe(1);

    const future = new Date(Date.now() + 60_000);
    utimesSync(path.join(root, 'src', 'main.ts'), future, future);
    const third = run(root);
    expect(third.status).toBe(0);
    expect(third.stderr).toMatch(/building \(src is newer than dist\/\)/);
    expect(builds()).toBe(2);
  });

  it('a failing build fails the start', () => {
    writeFileSync(
      path.join(root, 'package.json'),
      JSON.stringify({ name: 'fake', scripts: { build: 'node -e "process.exit(3)"' } }),
    );
    expect(run(root).status).toBe(3);
  });

  it('this repository, once built, starts without compiling', () => {
    const pkg = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(pkg.scripts['start']).toMatch(/^node scripts\/build-if-stale\.mjs && /);
    ensureBuilt();
    const before = statSync(SLUICE_MAIN).mtimeMs;
    expect(run()).toEqual({ status: 0, stderr: '' });
    expect(statSync(SLUICE_MAIN).mtimeMs).toBe(before);
  });
});

describe('npm run build from scratch', () => {
  const root = mkdtempSync(path.join(tmpdir(), 'sluice-build-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  // A copy of what the build reads, so the clean build never touches the dist/ other tests run.
  it('leaves dist/main.js executable: the bin runs without npx having installed it', () => {
    for (const entry of ['src', 'proto', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
      cpSync(path.join(REPO_ROOT, entry), path.join(root, entry), { recursive: true });
    }
    symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(root, 'node_modules'));
    const build = spawnSync('npm', ['run', '--silent', 'build'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(build.status, `${build.stdout}${build.stderr}`).toBe(0);
    const bin = path.join(root, 'dist', 'main.js');
    expect((statSync(bin).mode & 0o111).toString(8)).toBe('111');
    // Run as npx runs it: the file itself, through its #! line.
    const version = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 30_000 });
    expect(version.error).toBeUndefined();
    expect(version.stdout).toMatch(/^sluice \d+\.\d+\.\d+/);
  }, 300_000);
});

describe('npm start: Ctrl-C drains like the binary', () => {
  let group: number | undefined;
  afterAll(() => {
    if (group === undefined) return;
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // Already gone.
    }
  });

  // Ctrl-C sends SIGINT to the terminal's foreground process group: npm, and the node that the
  // start script execs; npm then forwards its own copy to that node. When both copies reach node
  // at once the kernel merges them into one signal; the test makes the case that cut the drain
  // short every time: node handles the terminal's copy first, then npm gets its own and forwards
  // it. npm leads a process group of its own here, so nothing else can be signalled.
  it('finishes the call in flight and exits 0 when SIGINT reaches npm and sluice', async () => {
    ensureBuilt();
    const grpcPort = await freePort();
    const npm = spawn('npm', ['start'], {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        ...process.env,
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: String(grpcPort),
        PORT: String(await freePort()),
        DEBUG_PORT: String(await freePort()),
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_MS: '15000',
      },
    });
    const npmPid = npm.pid!;
    group = npmPid;
    let output = '';
    npm.stdout.on('data', (d: Buffer) => (output += d.toString()));
    npm.stderr.on('data', (d: Buffer) => (output += d.toString()));
    let exitCode: number | null | undefined;
    npm.once('exit', (code) => (exitCode = code));
    const address = `127.0.0.1:${grpcPort}`;
    await waitFor(
      'npm start to serve',
      async () =>
        (await canConnect('127.0.0.1', grpcPort)) &&
        (await grpcHealthStatus(address)) === 'SERVING',
      { timeoutMs: 60_000, onTimeout: () => output },
    );
    // The start script execs node, so npm's only child is sluice itself.
    const children = spawnSync('ps', ['-o', 'pid=', '--ppid', String(npmPid)], {
      encoding: 'utf8',
    }).stdout.trim();
    expect(children).toMatch(/^\d+$/);
    const sluicePid = Number(children);

    const service = loadEnvoyRls()[
      'envoy.service.ratelimit.v3.RateLimitService'
    ] as grpc.ServiceDefinition;
    const method = service.ShouldRateLimit!;
    const frame = grpcFrame(
      method.requestSerialize(rlsRequest('edge', [{ api_key: 'npm-start' }])),
    );
    const split = Math.floor(frame.length / 2);
    const session = await connectHttp2(`http://${address}`, 5_000);
    try {
      // Headers and half the message: the call is in flight, waiting for the rest.
      const call = startRawCall(
        session,
        '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        20_000,
      );
      await call.write(frame.subarray(0, split));
      await pingHttp2(session, 5_000);

      process.kill(sluicePid, 'SIGINT');
      await waitFor('sluice to start draining', () => /shutting down/.test(output), {
        timeoutMs: 10_000,
        intervalMs: 10,
        onTimeout: () => output,
      });
      process.kill(npmPid, 'SIGINT');
      await waitFor(
        "sluice to take npm's copy of the signal",
        () => /still draining|second signal/.test(output) || exitCode !== undefined,
        { timeoutMs: 10_000, intervalMs: 10, onTimeout: () => output },
      );

      call.end(frame.subarray(split));
      const result = await call.result;
      expect(result, output).toMatchObject({ failure: undefined, grpcStatus: '0' });
      const messages = parseGrpcFrames(result.body);
      expect(messages).toHaveLength(1);
      expect((method.responseDeserialize(messages[0]!) as EnvoyResponse).overall_code).toBe('OK');
    } finally {
      session.destroy();
    }
    await waitFor('npm start to exit', () => exitCode !== undefined, {
      timeoutMs: 20_000,
      onTimeout: () => output,
    });
    expect(exitCode, output).toBe(0);
    expect(output).not.toMatch(/second signal/);
  }, 120_000);
});
