// Each setting below is read by loadSettings (test/unit/settings.test.ts); these tests show that the
// running app actually obeys it, through a real gRPC call.
import fs from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { capturingLogger, ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const ONE_PER_MINUTE = `
domain: wiring
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`;

let running: RunningApp | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await running?.stop();
  running = undefined;
  for (const dir of dirs.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function rules(files: Record<string, string>): Promise<string> {
  const dir = await ruleDir(files);
  dirs.push(dir);
  return dir;
}

describe('settings reach the running service', () => {
  it('SHADOW_MODE=true answers OK overall while the status keeps OVER_LIMIT', async () => {
    running = await startApp([await rules({ 'w.yaml': ONE_PER_MINUTE })], { SHADOW_MODE: 'true' });
    const request = rlsRequest('wiring', [{ user: 'a' }]);
    await running.client.shouldRateLimit(request);
    const second = await running.client.shouldRateLimit(request);
    expect(second.overall_code).toBe('OK');
    expect(second.statuses[0]).toMatchObject({ code: 'OVER_LIMIT', limit_remaining: 0 });
  });

  it('without SHADOW_MODE the same second call is refused', async () => {
    running = await startApp([await rules({ 'w.yaml': ONE_PER_MINUTE })]);
    const request = rlsRequest('wiring', [{ user: 'a' }]);
    await running.client.shouldRateLimit(request);
    expect((await running.client.shouldRateLimit(request)).overall_code).toBe('OVER_LIMIT');
  });

  it('MEMORY_MAX_KEYS caps the live counters, evicting one with room left, never a limiting one', async () => {
    const log = capturingLogger();
    running = await startApp(
      [
        await rules({
          'w.yaml': ONE_PER_MINUTE.replace('requests_per_unit: 1', 'requests_per_unit: 2'),
        }),
      ],
      { MEMORY_MAX_KEYS: '2', MAX_DESCRIPTORS_PER_REQUEST: '1' },
      { logger: log.logger },
    );
    const call = (user: string) =>
      running!.client.shouldRateLimit(rlsRequest('wiring', [{ user }]));
    expect((await call('a')).overall_code).toBe('OK');
    expect((await call('a')).overall_code).toBe('OK');
    expect((await call('a')).overall_code).toBe('OVER_LIMIT');
    await call('b');
    // A third key: b, with room left, is evicted; a, limiting its client, is kept.
    await call('c');
    expect(running.app.store.size()).toBe(2);
    expect((await call('a')).overall_code).toBe('OVER_LIMIT');
    // b's counter is gone, so b starts again from a full window (the cost of a cap set too low).
    expect((await call('b')).statuses[0]?.limit_remaining).toBe(1);
    expect(log.lines).toContainEqual(
      expect.objectContaining({ msg: expect.stringMatching(/MEMORY_MAX_KEYS reached/) }),
    );
  });

  it('MERGE_DOMAIN_CONFIG=true merges two files of one domain; without it the start fails', async () => {
    const dir = await rules({
      'a.yaml':
        'domain: wiring\ndescriptors:\n  - key: a\n    rate_limit: {unit: minute, requests_per_unit: 3}\n',
      'b.yaml':
        'domain: wiring\ndescriptors:\n  - key: b\n    rate_limit: {unit: minute, requests_per_unit: 4}\n',
    });
    await expect(startApp([dir])).rejects.toBeInstanceOf(ConfigError);

    running = await startApp([dir], { MERGE_DOMAIN_CONFIG: 'true' });
    const answer = await running.client.shouldRateLimit(
      rlsRequest('wiring', [{ a: 'x' }, { b: 'y' }]),
    );
    expect(answer.statuses.map((s) => s.current_limit?.requests_per_unit)).toEqual([3, 4]);
  });
});
