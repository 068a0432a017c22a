import os from 'node:os';
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';

describe('WORKERS', () => {
  it('defaults to one per core with the Redis store and to 1 with the memory store', () => {
    expect(loadSettings({ BACKEND_TYPE: 'redis', REDIS_URL: '127.0.0.1:6379' }).workers).toBe(
      Math.min(256, os.availableParallelism()),
    );
    expect(loadSettings({}).workers).toBe(1);
  });

  it('takes 1 to 256 with the Redis store', () => {
    const redis = { BACKEND_TYPE: 'redis', REDIS_URL: '127.0.0.1:6379' };
    expect(loadSettings({ ...redis, WORKERS: '3' }).workers).toBe(3);
    expect(loadSettings({ ...redis, WORKERS: '1' }).workers).toBe(1);
    expect(() => loadSettings({ ...redis, WORKERS: '0' })).toThrow(
      /WORKERS="0": expected an integer from 1 to 256/,
    );
  });

  it('refuses more than one worker with the memory store, saying what to do', () => {
    expect(loadSettings({ WORKERS: '1' }).workers).toBe(1);
    expect(() => loadSettings({ WORKERS: '4' })).toThrow(
      /WORKERS=4: the memory store keeps its counters in one process; use WORKERS=1/,
    );
  });
});
