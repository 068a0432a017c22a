/**
 * docker-compose.redis.yml, the README's "two sluice replicas on Redis" variant: accepted by the
 * compose CLI together with docker-compose.yml (skipped with a reason locally when no compose CLI
 * is installed, failing under CI), and wired so both replicas answer to `sluice` and count in
 * the one Redis with settings sluice accepts.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';
import { REPO_ROOT, inCi } from '../helpers/processes.js';

const base = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, any>;
};
const variant = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.redis.yml'), 'utf8')) as {
  services: Record<string, any>;
};

function composeCli(): { command: string; args: string[] } | undefined {
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

const cli = composeCli();
const skip = cli === undefined && !inCi();
if (skip) console.warn('[docker-compose.redis.yml config] SKIPPED: no compose CLI found');

describe('docker-compose.redis.yml', () => {
  it.skipIf(skip)('is accepted on top of docker-compose.yml (config -q)', () => {
    if (cli === undefined) throw new Error('no compose CLI (under CI a missing one fails)');
    const result = spawnSync(
      cli.command,
      [...cli.args, '-f', 'docker-compose.yml', '-f', 'docker-compose.redis.yml', 'config', '-q'],
      { cwd: REPO_ROOT, encoding: 'utf8', timeout: 30_000 },
    );
    expect(result.status, `${result.stdout}${result.stderr}`).toBe(0);
  });

  it('runs two sluice replicas that answer to `sluice` and share one Redis', () => {
    const first = {
      ...base.services['sluice'].environment,
      ...variant.services['sluice'].environment,
    };
    const second = variant.services['sluice-2'].environment;
    for (const env of [first, second]) {
      const settings = loadSettings(
        Object.fromEntries(
          Object.entries(env as Record<string, unknown>).map(([k, v]) => [k, String(v)]),
        ),
      );
      expect(settings.backendType).toBe('redis');
      expect(settings.redis?.main.url).toBe('redis:6379');
      expect(settings.config.paths).toEqual(['/data/ratelimit/config']);
    }
    expect(variant.services['sluice-2'].image).toBe(base.services['sluice'].image);
    expect(variant.services['sluice-2'].networks.default.aliases).toContain('sluice');
    expect(variant.services['sluice-2'].volumes).toEqual(base.services['sluice'].volumes);
    expect(variant.services['redis'].healthcheck.test).toBeDefined();
    expect(variant.services['sluice-2'].healthcheck.test).toEqual(
      base.services['sluice'].healthcheck.test,
    );
  });
});
