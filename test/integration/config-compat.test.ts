/**
 * Reference differences 5 and 6 (issue 12) on the running service and `sluice check`: a file with
 * several YAML documents, or with a repeated key, loads as the reference loads it, and the warning
 * reaches the start-up log and `sluice check` (which exits 0).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { runCli } from '../helpers/cli.js';
import { ensureBuilt } from '../helpers/processes.js';

const FILES = {
  'two-docs.yaml':
    'domain: first\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n---\ndomain: second\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n',
  'repeated.yaml':
    'domain: rep\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n      requests_per_unit: 7\n',
};

describe('several YAML documents and repeated keys load as in the reference, with warnings', () => {
  let dir: string;
  let running: RunningApp;
  const { logger, lines } = capturingLogger();

  beforeAll(async () => {
    dir = await ruleDir(FILES);
    running = await startApp([dir], {}, { logger });
  });
  afterAll(async () => {
    await running?.stop();
  });

  it('serves the first document and the last occurrence of a repeated key', async () => {
    const first = await running.client.shouldRateLimit({
      domain: 'first',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    expect(first.statuses?.[0]?.current_limit?.requests_per_unit).toBe(2);
    const second = await running.client.shouldRateLimit({
      domain: 'second',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    // An unknown domain: OK with no limit.
    expect(second.statuses?.[0]?.current_limit ?? null).toBeNull();
    const repeated = await running.client.shouldRateLimit({
      domain: 'rep',
      descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
    });
    expect(repeated.statuses?.[0]?.current_limit?.requests_per_unit).toBe(7);
  });

  it('logs both warnings at start-up', () => {
    const warning = lines.find((line) => line['msg'] === 'rate limit config warnings');
    const text = JSON.stringify(warning?.['warnings']);
    expect(text).toMatch(/two-docs\.yaml.*only the first is loaded.*document 2 at line 6/);
    expect(text).toMatch(/repeated\.yaml.*requests_per_unit.*written 2 times \(lines 6, 7\)/);
  });

  it('sluice check prints them and exits 0', async () => {
    ensureBuilt();
    const result = await runCli(['check', dir]);
    expect(result.code).toBe(0);
    const output = result.stdout + result.stderr;
    expect(output).toContain('only the first is loaded');
    expect(output).toContain('written 2 times');
  });
});
