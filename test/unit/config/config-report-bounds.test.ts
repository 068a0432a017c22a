/**
 * Issue 31, item 5: reports about rules stay bounded whatever the rule set. 19,000 invalid
 * descriptors gave a 2.5 MB NACK and a 2.6 MB log line, 95,000 a 12.8 MB NACK, and a 1 MB
 * resource name was echoed whole. Every problem list is cut to its first entries plus an
 * `and N more` line, and every echoed name is cut.
 */
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import { createServingConfig } from '../../../src/config/source.js';
import { ConfigError, MAX_LISTED_PROBLEMS, type ConfigProblem } from '../../../src/errors.js';
import { capturingLogger } from '../../helpers/app.js';

const MEGABYTE_NAME = 'n'.repeat(1 << 20);

function problems(count: number): ConfigProblem[] {
  return Array.from({ length: count }, (_, i) => ({
    file: 'rules.yaml',
    path: `descriptors[${i}].rate_limit.unit`,
    message: 'invalid rate limit unit "sec"; expected second, minute, hour, day or year',
  }));
}

/** A rule file of `count` descriptors, each with an invalid unit. */
function invalidRules(count: number): string {
  const lines = ['domain: broken', 'descriptors:'];
  for (let i = 0; i < count; i++) {
    lines.push(`  - {key: k${i}, rate_limit: {unit: sec, requests_per_unit: 1}}`);
  }
  return lines.join('\n') + '\n';
}

describe('reports about rules are bounded (issue 31, item 5)', () => {
  it('a ConfigError of 95,000 problems lists the first ones and counts the rest', () => {
    const error = new ConfigError(problems(95_000));
    expect(error.problemCount).toBe(95_000);
    expect(error.problems).toHaveLength(MAX_LISTED_PROBLEMS + 1);
    expect(error.problems.at(-1)?.message).toBe(
      `and ${95_000 - MAX_LISTED_PROBLEMS} more problems (only the first ${MAX_LISTED_PROBLEMS} are listed)`,
    );
    // What a NACK's error_detail and the start-up error carry.
    expect(error.message.length).toBeLessThan(64 * 1024);
    expect(error.message.split('\n').at(-1)).toMatch(/^and 94900 more problems/);
  });

  it('a 1 MB name in a problem is cut, not echoed whole', () => {
    const error = new ConfigError([
      { file: MEGABYTE_NAME, path: MEGABYTE_NAME, message: MEGABYTE_NAME },
    ]);
    expect(error.message.length).toBeLessThan(4 * 1024);
    expect(error.message).toContain(`(${1 << 20} characters)`);
  });

  it('a file of 2,000 invalid rules is refused with a bounded error', () => {
    let caught: unknown;
    try {
      buildSnapshot([{ name: 'broken.yaml', content: invalidRules(2_000) }]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const error = caught as ConfigError;
    expect(error.problemCount).toBe(2_000);
    expect(error.problems).toHaveLength(MAX_LISTED_PROBLEMS + 1);
    expect(error.message.length).toBeLessThan(64 * 1024);
  });

  it('a snapshot lists at most the first warnings', () => {
    const lines = ['domain: warned', 'descriptors:'];
    for (let i = 0; i < 500; i++) {
      // shadow_mode inside rate_limit: accepted and ignored, with a warning, as the reference.
      lines.push(
        `  - {key: k${i}, rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}}`,
      );
    }
    const snapshot = buildSnapshot([{ name: 'warned.yaml', content: lines.join('\n') + '\n' }]);
    expect(snapshot.warnings).toHaveLength(MAX_LISTED_PROBLEMS + 1);
    expect(snapshot.warnings.at(-1)?.message).toMatch(/^and 400 more warnings/);
  });

  it('an /rlconfig line cuts a long rule key instead of echoing it whole', () => {
    const value = 'v'.repeat(100_000);
    const snapshot = buildSnapshot([
      {
        name: 'long.yaml',
        content: `domain: long\ndescriptors:\n  - key: k\n    value: ${value}\n    rate_limit: {unit: second, requests_per_unit: 1}\n`,
      },
    ]);
    const [line] = snapshot.dump();
    expect(line!.length).toBeLessThan(2_048);
    expect(line).toMatch(/^long\.k_v+… \(100007 characters\): unit=SECOND requests_per_unit=1,/);
    // Matching still sees the whole value.
    expect(
      snapshot.getLimit('long', {
        entries: [{ key: 'k', value }],
        limit: undefined,
        hitsAddend: undefined,
      })?.rule.requestsPerUnit,
    ).toBe(1);
  });

  it('the log line of a refused set and of a loaded one stay small', () => {
    const log = capturingLogger();
    const serving = createServingConfig({
      logger: log.logger,
      counters: { configLoadSuccess: 0, configLoadError: 0 },
      origin: 'xds',
    });
    serving.onError(new ConfigError(problems(19_000)));
    serving.onError(new Error(MEGABYTE_NAME));
    // A rule set of many resources with 1 MB names.
    const names = Array.from({ length: 1_000 }, (_, i) => `${i}${MEGABYTE_NAME.slice(0, 10_000)}`);
    serving.onSnapshot({
      files: names,
      warnings: [],
      domains: new Map(names.map((name) => [name, { name, files: [name] }])),
      getLimit: () => undefined,
      dump: () => [],
    });
    expect(log.lines).toHaveLength(3);
    for (const line of log.lines) expect(JSON.stringify(line).length).toBeLessThan(64 * 1024);
    expect(log.lines[2]?.['files']).toContain('and 980 more');
  });
});
