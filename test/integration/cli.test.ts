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
  type SluiceProcess,
} from '../helpers/processes.js';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
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
      env: { RUNTIME_ROOT: root, RUNTIME_SUBDIRECTORY: 'ratelimit' },
    });
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
    expect(result.stderr).toMatch(/sluice: request failed: /);
  });
});

describe('sluice check', () => {
  it('accepts the bundled demo rules', async () => {
    const result = await runCli(['check', path.join(REPO_ROOT, 'envoy', 'ratelimit')]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^ok: \d+ file\(s\)/);
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
    expect(result.stderr).toMatch(/BACKEND_TYPE="redis": only "memory"/);
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

  it('finishes in-flight calls on SIGTERM and exits 0', async () => {
    const dir = await ruleDir({
      'g.yaml':
        'domain: g\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100000}\n',
    });
    const { proc, grpcPort } = await startSluice(group, {
      configDir: dir,
      grpcPort: await freePort(),
      env: { LOG_LEVEL: 'info' },
    });
    const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
    try {
      const outcomes: (string | number)[] = [];
      let answered = 0;
      let signalled = false;
      // Up to 400 calls, 40 at a time; SIGTERM goes out after 100 answers while calls are in flight.
      const worker = async (): Promise<void> => {
        for (let i = 0; i < 10; i++) {
          try {
            const response = await client.shouldRateLimit(rlsRequest('g', [{ k: 'v' }]), 5000);
            outcomes.push(response.overall_code);
          } catch (err) {
            outcomes.push((err as grpc.ServiceError).code);
          }
          if (++answered >= 100 && !signalled) {
            signalled = true;
            proc.child.kill('SIGTERM');
          }
        }
      };
      await Promise.all(Array.from({ length: 40 }, worker));
      const code = await proc.exited;
      expect(code).toBe(0);
      expect(signalled).toBe(true);
      // Every call was either answered in full or refused because the server had stopped
      // accepting; none was cut off mid-flight (CANCELLED / INTERNAL).
      const ok = outcomes.filter((o) => o === 'OK').length;
      const refused = outcomes.filter((o) => o === grpc.status.UNAVAILABLE).length;
      expect(ok).toBeGreaterThanOrEqual(100);
      expect(ok + refused).toBe(400);
      expect(proc.output()).toMatch(/shutting down/);
    } finally {
      client.close();
    }
  });
});
