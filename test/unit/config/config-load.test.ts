import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { mkdtemp, mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  checkConfig,
  collectConfigFiles,
  isIgnoredName,
  loadSnapshot,
} from '../../../src/config/load.js';
import { ConfigError } from '../../../src/errors.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/config/', import.meta.url));
const VALID = join(FIXTURES, 'valid');
const INVALID = join(FIXTURES, 'invalid');

function rules(domain: string, requestsPerUnit: number): string {
  return `domain: ${domain}\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: ${requestsPerUnit}}\n`;
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-config-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function rejection(promise: Promise<unknown>): Promise<ConfigError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ConfigError);
  return error as ConfigError;
}

describe('collectConfigFiles', () => {
  it('takes *.yaml and *.yml files, recursively, sorted, skipping dot and other files', async () => {
    expect(await collectConfigFiles([VALID])).toEqual([
      join(VALID, 'edge.yaml'),
      join(VALID, 'internal.yml'),
      join(VALID, 'nested', 'messaging.yaml'),
    ]);
  });

  it('skips editor swap, backup and lock files and dot directories', async () => {
    const names = [
      'a.yaml',
      'b.yml',
      '.hidden.yaml',
      '.a.yaml.swp',
      'a.yaml.swp',
      'a.yaml~',
      '#a.yaml#',
      '.#a.yaml',
      'c.json',
      'README',
    ];
    for (const name of names) await writeFile(join(dir, name), rules('x', 1));
    await mkdir(join(dir, '..2024_01_01'));
    await writeFile(join(dir, '..2024_01_01', 'd.yaml'), rules('x', 1));
    await mkdir(join(dir, 'sub'));
    await writeFile(join(dir, 'sub', 'e.yaml'), rules('x', 1));
    expect(await collectConfigFiles([dir])).toEqual([
      join(dir, 'a.yaml'),
      join(dir, 'b.yml'),
      join(dir, 'sub', 'e.yaml'),
    ]);
    expect(isIgnoredName('a.yaml.swp')).toBe(true);
    expect(isIgnoredName('4913')).toBe(true);
    expect(isIgnoredName('a.yaml')).toBe(false);
  });

  it('follows symlinked files inside the directory but not symlinked directories', async () => {
    const root = join(dir, 'root');
    await mkdir(root);
    await mkdir(join(root, 'real.d'));
    await writeFile(join(root, 'real.d', 'a.yaml'), rules('a', 1));
    await symlink(join(root, 'real.d', 'a.yaml'), join(root, 'link.yaml'));
    await symlink(join(root, 'real.d'), join(root, 'linked-dir'));
    await symlink(join(dir, 'nowhere.yaml'), join(root, 'dangling.yaml'));
    expect(await collectConfigFiles([root])).toEqual([
      join(root, 'link.yaml'),
      join(root, 'real.d', 'a.yaml'),
    ]);
  });

  it('takes a file path as is and removes duplicates', async () => {
    const file = join(dir, 'rules.conf');
    await writeFile(file, rules('a', 1));
    await writeFile(join(dir, 'b.yaml'), rules('b', 1));
    expect(await collectConfigFiles([file, dir, join(dir, 'b.yaml')])).toEqual([
      join(dir, 'b.yaml'),
      file,
    ]);
  });

  it('names every missing path in one ConfigError', async () => {
    const error = await rejection(
      collectConfigFiles([join(dir, 'missing'), VALID, join(dir, 'gone.yaml')]),
    );
    expect(error.problems.map((p) => p.file)).toEqual([
      join(dir, 'missing'),
      join(dir, 'gone.yaml'),
    ]);
    expect(error.problems[0]?.message).toMatch(/^config path does not exist/);
  });
});

describe('loadSnapshot', () => {
  it('builds a snapshot from a directory', async () => {
    const snapshot = await loadSnapshot([VALID]);
    expect([...snapshot.domains.keys()].sort()).toEqual(['edge', 'internal', 'messaging']);
    expect(snapshot.files).toHaveLength(3);
    expect(
      snapshot.getLimit('messaging', {
        entries: [
          { key: 'message_type', value: 'marketing' },
          { key: 'to_number', value: '2061111111' },
        ],
        limit: undefined,
        hitsAddend: undefined,
      })?.rule.requestsPerUnit,
    ).toBe(5);
  });

  it('reports missing paths and every file problem together', async () => {
    const error = await rejection(loadSnapshot([join(dir, 'missing'), INVALID]));
    expect(error.problems.map((p) => `${p.file}: ${p.path}`)).toEqual([
      `${join(dir, 'missing')}: `,
      `${join(INVALID, 'a.yaml')}: descriptors[0].rate_limit.unit`,
      `${join(INVALID, 'a.yaml')}: descriptors[1].key`,
      `${join(INVALID, 'b.yaml')}: descriptors[0].rate_limit.unit`,
      `${join(INVALID, 'b.yaml')}: domain`,
    ]);
  });

  it('merges domains when asked', async () => {
    await writeFile(join(dir, 'a.yaml'), rules('edge', 1));
    await writeFile(
      join(dir, 'b.yaml'),
      'domain: edge\ndescriptors: [{key: ip, rate_limit: {unit: hour, requests_per_unit: 2}}]\n',
    );
    await rejection(loadSnapshot([dir]));
    const snapshot = await loadSnapshot([dir], { mergeDomainConfigs: true });
    expect(snapshot.dump()).toHaveLength(2);
  });
});

describe('checkConfig', () => {
  it('reports a valid set', async () => {
    expect(await checkConfig([VALID])).toEqual({
      ok: true,
      problems: [],
      warnings: [],
      files: [
        join(VALID, 'edge.yaml'),
        join(VALID, 'internal.yml'),
        join(VALID, 'nested', 'messaging.yaml'),
      ],
      domains: ['edge', 'internal', 'messaging'],
      limitsWithDefaultAlgorithm: expect.any(Number),
    });
  });

  it('reports every problem without throwing', async () => {
    const result = await checkConfig([INVALID, join(dir, 'missing')]);
    expect(result.ok).toBe(false);
    expect(result.files).toEqual([join(INVALID, 'a.yaml'), join(INVALID, 'b.yaml')]);
    expect(result.domains).toEqual(['edge']);
    expect(result.problems).toHaveLength(5);
    expect(result.problems[0]?.file).toBe(join(dir, 'missing'));
  });

  it('is ok for an empty directory', async () => {
    expect(await checkConfig([dir])).toEqual({
      ok: true,
      problems: [],
      warnings: [],
      files: [],
      domains: [],
      limitsWithDefaultAlgorithm: 0,
    });
  });
});
