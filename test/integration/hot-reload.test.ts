import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { capturingLogger, ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const rules = (perMinute: number): string =>
  `domain: reload\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: ${perMinute}}\n`;

describe('hot reload while serving', () => {
  let running: RunningApp;
  let dir: string;
  const log = capturingLogger();

  beforeAll(async () => {
    dir = await ruleDir({ 'reload.yaml': rules(5) });
    // No poll: every change below must reach the server through file system events alone (the
    // reload follows an event after a 100 ms debounce).
    running = await startApp([dir], {}, { logger: log.logger, watchPollIntervalMs: 0 });
  });
  afterAll(async () => {
    await running.stop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const limitFor = async (user: string): Promise<number | undefined> => {
    const response = await running.client.shouldRateLimit(rlsRequest('reload', [{ user }]));
    return response.statuses[0]!.current_limit?.requests_per_unit;
  };

  it('applies an edited rule file without a restart', async () => {
    expect(await limitFor('a')).toBe(5);
    await fs.writeFile(path.join(dir, 'reload.yaml'), rules(7));
    await vi.waitFor(async () => expect(await limitFor('a')).toBe(7), {
      timeout: 5000,
      interval: 50,
    });
  });

  it('keeps the old rules serving when a broken file is written', async () => {
    const before = running.app.snapshot();
    await fs.writeFile(
      path.join(dir, 'broken.yaml'),
      'domain: other\ndescriptors:\n  - key: x\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
    );
    await fs.writeFile(path.join(dir, 'reload.yaml'), rules(9));
    // The file set is invalid as a whole, so nothing of it is applied; the failure is logged
    // with the file and the reason.
    await vi.waitFor(
      () =>
        expect(log.lines).toContainEqual(
          expect.objectContaining({
            msg: expect.stringMatching(/reload failed/),
            problems: [
              expect.stringMatching(/broken\.yaml: .*invalid rate limit unit 'fortnight'/),
            ],
          }),
        ),
      { timeout: 5000, interval: 50 },
    );
    expect(running.app.snapshot()).toBe(before);
    expect(await limitFor('b')).toBe(7);

    // Fixing the broken file applies the whole set.
    await fs.rm(path.join(dir, 'broken.yaml'));
    await vi.waitFor(async () => expect(await limitFor('b')).toBe(9), {
      timeout: 5000,
      interval: 50,
    });
  });

  it('drops a domain whose file is removed', async () => {
    await fs.writeFile(
      path.join(dir, 'extra.yaml'),
      'domain: extra\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n',
    );
    await vi.waitFor(() => expect(running.app.snapshot().domains.has('extra')).toBe(true), {
      timeout: 5000,
      interval: 50,
    });
    await fs.rm(path.join(dir, 'extra.yaml'));
    await vi.waitFor(() => expect(running.app.snapshot().domains.has('extra')).toBe(false), {
      timeout: 5000,
      interval: 50,
    });
  });
});
