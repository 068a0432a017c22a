import fs from 'node:fs/promises';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import {
  ensureBuilt,
  freePort,
  REPO_ROOT,
  startSluice,
  useProcessGroup,
  waitFor,
  type SluiceProcess,
} from '../helpers/processes.js';
import {
  createEnvoyRlsClient,
  loadEnvoyRls,
  rlsRequest,
  type EnvoyResponse,
} from '../helpers/envoy-rls-client.js';
import {
  connectHttp2,
  grpcFrame,
  parseGrpcFrames,
  pingHttp2,
  startRawCall,
} from '../helpers/grpc-wire.js';
import { ruleDir } from '../helpers/app.js';

beforeAll(() => ensureBuilt());

describe('starting the way envoyproxy/ratelimit is started', () => {
  const group = useProcessGroup();
  let server: SluiceProcess;
  let root: string;

  beforeAll(async () => {
    // The reference reads $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config/*.yaml.
    root = await ruleDir({});
    await fs.mkdir(path.join(root, 'ratelimit', 'config'), { recursive: true });
    await fs.writeFile(
      path.join(root, 'ratelimit', 'config', 'api.yaml'),
      'domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n',
    );
    server = await startSluice(group, {
      grpcPort: await freePort(),
      // Also the reference's LOG_LEVEL / LOG_FORMAT spellings (its default format is text).
      env: {
        RUNTIME_ROOT: root,
        RUNTIME_SUBDIRECTORY: 'ratelimit',
        LOG_LEVEL: 'INFO',
        LOG_FORMAT: 'text',
      },
    });
  });

  it('logs readable text lines when LOG_FORMAT=text', async () => {
    // The line is written asynchronously; it may trail the health check startSluice waited for.
    await waitFor('the listening line', () => server.proc.output().includes('sluice listening'), {
      timeoutMs: 5_000,
      intervalMs: 20,
    });
    const lines = server.proc.output().trim().split('\n');
    expect(lines.find((line) => line.includes('sluice listening'))).toMatch(
      new RegExp(
        `^\\S+ INFO sluice listening version=\\S+ grpc=127\\.0\\.0\\.1:${server.grpcPort} http=\\S+ debug=\\S+ store=memory workers=1 config=runtime domains=\\["api"\\] rules=1$`,
      ),
    );
    expect(lines.filter((line) => line.startsWith('{'))).toEqual([]);
  });

  it('loads the rules from RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config and serves on GRPC_PORT', async () => {
    const query = () =>
      runCli([
        'query',
        '--addr',
        `127.0.0.1:${server.grpcPort}`,
        '--domain',
        'api',
        '--descriptor',
        'user=alice',
      ]);
    const first = await query();
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/^overall: OK$/m);
    expect(first.stdout).toMatch(/user=alice: OK .*limit 2\/minute .*remaining 1/);
    expect((await query()).stdout).toMatch(/remaining 0/);
    const third = await query();
    expect(third.stdout).toMatch(/^overall: OVER_LIMIT$/m);
    expect(third.stdout).toMatch(/user=alice: OVER_LIMIT .*reset in \d+\.\d{3}s/);
  });

  it('says what failed when the server cannot be reached', async () => {
    const port = await freePort();
    const result = await runCli([
      'query',
      '--addr',
      `127.0.0.1:${port}`,
      '--domain',
      'api',
      '--descriptor',
      'user=a',
      '--timeout-ms',
      '2000',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^sluice: request failed: 14 UNAVAILABLE: .*ECONNREFUSED/);
    // grpc-js ends its message with an empty "Resolution note: "; sluice drops it.
    expect(result.stderr).not.toMatch(/Resolution note/);
  });

  it('says a plaintext port is plaintext when queried with --tls', async () => {
    const result = await runCli([
      'query',
      '--addr',
      `127.0.0.1:${server.grpcPort}`,
      '--tls',
      '--domain',
      'api',
      '--descriptor',
      'user=a',
    ]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(
      `\n127.0.0.1:${server.grpcPort} did not answer the TLS handshake: it looks like a plaintext port; drop --tls, --cacert, --cert and --key\n`,
    );
  });
});

describe('sluice check', () => {
  it('accepts the bundled demo rules', async () => {
    const result = await runCli(['check', path.join(REPO_ROOT, 'envoy', 'ratelimit')]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^ok: \d+ file\(s\)/);
  });

  it('says in one line what counts differently for rules written for the reference', async () => {
    const reference = await ruleDir({
      'rl.yaml':
        'domain: rl\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 3}\n' +
        '  - key: b\n    rate_limit: {unlimited: true}\n' +
        '  - key: c\n    descriptors:\n      - key: d\n        rate_limit: {unit: hour, requests_per_unit: 9}\n',
    });
    const result = await runCli(['check', reference]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout.split('\n')).toEqual([
      'ok: 1 file(s), domains: rl',
      'note: 2 limit(s) name no algorithm and count with a sliding window (DEFAULT_ALGORITHM; ' +
        'the reference: fixed windows, which DEFAULT_ALGORITHM=fixed_window gives); a rejected ' +
        'request charges nothing (the reference charges it). docs/compatibility.md lists every ' +
        'difference',
      '',
    ]);
    const fixed = await runCli(['check', reference], { DEFAULT_ALGORITHM: 'fixed_window' });
    expect(fixed.stdout).toMatch(/count with fixed windows, as the reference .* charges nothing/);

    // Rules that choose their algorithm: the author knows; only the ok line.
    const chosen = await ruleDir({
      's.yaml':
        'domain: s\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window}\n',
    });
    expect((await runCli(['check', chosen])).stdout).toBe('ok: 1 file(s), domains: s\n');
  });

  it('is not failed by serve-only settings that are invalid', async () => {
    const result = await runCli(['check', path.join(REPO_ROOT, 'envoy', 'ratelimit')], {
      BACKEND_TYPE: 'redis',
      GRPC_PORT: 'not-a-port',
    });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('exits 1 on paths that define no domain (an empty directory, non-YAML files only)', async () => {
    const empty = await ruleDir({
      'README.md': '# not a rule file\n',
      '.hidden.yaml': 'domain: h\n',
    });
    const result = await runCli(['check', empty]);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `no rate limit rules in ${empty}: 0 rule file(s) found (every *.yaml and *.yml file of a directory is read; dot files are ignored), no domain defined; served as is, nothing would be rate limited\n`,
    );
  });

  it('exits 1 and names the file, the YAML path and the reason of every problem', async () => {
    const dir = await ruleDir({
      'a.yaml':
        'domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
      'b.yaml': 'domain: b\ndescriptors:\n  - key: k\n    colour: red\n',
    });
    const result = await runCli(['check', dir]);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(path.join(dir, 'a.yaml'));
    expect(result.stderr).toMatch(
      /a\.yaml: descriptors\[0\]\.rate_limit\.unit: invalid rate limit unit 'fortnight'/,
    );
    expect(result.stderr).toMatch(
      /b\.yaml: descriptors\[0\](\.colour)?: config error, unknown key 'colour'/,
    );
  });
});

describe('start-up errors stop the process with one clear message', () => {
  it('lists every invalid setting at once', async () => {
    const result = await runCli(['serve'], {
      GRPC_PORT: 'eighty',
      LOG_LEVEL: 'loud',
      SHADOW_MODE: 'maybe',
      BACKEND_TYPE: 'redis',
    });
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).toBe('sluice: invalid settings:');
    expect(result.stderr).toMatch(/GRPC_PORT="eighty": expected an integer/);
    expect(result.stderr).toMatch(/LOG_LEVEL="loud"/);
    expect(result.stderr).toMatch(/SHADOW_MODE="maybe": expected true or false/);
    expect(result.stderr).toMatch(/REDIS_URL must be set when BACKEND_TYPE=redis/);
  });

  it('checks a setting of the store not chosen: REDIS_TIMEOUT=banana on the memory store', async () => {
    const result = await runCli(['serve'], {
      GRPC_PORT: String(await freePort()),
      PORT: String(await freePort()),
      DEBUG_PORT: String(await freePort()),
      REDIS_TIMEOUT: 'banana',
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      'sluice: invalid settings:\n  - REDIS_TIMEOUT="banana": expected a positive duration such as 200ms, 2s or 1m30s\n',
    );
  });

  it('refuses to start on invalid rules, naming the file', async () => {
    const dir = await ruleDir({ 'x.yaml': 'domain: ""\n' });
    const result = await runCli(['serve', '--config', dir], {
      GRPC_PORT: String(await freePort()),
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /invalid rate limit config:\n.*x\.yaml: .*config file cannot have empty domain/,
    );
  });
});

describe('graceful shutdown', () => {
  const group = useProcessGroup();

  it('stops on SIGINT (Ctrl-C) the same way, with exit code 0', async () => {
    const { proc, grpcPort } = await startSluice(group, {
      grpcPort: await freePort(),
      env: { LOG_LEVEL: 'info' },
    });
    const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
    try {
      const answer = await client.shouldRateLimit(rlsRequest('edge', [{ generic_key: 'default' }]));
      expect(answer.overall_code).toBe('OK');
    } finally {
      client.close();
    }
    proc.child.kill('SIGINT');
    await waitFor('sluice to exit after SIGINT', () => proc.hasExited(), { timeoutMs: 15_000 });
    expect(await proc.exited).toBe(0);
    expect(proc.output()).toMatch(/"signal":"SIGINT"/);
  });

  it('finishes calls in flight at SIGTERM, refuses new connections, and exits 0', async () => {
    const calls = 20;
    const limit = 15;
    const dir = await ruleDir({
      'g.yaml': `domain: g\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: ${limit}}\n`,
    });
    const { proc, grpcPort } = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      // The shutdown notice is logged at info. The grace period is far longer than the test
      // needs, so only a shutdown that does not wait can cut the calls short.
      env: { LOG_LEVEL: 'info', SHUTDOWN_GRACE_MS: '15000' },
    });
    const method = envoyRlsMethod();
    const frame = grpcFrame(method.requestSerialize(rlsRequest('g', [{ k: 'v' }])));
    const split = Math.floor(frame.length / 2);
    const session = await connectHttp2(`http://127.0.0.1:${grpcPort}`, 5_000);
    try {
      // Each call sends its headers and half of its message, so the server holds every one of
      // them open, waiting for the rest, when the signal arrives.
      const pending = Array.from({ length: calls }, () =>
        startRawCall(session, RLS_METHOD_PATH, 20_000),
      );
      await Promise.all(pending.map((call) => call.write(frame.subarray(0, split))));
      await pingHttp2(session, 5_000);

      proc.child.kill('SIGTERM');
      await waitFor(
        'sluice to log that it is shutting down',
        () => /shutting down/.test(proc.output()),
        {
          timeoutMs: 5_000,
          intervalMs: 10,
          onTimeout: () => `sluice output:\n${proc.output()}`,
        },
      );
      expect(proc.hasExited()).toBe(false);

      // The notice is logged just before app.close(), whose synchronous part closes the listening
      // socket (grpc-js tryShutdown), and the parent needs far longer to see it and dial; a
      // connection that still raced into the accept queue is reset when the socket closes. So a
      // new call fails UNAVAILABLE while the process is still finishing the old ones.
      const late = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
      try {
        await expect(
          late.shouldRateLimit(rlsRequest('g', [{ k: 'v' }]), 2_000),
        ).rejects.toMatchObject({
          code: grpc.status.UNAVAILABLE,
        });
      } finally {
        late.close();
      }

      for (const call of pending) call.end(frame.subarray(split));
      const results = await Promise.all(pending.map((call) => call.result));
      const codes = results.map((result) => {
        expect(result).toMatchObject({ failure: undefined, httpStatus: 200, grpcStatus: '0' });
        const messages = parseGrpcFrames(result.body);
        expect(messages).toHaveLength(1);
        return (method.responseDeserialize(messages[0]!) as EnvoyResponse).overall_code;
      });
      expect(codes.filter((code) => code === 'OK')).toHaveLength(limit);
      expect(codes.filter((code) => code === 'OVER_LIMIT')).toHaveLength(calls - limit);

      await waitFor('sluice to exit', () => proc.hasExited(), { timeoutMs: 10_000 });
      expect(await proc.exited).toBe(0);
    } finally {
      session.destroy();
    }
  });
});

/** Path of Envoy's ShouldRateLimit method. */
const RLS_METHOD_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** ShouldRateLimit's (de)serializers, from Envoy's own rls.proto. */
function envoyRlsMethod(): grpc.MethodDefinition<unknown, unknown> {
  const service = loadEnvoyRls()[
    'envoy.service.ratelimit.v3.RateLimitService'
  ] as grpc.ServiceDefinition;
  return service.ShouldRateLimit!;
}
