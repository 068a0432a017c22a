/**
 * `sluice check` (the built dist/main.js) reports every validation error of the algorithm keys
 * (docs/configuration.md) with its file and YAML path, and exits 1; a file using them correctly
 * passes.
 */
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { ensureBuilt } from '../helpers/processes.js';
import { ruleDir } from '../helpers/app.js';

beforeAll(() => ensureBuilt());

/** One rule file per problem: name -> [YAML, expected `file: path: message` pattern]. */
const CASES: Record<string, [string, RegExp]> = {
  'unknown-algorithm.yaml': [
    'domain: a1\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}\n',
    /unknown-algorithm\.yaml: descriptors\[0\]\.rate_limit\.algorithm: unknown algorithm 'leaky_bucket'; use one of sliding_window, fixed_window, token_bucket, sliding_log/,
  ],
  'burst-outside.yaml': [
    'domain: a2\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: fixed_window, burst: 5}\n',
    /burst-outside\.yaml: descriptors\[0\]\.rate_limit\.burst: burst applies only to algorithm: token_bucket, but this limit uses fixed_window/,
  ],
  'burst-default.yaml': [
    'domain: a3\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n',
    /burst-default\.yaml: descriptors\[0\]\.rate_limit\.burst: burst applies only to algorithm: token_bucket, but this limit uses sliding_window \(the default algorithm\)/,
  ],
  'multiplier-zero.yaml': [
    'domain: a4\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, unit_multiplier: 0, requests_per_unit: 1}\n',
    /multiplier-zero\.yaml: descriptors\[0\]\.rate_limit\.unit_multiplier: unit_multiplier must be a whole number of at least 1/,
  ],
  'multiplier-fraction.yaml': [
    'domain: a5\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, unit_multiplier: 2.5, requests_per_unit: 1}\n',
    /multiplier-fraction\.yaml: descriptors\[0\]\.rate_limit\.unit_multiplier: .*whole number/,
  ],
  'both.yaml': [
    'domain: a6\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits:\n      - {unit: day, requests_per_unit: 9}\n',
    /both\.yaml: descriptors\[0\]\.rate_limits: a descriptor has either 'rate_limit' \(one limit\) or 'rate_limits' \(a list\), not both/,
  ],
  'empty-list.yaml': [
    'domain: a7\ndescriptors:\n  - key: k\n    rate_limits: []\n',
    /empty-list\.yaml: descriptors\[0\]\.rate_limits: rate_limits must be a non-empty list of limits .*not an empty list/,
  ],
  'unlimited-in-list.yaml': [
    'domain: a8\ndescriptors:\n  - key: outer\n    descriptors:\n      - key: k\n        rate_limits:\n          - {unit: second, requests_per_unit: 1}\n          - {unlimited: true}\n',
    /unlimited-in-list\.yaml: descriptors\[0\]\.descriptors\[0\]\.rate_limits\[1\]\.unlimited: unlimited cannot be one of several limits/,
  ],
  'sliding-log-bound.yaml': [
    'domain: a9\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10001, algorithm: sliding_log}\n',
    /sliding-log-bound\.yaml: descriptors\[0\]\.rate_limit\.requests_per_unit: sliding_log keeps one timestamp per admitted hit, so requests_per_unit is at most 10000 \(found 10001\)/,
  ],
  'token-bucket-bound.yaml': [
    'domain: a10\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 200000000, algorithm: token_bucket}\n',
    /token-bucket-bound\.yaml: descriptors\[0\]\.rate_limit\.requests_per_unit: token_bucket capacity 200000000 x window 86400000 ms is too large to count exactly/,
  ],
  'same-window-twice.yaml': [
    'domain: a11\ndescriptors:\n  - key: k\n    rate_limits:\n      - {unit: minute, requests_per_unit: 5}\n      - {unit: second, unit_multiplier: 60, requests_per_unit: 9}\n',
    /same-window-twice\.yaml: descriptors\[0\]\.rate_limits\[1\]: rate_limits\[0\] already has a sliding_window limit with a 60000 ms window; keep the stricter one/,
  ],
};

describe('sluice check: algorithm key errors', () => {
  it('reports each problem with its file and YAML path and exits 1', async () => {
    const files = Object.fromEntries(Object.entries(CASES).map(([name, [yaml]]) => [name, yaml]));
    const dir = await ruleDir(files);
    const result = await runCli(['check', dir]);
    expect(result.code).toBe(1);
    for (const [name, [, pattern]] of Object.entries(CASES)) {
      expect(result.stderr, name).toContain(path.join(dir, name));
      expect(result.stderr, name).toMatch(pattern);
    }
  });

  for (const [name, [yaml, pattern]] of Object.entries(CASES)) {
    it(`${name} alone fails the check`, async () => {
      const dir = await ruleDir({ [name]: yaml });
      const result = await runCli(['check', dir]);
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(pattern);
    });
  }

  it('accepts the keys used correctly', async () => {
    const dir = await ruleDir({
      'good.yaml': `domain: good
descriptors:
  - key: k
    rate_limits:
      - {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
      - {unit: minute, unit_multiplier: 5, requests_per_unit: 100, algorithm: sliding_log}
      - {unit: day, requests_per_unit: 1000, algorithm: fixed_window, name: daily}
  - key: q
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 3}
`,
    });
    const result = await runCli(['check', dir]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });
});
