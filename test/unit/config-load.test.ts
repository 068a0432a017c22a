import { describe, it, expect, vi, beforeEach, afterEach } from 'vitest';
import { mkdtemp, mkdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  checkConfig,
  collectConfigFiles,
  isIgnoredName,
  loadSnapshot,
  watchConfig,
  type ConfigSnapshot,
  type ConfigWatcher,
} from '../../src/config/index.js';
import { ConfigError } from '../../src/errors.js';
import type { RequestDescriptor } from '../../src/model.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/config/', import.meta.url));
const VALID = join(FIXTURES, 'valid');
const INVALID = join(FIXTURES, 'invalid');

function rules(domain: string, requestsPerUnit: number): string {
  return `domain: ${domain}\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: ${requestsPerUnit}}\n`;
}

function user(value: string): RequestDescriptor {
  return { entries: [{ key: 'user', value }], limit: undefined, hitsAddend: undefined };
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

  it('follows symlinked files but not symlinked directories', async () => {
    await mkdir(join(dir, 'real'));
    await writeFile(join(dir, 'real', 'a.yaml'), rules('a', 1));
    const root = join(dir, 'root');
    await mkdir(root);
    await symlink(join(dir, 'real', 'a.yaml'), join(root, 'link.yaml'));
    await symlink(join(dir, 'real'), join(root, 'linked-dir'));
    await symlink(join(dir, 'nowhere.yaml'), join(root, 'dangling.yaml'));
    expect(await collectConfigFiles([root])).toEqual([join(root, 'link.yaml')]);
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
    });
  });
});

describe('watchConfig', () => {
  interface Recorder {
    snapshots: ConfigSnapshot[];
    errors: Error[];
    watcher: ConfigWatcher;
  }

  function start(paths: string[], pollIntervalMs = 0): Recorder {
    const recorder: Recorder = { snapshots: [], errors: [], watcher: { close() {} } };
    recorder.watcher = watchConfig({
      paths,
      debounceMs: 20,
      pollIntervalMs,
      onSnapshot: (snapshot) => recorder.snapshots.push(snapshot),
      onError: (error) => recorder.errors.push(error),
    });
    return recorder;
  }

  const waitOptions = { timeout: 5000, interval: 20 };

  // Lets the watcher record its baseline and start its fs watchers before the test edits files.
  async function settle(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 150));
  }

  it('reloads on edit, reports a broken file, drops a removed file’s domain, and stops on close', async () => {
    await writeFile(join(dir, 'a.yaml'), rules('edge', 1));
    await writeFile(join(dir, 'b.yaml'), rules('other', 1));
    const recorder = start([dir]);
    try {
      await settle();

      await writeFile(join(dir, 'a.yaml'), rules('edge', 2));
      await vi.waitFor(() => {
        expect(recorder.snapshots.at(-1)?.getLimit('edge', user('u'))?.rule.requestsPerUnit).toBe(
          2,
        );
      }, waitOptions);

      await writeFile(
        join(dir, 'a.yaml'),
        'domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n',
      );
      await vi.waitFor(() => {
        const error = recorder.errors.at(-1);
        expect(error).toBeInstanceOf(ConfigError);
        expect((error as ConfigError).problems).toContainEqual(
          expect.objectContaining({
            file: join(dir, 'a.yaml'),
            path: 'descriptors[0].rate_limit.unit',
          }),
        );
      }, waitOptions);

      await rm(join(dir, 'a.yaml'));
      await vi.waitFor(() => {
        const latest = recorder.snapshots.at(-1);
        expect(latest?.domains.has('edge')).toBe(false);
        expect(latest?.domains.has('other')).toBe(true);
      }, waitOptions);

      await writeFile(join(dir, 'c.yaml'), rules('added', 7));
      await vi.waitFor(() => {
        expect(recorder.snapshots.at(-1)?.getLimit('added', user('u'))?.rule.requestsPerUnit).toBe(
          7,
        );
      }, waitOptions);
    } finally {
      recorder.watcher.close();
    }

    const seen = recorder.snapshots.length + recorder.errors.length;
    await writeFile(join(dir, 'b.yaml'), rules('other', 9));
    await settle();
    expect(recorder.snapshots.length + recorder.errors.length).toBe(seen);
  });

  it('ignores editor swap files', async () => {
    await writeFile(join(dir, 'a.yaml'), rules('edge', 1));
    const recorder = start([dir]);
    try {
      await settle();
      await writeFile(join(dir, '.a.yaml.swp'), 'garbage');
      await writeFile(join(dir, 'a.yaml~'), 'garbage');
      await settle();
      expect(recorder.snapshots).toHaveLength(0);
      expect(recorder.errors).toHaveLength(0);
    } finally {
      recorder.watcher.close();
    }
  });

  it('follows a Kubernetes-style ..data symlink swap', async () => {
    await mkdir(join(dir, '..v1'));
    await writeFile(join(dir, '..v1', 'rules.yaml'), rules('edge', 1));
    await symlink('..v1', join(dir, '..data'));
    await symlink(join('..data', 'rules.yaml'), join(dir, 'rules.yaml'));
    expect((await loadSnapshot([dir])).getLimit('edge', user('u'))?.rule.requestsPerUnit).toBe(1);

    const recorder = start([dir]);
    try {
      await settle();
      await mkdir(join(dir, '..v2'));
      await writeFile(join(dir, '..v2', 'rules.yaml'), rules('edge', 2));
      await symlink('..v2', join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data'));
      await rm(join(dir, '..v1'), { recursive: true });
      await vi.waitFor(() => {
        expect(recorder.snapshots.at(-1)?.getLimit('edge', user('u'))?.rule.requestsPerUnit).toBe(
          2,
        );
      }, waitOptions);
    } finally {
      recorder.watcher.close();
    }
  });

  it('picks up a directory that appears later, through the poll', async () => {
    const deep = join(dir, 'later', 'config');
    const recorder = start([deep], 100);
    try {
      await settle();
      await mkdir(deep, { recursive: true });
      await writeFile(join(deep, 'rules.yaml'), rules('edge', 3));
      await vi.waitFor(() => {
        expect(recorder.snapshots.at(-1)?.getLimit('edge', user('u'))?.rule.requestsPerUnit).toBe(
          3,
        );
      }, waitOptions);
    } finally {
      recorder.watcher.close();
    }
  });
});
