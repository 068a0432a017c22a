/**
 * A rule set with no domains limits nothing (every call answered OK), so it is never quiet: the
 * load or reload that produces it is logged at WARN and `sluice_config_domains` reads 0. Real
 * server, real files, file system events.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { capturingLogger, ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const RULE =
  'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n';

describe('a rule set with no domains', () => {
  let running: RunningApp;
  let dir: string;
  const log = capturingLogger();

  beforeAll(async () => {
    dir = await ruleDir({});
    running = await startApp([dir], {}, { logger: log.logger, watchPollIntervalMs: 0 });
  });
  afterAll(async () => {
    await running?.stop();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const configLines = (): Record<string, unknown>[] =>
    log.lines.filter((line) => line['module'] === 'config');
  const domainsGauge = async (): Promise<string | undefined> =>
    /^sluice_config_domains (\S+)$/m.exec(await running.app.metrics.render())?.[1];

  it('warns at start and reports 0 domains', async () => {
    expect(configLines()).toHaveLength(1);
    expect(configLines()[0]).toMatchObject({
      level: 40,
      domains: [],
      msg: expect.stringMatching(/with no domains: nothing is rate limited/),
    });
    expect(await domainsGauge()).toBe('0');
  });

  it('loads at INFO once a rule file is added, and warns again when it is removed', async () => {
    await fs.writeFile(path.join(dir, 'edge.yaml'), RULE);
    await vi.waitFor(() => expect(running.app.snapshot().domains.has('edge')).toBe(true), {
      timeout: 5000,
      interval: 50,
    });
    expect(configLines().at(-1)).toMatchObject({ level: 30, domains: ['edge'] });
    expect(await domainsGauge()).toBe('1');

    await fs.rm(path.join(dir, 'edge.yaml'));
    await vi.waitFor(() => expect(running.app.snapshot().domains.size).toBe(0), {
      timeout: 5000,
      interval: 50,
    });
    expect(configLines().at(-1)).toMatchObject({
      level: 40,
      domains: [],
      msg: expect.stringMatching(/^rate limit config reloaded with no domains/),
    });
    expect(await domainsGauge()).toBe('0');
  });
});
