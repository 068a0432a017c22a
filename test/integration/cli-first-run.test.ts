/**
 * The first five minutes with the CLI: help on every command, the version, errors that name what
 * was typed, the start-up line, `sluice query` exit codes and `--check`, a busy port.
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { nodeSupported } from '../../src/version.js';
import { ruleDir } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import {
  ensureBuilt,
  freePort,
  REPO_ROOT,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';

beforeAll(() => ensureBuilt());

const VERSION = (
  JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

describe('help and version', () => {
  it.each([
    [['serve', '--help'], /^Usage: sluice serve /],
    [['serve', '-h'], /^Usage: sluice serve /],
    [['check', '--help'], /^Usage: sluice check PATH/],
    [['query', '--help'], /^Usage: sluice query /],
    [['version', '--help'], /^Usage: sluice version/],
    [['help', 'query'], /^Usage: sluice query /],
    [['--help'], /^Usage: sluice <command>/],
    [['help'], /^Usage: sluice <command>/],
  ])('sluice %j prints its help and exits 0', async (args, usage) => {
    const result = await runCli(args);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(usage);
    expect(result.stdout).toMatch(/--help/);
  });

  it('documents the exit codes and --check in query --help', async () => {
    const { stdout } = await runCli(['query', '--help']);
    expect(stdout).toMatch(
      /0 when the overall code is OK, 2 when it is OVER_LIMIT, 1 on any error/,
    );
    expect(stdout).toMatch(/--check/);
  });

  it.each([['--version'], ['version'], ['-v']])('sluice %s prints the version', async (flag) => {
    const result = await runCli([flag]);
    expect(result).toMatchObject({ code: 0, stderr: '', stdout: `sluice ${VERSION}\n` });
  });
});

describe('errors are prefixed and name what the user typed', () => {
  it('an unknown command', async () => {
    const result = await runCli(['serv']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^sluice: unknown command "serv": expected serve, check, query/);
    expect(result.stderr).toMatch(/Run 'sluice --help' for usage\./);
  });

  it('an option before the command', async () => {
    const result = await runCli(['--grpc-port', '9000']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^sluice: unknown option "--grpc-port": options go after a command/,
    );
  });

  it('an unknown option of a command, without node:util noise', async () => {
    const result = await runCli(['query', '--hist', '3']);
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      "sluice query: unknown option '--hist'\nRun 'sluice query --help' for usage.\n",
    );
  });

  it('--grpc-port abc names --grpc-port, not GRPC_PORT', async () => {
    const result = await runCli(['serve', '--grpc-port', 'abc', '--log-level', 'loud']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/--grpc-port "abc": expected an integer from 0 to 65535/);
    expect(result.stderr).toMatch(/--log-level "loud": expected one of/);
    expect(result.stderr).not.toMatch(/GRPC_PORT=|LOG_LEVEL=/);
  });

  it('the environment variable is named when the value came from it', async () => {
    const result = await runCli(['serve'], { GRPC_PORT: 'abc' });
    expect(result.stderr).toMatch(/GRPC_PORT="abc": expected an integer/);
  });

  it('SHADOW_MODE=yes lists every accepted spelling', async () => {
    const result = await runCli(['serve'], { SHADOW_MODE: 'yes' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /SHADOW_MODE="yes": expected true or false \(accepted: 1, t, T, TRUE, true, True for true; 0, f, F, FALSE, false, False for false\)/,
    );
  });

  it('query --hits 0 points to --check', async () => {
    const result = await runCli(['query', '--domain', 'd', '--descriptor', 'k=v', '--hits', '0']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^sluice query: --hits "0": .*use --check to count nothing/);
  });

  it.each(['lean', 'grpc-js'])(
    'a busy gRPC port gives one clean sluice error (GRPC_SERVER=%s)',
    async (server) => {
      const blocker = net.createServer();
      await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
      const port = (blocker.address() as net.AddressInfo).port;
      try {
        const result = await runCli(
          ['serve', '--grpc-host', '127.0.0.1', '--grpc-port', `${port}`],
          {
            GRPC_SERVER: server,
            PORT: String(await freePort()),
            DEBUG_PORT: String(await freePort()),
          },
        );
        expect(result.code).toBe(1);
        expect(result.stdout).toBe('');
        // One line, sluice's own: no grpc-js log line ("No address added ...") before it.
        expect(result.stderr.trimEnd().split('\n')).toEqual([
          expect.stringMatching(
            new RegExp(`^sluice: cannot listen on 127\\.0\\.0\\.1:${port} .*EADDRINUSE`),
          ),
        ]);
      } finally {
        blocker.close();
      }
    },
  );
});

describe('a second sluice on one host: every port has a flag, every bind error its setting', () => {
  const group = useProcessGroup();

  it('serve --port, --debug-port, --host, --debug-host override PORT, DEBUG_PORT, HOST, DEBUG_HOST', async () => {
    const [grpcPort, httpPort, debugPort] = [await freePort(), await freePort(), await freePort()];
    const server = await startSluice(group, {
      grpcPort,
      env: { PORT: 'not-used', DEBUG_PORT: 'not-used', HOST: '::bad', DEBUG_HOST: '::bad' },
      args: [
        '--host',
        '127.0.0.1',
        '--port',
        String(httpPort),
        '--debug-host',
        '127.0.0.1',
        '--debug-port',
        String(debugPort),
      ],
    });
    expect(server.grpcPort).toBe(grpcPort);
    expect((await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${debugPort}/rlconfig`)).status).toBe(200);
  });

  it.each([
    ['HTTP', ['--port'], /for HTTP \(set HOST\/PORT or --host\/--port\): .*EADDRINUSE/],
    [
      'debug',
      ['--debug-port'],
      /for the debug server \(set DEBUG_HOST\/DEBUG_PORT or --debug-host\/--debug-port\): .*EADDRINUSE/,
    ],
  ])('a busy %s port names the setting and the flag that move it', async (_name, flag, text) => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      const others = {
        '--port': String(await freePort()),
        '--debug-port': String(await freePort()),
      };
      const result = await runCli([
        'serve',
        '--grpc-host',
        '127.0.0.1',
        '--grpc-port',
        '0',
        '--host',
        '127.0.0.1',
        '--debug-host',
        '127.0.0.1',
        ...Object.entries({ ...others, [flag[0]!]: String(port) }).flat(),
      ]);
      expect(result.code).toBe(1);
      expect(result.stderr.trimEnd().split('\n')).toEqual([
        expect.stringMatching(new RegExp(`^sluice: cannot listen on 127\\.0\\.0\\.1:${port} `)),
      ]);
      expect(result.stderr).toMatch(text);
    } finally {
      blocker.close();
    }
  });
});

describe('the start-up line', () => {
  const group = useProcessGroup();

  // An empty LOG_LEVEL reads as unset: the default, warn.
  it.each([[''], ['error']])(
    'sluice serve prints it at LOG_LEVEL=%j (empty: the default, warn)',
    async (level) => {
      const grpcPort = await freePort();
      const httpPort = await freePort();
      const debugPort = await freePort();
      const { proc } = await startSluice(group, {
        grpcPort,
        env: { LOG_LEVEL: level, PORT: String(httpPort), DEBUG_PORT: String(debugPort) },
      });
      await waitFor('the start-up line', () => proc.output().includes('sluice listening'), {
        timeoutMs: 5_000,
        intervalMs: 20,
        onTimeout: () => proc.output(),
      });
      const line = proc
        .output()
        .split('\n')
        .find((l) => l.includes('sluice listening'))!;
      expect(JSON.parse(line)).toMatchObject({
        level: 30,
        msg: 'sluice listening',
        version: VERSION,
        grpc: `127.0.0.1:${grpcPort}`,
        http: `0.0.0.0:${httpPort}`,
        debug: `127.0.0.1:${debugPort}`,
        store: 'memory',
        config: 'bundled',
        domains: ['edge'],
        rules: expect.any(Number),
      });
      await proc.stop();
    },
  );

  it('comes with a warning when the Node.js running it is not one package.json supports', async () => {
    const { proc } = await startSluice(group, {
      grpcPort: await freePort(),
      env: { LOG_LEVEL: '' },
    });
    // The warning follows the start-up line.
    await waitFor('the start-up line', () => proc.output().includes('sluice listening'), {
      timeoutMs: 5_000,
      intervalMs: 20,
      onTimeout: () => proc.output(),
    });
    await proc.stop();
    const warnings = proc
      .output()
      .split('\n')
      .filter((l) => l.includes('is not supported (package.json engines'));
    // The suite runs on the supported lines in CI (no warning), and on whatever node a
    // developer has (Node 20 here: the warning, once).
    if (nodeSupported(process.versions.node)) {
      expect(warnings).toEqual([]);
    } else {
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({
        level: 40,
        node: process.version,
        supported: '^22.13.0 || >=24',
      });
    }
  });
});

describe('sluice query', () => {
  const group = useProcessGroup();
  let addr: string;
  let shadowAddr: string;

  const RULES = `domain: q
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2, name: per-user}
`;

  beforeAll(async () => {
    const dir = await ruleDir({ 'q.yaml': RULES });
    const one = await startSluice(group, { configDir: dir, grpcPort: await freePort() });
    addr = `127.0.0.1:${one.grpcPort}`;
    const two = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      env: { SHADOW_MODE: 'true' },
    });
    shadowAddr = `127.0.0.1:${two.grpcPort}`;
  });

  const query = (target: string, ...args: string[]) =>
    runCli(['query', '--addr', target, '--domain', 'q', ...args]);

  it('exits 0 on OK and 2 on OVER_LIMIT; --check counts nothing', async () => {
    const check = await query(addr, '--descriptor', 'user=a', '--check');
    expect(check.code).toBe(0);
    expect(check.stdout).toMatch(/^overall: OK \(check only: nothing was counted\)$/m);
    expect(check.stdout).toMatch(/user=a: OK .*remaining 2/);

    const first = await query(addr, '--descriptor', 'user=a');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/user=a: OK .*remaining 1/);

    // A check between two counted requests leaves the counter where it was.
    expect((await query(addr, '--descriptor', 'user=a', '--check')).stdout).toMatch(/remaining 1/);
    expect((await query(addr, '--descriptor', 'user=a')).stdout).toMatch(/remaining 0/);

    const over = await query(addr, '--descriptor', 'user=a');
    expect(over.code).toBe(2);
    expect(over.stdout).toMatch(/^overall: OVER_LIMIT$/m);
    expect(over.stdout).toMatch(/user=a: OVER_LIMIT .*reset in \d+\.\d{3}s/);
  });

  it('says a request larger than the limit can never be admitted', async () => {
    const result = await query(addr, '--descriptor', 'user=big', '--hits', '10');
    expect(result.code).toBe(2);
    expect(result.stdout).toMatch(
      /user=big: OVER_LIMIT .*never admitted: 10 hits exceed the limit of 2/,
    );
    expect(result.stdout).not.toMatch(/reset in/);
  });

  it('shows what SHADOW_MODE lets through as "would block", exit 0', async () => {
    for (let i = 0; i < 2; i++) await query(shadowAddr, '--descriptor', 'user=s');
    const result = await query(shadowAddr, '--descriptor', 'user=s');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^overall: OK \(would block: SHADOW_MODE answers OK overall\)$/m);
    expect(result.stdout).toMatch(/user=s: OVER_LIMIT +\(would block; shadow mode\)/);
  });

  it('exits 1 when the server cannot be reached', async () => {
    const result = await query(
      `127.0.0.1:${await freePort()}`,
      '--descriptor',
      'user=a',
      '--timeout-ms',
      '1500',
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^sluice: request failed: /);
  });
});
