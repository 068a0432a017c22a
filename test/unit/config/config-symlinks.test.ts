/**
 * Issue 22, item 9: rule files are read only from inside the configured directories. A symbolic
 * link to a file elsewhere (a secret) is refused with a clear problem, and its content never
 * reaches a problem, a log line or `sluice check`; Kubernetes ConfigMap links (`x.yaml ->
 * ..data/x.yaml`, `..data -> ..2024_...`) stay inside the mount and load. Offending values are
 * quoted only in a short, cut form.
 */
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { checkConfig, loadSnapshot } from '../../../src/config/load.js';
import { MAX_QUOTED_LENGTH, quote, shortText } from '../../../src/config/parse.js';
import { validateFiles } from '../../../src/config/validate.js';
import { ConfigError } from '../../../src/errors.js';

const SECRET =
  'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJzZWNyZXQtdG9rZW4tdmFsdWUifQ.c2lnbmF0dXJl';
const RULES =
  'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-links-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('rule directory symlinks', () => {
  it('a link to a file outside the directory is refused, without its content', async () => {
    const secret = join(dir, 'secret-token');
    await writeFile(secret, `${SECRET}\n`);
    const config = join(dir, 'config');
    await mkdir(config);
    await writeFile(join(config, 'ok.yaml'), RULES);
    await symlink(secret, join(config, 'leak.yaml'));

    const check = await checkConfig([config]);
    expect(check.ok).toBe(false);
    expect(check.problems).toHaveLength(1);
    expect(check.problems[0]!.file).toBe(join(config, 'leak.yaml'));
    expect(check.problems[0]!.message).toMatch(
      /symbolic link to a file outside the config directory/,
    );
    expect(JSON.stringify(check)).not.toContain(SECRET.slice(0, 40));

    const error = await loadSnapshot([config]).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as ConfigError).message)).not.toContain(SECRET.slice(0, 40));
  });

  it('a relative link climbing out of the directory is refused too', async () => {
    await writeFile(join(dir, 'outside.yaml'), RULES);
    const config = join(dir, 'config');
    await mkdir(config);
    await symlink('../outside.yaml', join(config, 'climb.yaml'));
    const check = await checkConfig([config]);
    expect(check.ok).toBe(false);
    expect(check.problems[0]!.message).toMatch(/outside the config directory/);
  });

  it('Kubernetes ConfigMap links (..data) load', async () => {
    const config = join(dir, 'config');
    await mkdir(join(config, '..2024_01_01_00_00_00.1'), { recursive: true });
    await writeFile(join(config, '..2024_01_01_00_00_00.1', 'rules.yaml'), RULES);
    await symlink('..2024_01_01_00_00_00.1', join(config, '..data'));
    await symlink(join('..data', 'rules.yaml'), join(config, 'rules.yaml'));
    const snapshot = await loadSnapshot([config]);
    expect([...snapshot.domains.keys()]).toEqual(['d']);
    expect(snapshot.files).toEqual([join(config, 'rules.yaml')]);
  });

  it('a configured directory that is itself a link keeps its inside links', async () => {
    const release = join(dir, 'release-1');
    await mkdir(join(release, '.files'), { recursive: true });
    await writeFile(join(release, '.files', 'rules.yaml'), RULES);
    await symlink(join('.files', 'rules.yaml'), join(release, 'rules.yaml'));
    await symlink(release, join(dir, 'current'));
    const snapshot = await loadSnapshot([join(dir, 'current')]);
    expect([...snapshot.domains.keys()]).toEqual(['d']);
  });

  it('a file named directly in the config paths is read wherever it is', async () => {
    await writeFile(join(dir, 'outside.yaml'), RULES);
    await mkdir(join(dir, 'config'));
    await symlink(join(dir, 'outside.yaml'), join(dir, 'config', 'named.yaml'));
    const snapshot = await loadSnapshot([join(dir, 'config', 'named.yaml')]);
    expect([...snapshot.domains.keys()]).toEqual(['d']);
  });
});

describe('offending values are quoted short', () => {
  it('shortText keeps short text and cuts long text to a prefix and its length', () => {
    expect(MAX_QUOTED_LENGTH).toBe(32);
    expect(shortText('a'.repeat(32))).toBe('a'.repeat(32));
    expect(shortText('a'.repeat(33))).toBe(`${'a'.repeat(24)}… (33 characters)`);
    expect(quote('sliding_windw')).toBe("'sliding_windw'");
  });

  it('a secret-like scalar file, unknown key, unit or algorithm never appears whole', () => {
    const long = `x${SECRET}`;
    const { problems } = validateFiles([
      { name: 'scalar.yaml', content: `${SECRET}\n` },
      {
        name: 'keys.yaml',
        content: [
          'domain: e',
          `${long}: 1`,
          'descriptors:',
          '  - key: k',
          `    rate_limit: {unit: ${long}, requests_per_unit: 1, algorithm: ${long}}`,
          '',
        ].join('\n'),
      },
    ]);
    expect(problems.length).toBeGreaterThanOrEqual(4);
    const text = JSON.stringify(problems);
    expect(text).not.toContain(SECRET.slice(0, 30));
    expect(problems[0]!.message).toContain(
      `not '${SECRET.slice(0, 24)}… (${SECRET.length} characters)'`,
    );
    expect(text).toContain(`unknown key '${long.slice(0, 24)}…`);
  });
});
