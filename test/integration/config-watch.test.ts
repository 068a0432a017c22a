// watchConfig against the real file system: inotify events, renames and symlink swaps. The poll is
// off in every test but the last, so a passing test shows that an event, not the poll, caused the
// reload.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { watch } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSnapshot } from '../../src/config/load.js';
import type { ConfigSnapshot } from '../../src/config/types.js';
import { type ConfigWatcher, watchConfig } from '../../src/config/watch.js';
import { ConfigError } from '../../src/errors.js';
import type { RequestDescriptor } from '../../src/model.js';

function rules(domain: string, requestsPerUnit: number): string {
  return `domain: ${domain}\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: ${requestsPerUnit}}\n`;
}

function user(value: string): RequestDescriptor {
  return { entries: [{ key: 'user', value }], limit: undefined, hitsAddend: undefined };
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-watch-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

interface Recorder {
  snapshots: ConfigSnapshot[];
  errors: Error[];
  watcher: ConfigWatcher;
}

const DEBOUNCE_MS = 20;

/** Start a watch and wait until its baseline is recorded and its fs watchers are in place. */
async function start(paths: string[], pollIntervalMs = 0): Promise<Recorder> {
  const snapshots: ConfigSnapshot[] = [];
  const errors: Error[] = [];
  const watcher = watchConfig({
    paths,
    debounceMs: DEBOUNCE_MS,
    pollIntervalMs,
    onSnapshot: (snapshot) => snapshots.push(snapshot),
    onError: (error) => errors.push(error),
  });
  await watcher.ready;
  return { snapshots, errors, watcher };
}

const waitOptions = { timeout: 5000, interval: 20 };
const realSetTimeout = setTimeout;
const realClearTimeout = clearTimeout;

/**
 * For the checks that something does NOT happen: make the change with `setTimeout` faked, wait
 * until a watcher of our own on the same directory has seen the event for `lastName` (libuv hands
 * each event of a directory to all of its watchers before the next, so the watch under test has
 * had every earlier event by then, and one macrotask later this one too), and return how many
 * timers are pending. A reload is always scheduled through the debounce timer (and the poll is
 * off), so 0 means no reload is coming.
 */
async function pendingReloadsAfter(
  watchedDir: string,
  lastName: string,
  change: () => Promise<void>,
): Promise<number> {
  let markSeen: () => void = () => undefined;
  const seen = new Promise<void>((resolve) => (markSeen = resolve));
  const probe = watch(watchedDir, (_event, name) => {
    if (name === lastName) markSeen();
  });
  // Not vi.waitFor: it advances fake timers, which would fire the very timer we look for.
  let expired: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    expired = realSetTimeout(
      () => reject(new Error(`no fs event for ${lastName} within 5 s`)),
      5_000,
    );
  });
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  try {
    await change();
    await Promise.race([seen, timeout]);
    await new Promise((resolve) => setImmediate(resolve));
    return vi.getTimerCount();
  } finally {
    realClearTimeout(expired);
    probe.close();
    vi.useRealTimers();
  }
}

function limitOf(recorder: Recorder, domain: string): number | undefined {
  return recorder.snapshots.at(-1)?.getLimit(domain, user('u'))?.rule.requestsPerUnit;
}

describe('watchConfig', () => {
  it('reloads on edit, reports a broken file, drops a removed file’s domain, and stops on close', async () => {
    await writeFile(join(dir, 'a.yaml'), rules('edge', 1));
    await writeFile(join(dir, 'b.yaml'), rules('other', 1));
    const recorder = await start([dir]);
    try {
      await writeFile(join(dir, 'a.yaml'), rules('edge', 2));
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(2), waitOptions);

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
      await vi.waitFor(() => expect(limitOf(recorder, 'added')).toBe(7), waitOptions);
    } finally {
      recorder.watcher.close();
    }

    const seen = recorder.snapshots.length + recorder.errors.length;
    const pending = await pendingReloadsAfter(dir, 'b.yaml', () =>
      writeFile(join(dir, 'b.yaml'), rules('other', 9)),
    );
    expect(pending).toBe(0);
    expect(recorder.snapshots.length + recorder.errors.length).toBe(seen);
  });

  it('ignores editor swap files', async () => {
    await writeFile(join(dir, 'a.yaml'), rules('edge', 1));
    const recorder = await start([dir]);
    try {
      const pending = await pendingReloadsAfter(dir, 'a.yaml~', async () => {
        await writeFile(join(dir, '.a.yaml.swp'), 'garbage');
        await writeFile(join(dir, 'a.yaml~'), 'garbage');
      });
      expect(pending).toBe(0);
      expect(recorder.snapshots).toHaveLength(0);
      expect(recorder.errors).toHaveLength(0);
      // The watch is alive: a real edit right after is seen.
      await writeFile(join(dir, 'a.yaml'), rules('edge', 4));
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(4), waitOptions);
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

    const recorder = await start([dir]);
    try {
      await mkdir(join(dir, '..v2'));
      await writeFile(join(dir, '..v2', 'rules.yaml'), rules('edge', 2));
      await symlink('..v2', join(dir, '..data_tmp'));
      await rename(join(dir, '..data_tmp'), join(dir, '..data'));
      await rm(join(dir, '..v1'), { recursive: true });
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(2), waitOptions);
    } finally {
      recorder.watcher.close();
    }
  });

  it('follows a swap of a symlink above the rule directory (the reference’s RUNTIME_ROOT)', async () => {
    // $RUNTIME_ROOT is `current`, a link to a versioned tree, republished by an atomic rename.
    for (const [version, limit] of [
      ['v1', 1],
      ['v2', 2],
    ] as const) {
      await mkdir(join(dir, version, 'ratelimit', 'config'), { recursive: true });
      await writeFile(
        join(dir, version, 'ratelimit', 'config', 'rules.yaml'),
        rules('edge', limit),
      );
    }
    await symlink('v1', join(dir, 'current'));
    const recorder = await start([join(dir, 'current', 'ratelimit', 'config')]);
    try {
      await symlink('v2', join(dir, 'current.tmp'));
      await rename(join(dir, 'current.tmp'), join(dir, 'current'));
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(2), waitOptions);

      // And back: the new target's directories are watched after the swap.
      await writeFile(join(dir, 'v2', 'ratelimit', 'config', 'rules.yaml'), rules('edge', 5));
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(5), waitOptions);
    } finally {
      recorder.watcher.close();
    }
  });

  it('picks up a directory that appears later, through the poll', async () => {
    const deep = join(dir, 'later', 'config');
    const recorder = await start([deep], 100);
    try {
      await mkdir(deep, { recursive: true });
      await writeFile(join(deep, 'rules.yaml'), rules('edge', 3));
      await vi.waitFor(() => expect(limitOf(recorder, 'edge')).toBe(3), waitOptions);
    } finally {
      recorder.watcher.close();
    }
  });
});
