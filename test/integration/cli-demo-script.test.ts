/**
 * scripts/demo-envoy.sh checks that sluice answers before it starts Envoy: Envoy fails open, so a
 * demo against a stopped sluice would show only 200s. A stand-in Envoy records whether it ran.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  ensureBuilt,
  freePort,
  REPO_ROOT,
  startSluice,
  useProcessGroup,
} from '../helpers/processes.js';

beforeAll(() => ensureBuilt());

/** A fake envoy binary that leaves `marker` behind and exits 0. */
async function fakeEnvoy(): Promise<{ bin: string; marker: string }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-fake-envoy-'));
  const bin = path.join(dir, 'envoy');
  const marker = path.join(dir, 'ran');
  await writeFile(bin, `#!/bin/sh\ntouch '${marker}'\nexit 0\n`);
  await chmod(bin, 0o755);
  return { bin, marker };
}

async function runDemo(grpcPort: number, envoyBin: string) {
  return spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'demo-envoy.sh')], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 30_000,
    env: {
      ...process.env,
      ENVOY_BIN: envoyBin,
      GRPC_PORT: String(grpcPort),
      ENVOY_PORT: String(await freePort()),
      ENVOY_ADMIN_PORT: String(await freePort()),
      UPSTREAM_PORT: String(await freePort()),
    },
  });
}

describe('scripts/demo-envoy.sh', () => {
  const group = useProcessGroup();

  it('refuses to start Envoy when sluice is not reachable, and says how to start it', async () => {
    const envoy = await fakeEnvoy();
    const result = await runDemo(await freePort(), envoy.bin);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(/sluice is not answering on 127\.0\.0\.1:\d+/);
    expect(result.stderr).toMatch(/start it first in another terminal: npm start/);
    expect(existsSync(envoy.marker)).toBe(false);
  });

  it('starts Envoy once sluice answers its health check', async () => {
    const { grpcPort } = await startSluice(group, { grpcPort: await freePort() });
    const envoy = await fakeEnvoy();
    const result = await runDemo(grpcPort, envoy.bin);
    expect(result.stderr).not.toMatch(/not answering/);
    expect(result.status).toBe(0);
    expect(existsSync(envoy.marker)).toBe(true);
  });
});
