import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import type { ConfigOptions } from '../../../src/config/validate.js';
import { ConfigError, type ConfigProblem } from '../../../src/errors.js';
import type { RequestDescriptor } from '../../../src/model.js';

function snapshotOf(content: string, options?: ConfigOptions) {
  return buildSnapshot([{ name: 'rules.yaml', content }], options);
}

function problemsOf(content: string, options?: ConfigOptions): ConfigProblem[] {
  try {
    snapshotOf(content, options);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  return [];
}

/** The only problem, with its path and its message minus the `(line, column)` suffix. */
function onlyProblem(content: string, options?: ConfigOptions): { path: string; message: string } {
  const problems = problemsOf(content, options);
  expect(problems).toHaveLength(1);
  const { path, message } = problems[0]!;
  return { path, message: message.replace(/ \(line \d+, column \d+\)$/, '') };
}

function desc(key: string, value = 'v'): RequestDescriptor {
  return { entries: [{ key, value }], limit: undefined, hitsAddend: undefined };
}

describe('extension keys that load', () => {
  it('builds one limit per rate_limits item, with algorithm, multiplier, burst and name', () => {
    const snapshot = snapshotOf(`
domain: edge
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 5, name: per_second}
      - {unit: minute, requests_per_unit: 100, unit_multiplier: 5, algorithm: SLIDING_LOG}
      - {unit: day, requests_per_unit: 1000}
`);
    const rule = snapshot.getLimit('edge', desc('user'))!.rule;
    expect(rule.limits).toEqual([
      {
        requestsPerUnit: 2,
        unit: 'second',
        unitMultiplier: 1,
        windowMs: 1_000,
        algorithm: 'token_bucket',
        burst: 5,
        name: 'per_second',
      },
      {
        requestsPerUnit: 100,
        unit: 'minute',
        unitMultiplier: 5,
        windowMs: 300_000,
        algorithm: 'sliding_log',
        burst: 100,
        name: '',
      },
      {
        requestsPerUnit: 1000,
        unit: 'day',
        unitMultiplier: 1,
        windowMs: 86_400_000,
        algorithm: 'sliding_window',
        burst: 1000,
        name: '',
      },
    ]);
    // Rule-level fields repeat the first limit.
    expect(rule).toMatchObject({
      requestsPerUnit: 2,
      unit: 'second',
      windowMs: 1_000,
      algorithm: 'token_bucket',
      name: 'per_second',
    });
  });

  it('applies DEFAULT_ALGORITHM to limits and overrides that name none, and not to those that do', () => {
    const snapshot = snapshotOf(
      `
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
`,
      { defaultAlgorithm: 'fixed_window' },
    );
    expect(snapshot.getLimit('edge', desc('a'))!.rule.limits[0]!.algorithm).toBe('fixed_window');
    expect(snapshot.getLimit('edge', desc('b'))!.rule.limits[0]!.algorithm).toBe('sliding_window');
    const override = snapshot.getLimit('edge', {
      ...desc('zzz'),
      limit: { requestsPerUnit: 3, unit: 'hour' },
    })!.rule;
    expect(override.limits[0]!.algorithm).toBe('fixed_window');
  });

  it('unites the replaces of every limit and takes the first limit name as the rule name', () => {
    const snapshot = snapshotOf(`
domain: edge
descriptors:
  - key: a
    rate_limits:
      - {unit: second, requests_per_unit: 1, name: first, replaces: [{name: x}]}
      - {unit: hour, requests_per_unit: 9, name: second, replaces: [{name: y}, {name: x}]}
`);
    const rule = snapshot.getLimit('edge', desc('a'))!.rule;
    expect(rule.name).toBe('first');
    expect(rule.replaces).toEqual(['x', 'y']);
  });
});

describe('every extension validation error', () => {
  it('unknown algorithm', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}
`),
    ).toEqual({
      path: 'descriptors[0].rate_limit.algorithm',
      message:
        "unknown algorithm 'leaky_bucket'; use one of sliding_window, fixed_window, token_bucket, sliding_log",
    });
  });

  it('burst outside token_bucket, named with the algorithm in force', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, burst: 4}
`),
    ).toEqual({
      path: 'descriptors[0].rate_limit.burst',
      message:
        'burst applies only to algorithm: token_bucket, but this limit uses sliding_window (the default algorithm); remove burst or set algorithm: token_bucket',
    });
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, burst: 4, algorithm: fixed_window}
`).message,
    ).toMatch(/but this limit uses fixed_window;/);
    // With DEFAULT_ALGORITHM=token_bucket, burst without an algorithm is fine.
    expect(
      problemsOf(
        `
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, burst: 4}
`,
        { defaultAlgorithm: 'token_bucket' },
      ),
    ).toEqual([]);
  });

  it('unit_multiplier 0, fractional, negative or text', () => {
    const problems = problemsOf(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 0}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: 1.5}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: -2}
  - key: d
    rate_limit: {unit: second, requests_per_unit: 1, unit_multiplier: five}
`);
    expect(problems.map((p) => p.path)).toEqual([
      'descriptors[0].rate_limit.unit_multiplier',
      'descriptors[1].rate_limit.unit_multiplier',
      'descriptors[2].rate_limit.unit_multiplier',
      'descriptors[3].rate_limit.unit_multiplier',
    ]);
    expect(problems[0]!.message).toMatch(/unit_multiplier must be a whole number of at least 1/);
    expect(problems[1]!.message).toMatch(/unit_multiplier is 1.5, a floating-point number/);
    expect(problems[2]!.message).toMatch(/unit_multiplier must be a whole number from 0 to/);
  });

  it('both rate_limit and rate_limits', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    rate_limits: [{unit: day, requests_per_unit: 5}]
`),
    ).toEqual({
      path: 'descriptors[0].rate_limits',
      message:
        "a descriptor has either 'rate_limit' (one limit) or 'rate_limits' (a list), not both; move the rate_limit block into the rate_limits list",
    });
  });

  it('empty or non-list rate_limits', () => {
    const problems = problemsOf(`
domain: edge
descriptors:
  - key: a
    rate_limits: []
  - key: b
    rate_limits:
  - key: c
    rate_limits: {unit: second, requests_per_unit: 1}
`);
    expect(problems.map((p) => p.path)).toEqual([
      'descriptors[0].rate_limits',
      'descriptors[1].rate_limits',
      'descriptors[2].rate_limits',
    ]);
    expect(problems[0]!.message).toMatch(/must be a non-empty list of limits .* not an empty list/);
    expect(problems[1]!.message).toMatch(/not empty$/);
    expect(problems[2]!.message).toMatch(/not a mapping/);
  });

  it('unlimited inside a list', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unlimited: true}
`),
    ).toEqual({
      path: 'descriptors[0].rate_limits[1].unlimited',
      message:
        'unlimited cannot be one of several limits; use rate_limit: {unlimited: true} on its own',
    });
  });

  it('two limits with the same algorithm and window', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limits:
      - {unit: minute, requests_per_unit: 5}
      - {unit: second, requests_per_unit: 60, unit_multiplier: 60}
`),
    ).toEqual({
      path: 'descriptors[0].rate_limits[1]',
      message:
        'rate_limits[0] already has a sliding_window limit with a 60000 ms window; keep the stricter one',
    });
  });

  it('an invalid item inside rate_limits is reported at its own path', () => {
    expect(
      onlyProblem(`
domain: edge
descriptors:
  - key: a
    rate_limits:
      - {unit: fortnight, requests_per_unit: 5}
`).path,
    ).toBe('descriptors[0].rate_limits[0].unit');
  });

  it('sliding_log above its bound, and a token bucket too large to count exactly', () => {
    const problems = problemsOf(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 10001, algorithm: sliding_log}
  - key: b
    rate_limit: {unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: 1000000}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 10000, algorithm: sliding_log}
`);
    expect(problems.map((p) => p.path)).toEqual([
      'descriptors[0].rate_limit.requests_per_unit',
      'descriptors[1].rate_limit.burst',
    ]);
    expect(problems[0]!.message).toMatch(/requests_per_unit is at most 10000 \(found 10001\)/);
    expect(problems[1]!.message).toMatch(/capacity 1000000 x window 31536000000 ms is too large/);
  });
});
