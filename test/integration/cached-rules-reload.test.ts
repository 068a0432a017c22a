/**
 * Cached mode's refused algorithms on the file source (docs/cached-mode.md, "Algorithms"): a
 * first load with one is refused, and a reload that introduces one is refused like any invalid
 * rule set while the loaded rules keep serving. The options are the ones `REDIS_MODE=cached`
 * settings give, on the real file system and watcher.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadSnapshot } from '../../src/config/load.js';
import type { ConfigSnapshot } from '../../src/config/types.js';
import { watchConfig } from '../../src/config/watch.js';
import { ConfigError } from '../../src/errors.js';
import { loadSettings } from '../../src/settings.js';

const refusal = loadSettings({
  BACKEND_TYPE: 'redis',
  REDIS_URL: 'localhost:6379',
  REDIS_MODE: 'cached',
}).algorithmRefusal;

function rules(algorithm: string, requestsPerUnit: number): string {
  return `domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: ${requestsPerUnit}, algorithm: ${algorithm}}\n`;
}

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sluice-cached-rules-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('rules in cached mode on the file source', () => {
  it('refuses a first load that uses token_bucket', async () => {
    await writeFile(join(dir, 'r.yaml'), rules('token_bucket', 5));
    await expect(loadSnapshot([dir], { algorithmRefusal: refusal })).rejects.toThrow(
      /descriptors\[0\]\.rate_limit\.algorithm: algorithm token_bucket cannot be counted with REDIS_MODE=cached/,
    );
  });

  it('refuses a reload that introduces sliding_log and keeps serving the loaded rules', async () => {
    await writeFile(join(dir, 'r.yaml'), rules('fixed_window', 5));
    const first = await loadSnapshot([dir], { algorithmRefusal: refusal });
    const snapshots: ConfigSnapshot[] = [];
    const errors: Error[] = [];
    const watcher = watchConfig({
      paths: [dir],
      debounceMs: 20,
      pollIntervalMs: 0,
      algorithmRefusal: refusal,
      onSnapshot: (snapshot) => snapshots.push(snapshot),
      onError: (error) => errors.push(error),
    });
    try {
      await watcher.ready;
      await writeFile(join(dir, 'r.yaml'), rules('sliding_log', 7));
      await vi.waitFor(() => expect(errors).toHaveLength(1), { timeout: 5000, interval: 20 });
      expect(errors[0]).toBeInstanceOf(ConfigError);
      expect(errors[0]!.message).toContain(
        'algorithm sliding_log cannot be counted with REDIS_MODE=cached',
      );
      expect(snapshots).toHaveLength(0);
      // A valid reload after it is taken as usual.
      await writeFile(join(dir, 'r.yaml'), rules('sliding_window', 9));
      await vi.waitFor(() => expect(snapshots).toHaveLength(1), { timeout: 5000, interval: 20 });
      expect(first.domains.has('d')).toBe(true);
    } finally {
      watcher.close();
    }
  });
});
