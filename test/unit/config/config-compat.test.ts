/**
 * Regression tests for the differences from the reference (envoyproxy/ratelimit) that the
 * differential tier found (issue 12). Each expectation was first observed on the reference binary;
 * docs/compatibility.md records the behaviour.
 */
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import type { ConfigSnapshot } from '../../../src/config/types.js';
import { validateFiles } from '../../../src/config/validate.js';
import { ConfigError, type ConfigProblem } from '../../../src/errors.js';
import type { RequestDescriptor } from '../../../src/model.js';

function load(content: string): ConfigSnapshot {
  return buildSnapshot([{ name: 'rules.yaml', content }]);
}

function problemsOf(content: string): ConfigProblem[] {
  try {
    load(content);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  return [];
}

function warningsOf(content: string): ConfigProblem[] {
  const result = validateFiles([{ name: 'rules.yaml', content }]);
  expect(result.problems).toEqual([]);
  return [...result.warnings];
}

function descriptor(...pairs: [string, string][]): RequestDescriptor {
  return {
    entries: pairs.map(([key, value]) => ({ key, value })),
    limit: undefined,
    hitsAddend: undefined,
  };
}

/** The matched rule's requests_per_unit, `undefined` when no rule applies. */
function limitOf(snapshot: ConfigSnapshot, ...pairs: [string, string][]): number | undefined {
  return snapshot.getLimit('d', descriptor(...pairs))?.rule.requestsPerUnit;
}

describe('reference difference 1: a `*` in a descriptor key', () => {
  it('key "b*" without a value matches entries whose joined key_value starts with "b"', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: "b*"\n    rate_limit: {unit: hour, requests_per_unit: 2}\n',
    );
    expect(limitOf(snapshot, ['b', 'yy'])).toBe(2);
    expect(limitOf(snapshot, ['bar', ''])).toBe(2);
    expect(limitOf(snapshot, ['b*', ''])).toBe(2);
    expect(limitOf(snapshot, ['a', 'b'])).toBeUndefined();
  });

  it('a key wildcard is tried with the value wildcards, in declaration order, before the default', () => {
    const snapshot = load(`domain: d
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: "k*"
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: k
    value: "v*"
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: k
    value: exact
    rate_limit: {unit: hour, requests_per_unit: 4}
`);
    expect(limitOf(snapshot, ['k', 'exact'])).toBe(4);
    // "k*" is declared before "v*", so it wins for k=v1, as in the reference.
    expect(limitOf(snapshot, ['k', 'v1'])).toBe(2);
    // And before the key-only default.
    expect(limitOf(snapshot, ['k', 'other'])).toBe(2);
  });

  it('a value wildcard declared first wins over a later key wildcard', () => {
    const snapshot = load(`domain: d
descriptors:
  - key: k
    value: "v*"
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: "*"
    rate_limit: {unit: hour, requests_per_unit: 5}
`);
    expect(limitOf(snapshot, ['k', 'v1'])).toBe(3);
    expect(limitOf(snapshot, ['k', 'x'])).toBe(5);
    expect(limitOf(snapshot, ['zz', ''])).toBe(5);
  });

  it('a `*` anywhere in a key is a wildcard on the joined key_value text (master, f2fb157)', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: "a*b"\n    rate_limit: {unit: hour, requests_per_unit: 2}\n',
    );
    // The literal key still finds the node, as the reference's default lookup does.
    expect(limitOf(snapshot, ['a*b', 'x'])).toBe(2);
    // `a*b` against the joined text: it must end with `b`.
    expect(limitOf(snapshot, ['ax', 'yb'])).toBe(2);
    expect(limitOf(snapshot, ['axb', ''])).toBeUndefined();
  });

  it('a key with `*` and a value is one joined pattern, tried in declaration order (issue 17)', () => {
    const snapshot = load(`domain: d
descriptors:
  - key: c
    value: xy*
    descriptors:
      - key: "b*"
        value: "*"
      - key: b
        value: "x**"
        rate_limit: {unit: hour, requests_per_unit: 3}
`);
    // b_x=y matches the first declared wildcard, \`b*_*\`, which has no rule: no limit.
    expect(limitOf(snapshot, ['c', 'xy'], ['b', 'x=y'])).toBeUndefined();
    // A key the joined pattern does not reach falls through to nothing either.
    expect(limitOf(snapshot, ['c', 'xy'], ['a', 'x'])).toBeUndefined();
  });

  it('the first declared of a value wildcard and a key-and-value wildcard wins', () => {
    const snapshot = load(`domain: d
descriptors:
  - key: b
    value: "x*"
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: "b*"
    value: "*"
    rate_limit: {unit: hour, requests_per_unit: 4}
`);
    expect(limitOf(snapshot, ['b', 'x1'])).toBe(3);
    expect(limitOf(snapshot, ['b', 'y'])).toBe(4);
    expect(limitOf(snapshot, ['bz', 'x1'])).toBe(4);
    expect(limitOf(snapshot, ['c', 'x1'])).toBeUndefined();
  });

  it('key "*" with share_threshold loads, and every value of one key shares a counter', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: "*"\n    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 5}\n',
    );
    const match = snapshot.getLimit('d', descriptor(['zz', '1']));
    expect(match?.rule.requestsPerUnit).toBe(5);
    // The reference counts `zz_*` for every value of zz (its key pattern replaces the value).
    expect(match?.sharedPatterns).toEqual(['*']);
  });

  it('share_threshold needs a `*` in the joined key_value: a key with `*` and a plain value loads', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: "b*"\n    value: x\n    share_threshold: true\n    rate_limit: {unit: hour, requests_per_unit: 2}\n',
    );
    // Every entry matching `b*_x` shares one counter per request key.
    expect(snapshot.getLimit('d', descriptor(['bz', 'x']))?.sharedPatterns).toEqual(['b*_x']);
    const problems = problemsOf(
      'domain: d\ndescriptors:\n  - key: b\n    value: x\n    share_threshold: true\n',
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]!.message).toContain("but found key 'b_x'");
  });
});

describe('reference difference 3: metadata that is not a mapping', () => {
  it.each([
    ['metadata: true', 'true'],
    ['metadata: [{a: 1}]', 'a list'],
    ['metadata: text', "'text'"],
  ])('%s is refused with file and YAML path', (line, shown) => {
    const problems = problemsOf(`domain: d\ndescriptors:\n  - key: k\n    ${line}\n`);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ file: 'rules.yaml', path: 'descriptors[0].metadata' });
    expect(problems[0]!.message).toMatch(
      new RegExp(
        `^metadata must be a mapping of names to values .*not ${shown.replace(/[[\]]/g, '\\$&')} \\(line 4, column \\d+\\)$`,
      ),
    );
  });

  it('a metadata mapping is accepted, as by the reference (master)', () => {
    expect(
      problemsOf(
        'domain: d\ndescriptors:\n  - key: k\n    metadata: {team: payments, n: [1, {x: 2}]}\n',
      ),
    ).toEqual([]);
  });
});

describe('reference difference 4: floating-point scalars', () => {
  it.each([
    ['value: 1.5', 'descriptors[0].value'],
    ['value: 1e3', 'descriptors[0].value'],
    ['value: .inf', 'descriptors[0].value'],
    ['value: 08', 'descriptors[0].value'],
    ['key: 2.0', 'descriptors[0].key'],
    [
      'rate_limit: {unit: hour, requests_per_unit: 1.5}',
      'descriptors[0].rate_limit.requests_per_unit',
    ],
    [
      'rate_limit: {unit: hour, requests_per_unit: 1.0}',
      'descriptors[0].rate_limit.requests_per_unit',
    ],
    ['rate_limit: {unit: 1.5}', 'descriptors[0].rate_limit.unit'],
    ['value: 9223372036854775808', 'descriptors[0].value'],
  ])('%s is refused, as the reference refuses it ("error checking config")', (line, path) => {
    const problems = problemsOf(`domain: d\ndescriptors:\n  - key: k\n    ${line}\n`);
    expect(problems.map((p) => p.path)).toContain(path);
    const problem = problems.find((p) => p.path === path)!;
    expect(problem.message).toMatch(/^error checking config: /);
  });

  it.each([
    'value: 15',
    'value: true',
    'value: 2001-12-14',
    'value: 0x1F',
    'value: "1.5"',
    'value: 1.5.6',
    'value: 9223372036854775807',
  ])('%s loads, as in the reference', (line) => {
    expect(
      problemsOf(
        `domain: d\ndescriptors:\n  - key: k\n    ${line}\n    rate_limit: {unit: hour, requests_per_unit: 2}\n`,
      ),
    ).toEqual([]);
  });

  it('requests_per_unit is read with the reference’s number syntax', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 0x10}\n',
    );
    expect(limitOf(snapshot, ['k', 'v'])).toBe(16);
    // YAML 1.1 sexagesimal (1:30 = 90) is text to the reference: refused, not 90.
    expect(
      problemsOf(
        'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1:30}\n',
      )[0]?.message,
    ).toMatch(/^requests_per_unit must be a whole number/);
  });
});

describe('reference difference 5: several YAML documents in one file', () => {
  const twoDocs =
    'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n---\ndomain: e\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 3}\n';

  it('loads the first document, ignores the rest, and warns naming them', () => {
    const snapshot = load(twoDocs);
    expect([...snapshot.domains.keys()]).toEqual(['d']);
    expect(limitOf(snapshot, ['k', 'v'])).toBe(2);
    const warnings = warningsOf(twoDocs);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ file: 'rules.yaml', path: '' });
    expect(warnings[0]!.message).toContain('only the first is loaded');
    expect(warnings[0]!.message).toContain('document 2 at line 6');
  });

  it('a later document that is not valid YAML is ignored too', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n---\n- [unclosed\n';
    expect(limitOf(load(content), ['k', 'v'])).toBe(2);
    expect(warningsOf(content)[0]!.message).toContain('not valid YAML either');
  });

  it('an empty first document is the file, as in the reference (empty domain)', () => {
    const problems = problemsOf('---\n---\ndomain: d\n');
    expect(problems.map((p) => p.message)).toContain('config file cannot have empty domain');
  });
});

describe('reference difference 6: a key repeated in one mapping', () => {
  it('the last occurrence wins, with a warning naming the lines', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: hour\n      requests_per_unit: 2\n      requests_per_unit: 7\n';
    expect(limitOf(load(content), ['k', 'v'])).toBe(7);
    const warnings = warningsOf(content);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ path: 'descriptors[0].rate_limit.requests_per_unit' });
    expect(warnings[0]!.message).toMatch(
      /written 2 times \(lines 6, 7\); only the last one \(line 7\) is used/,
    );
  });

  it('domain and key repeated: the last wins', () => {
    const snapshot = load(
      'domain: d0\ndomain: d\ndescriptors:\n  - key: k\n    key: j\n    rate_limit: {unit: hour, requests_per_unit: 2}\n',
    );
    expect([...snapshot.domains.keys()]).toEqual(['d']);
    expect(limitOf(snapshot, ['j', 'v'])).toBe(2);
    expect(limitOf(snapshot, ['k', 'v'])).toBeUndefined();
  });

  it('a repeated mapping is merged, later keys over earlier ones, as the reference decodes it', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2, name: a}\n    rate_limit: {requests_per_unit: 7}\n';
    const match = load(content).getLimit('d', descriptor(['k', 'v']));
    expect(match?.rule).toMatchObject({ requestsPerUnit: 7, unit: 'hour', name: 'a' });
    expect(warningsOf(content)[0]!.message).toContain('the mappings are merged');
  });

  it('a repeated descriptors list: the last replaces the first', () => {
    const snapshot = load(
      'domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 2}\ndescriptors:\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 3}\n',
    );
    expect(limitOf(snapshot, ['a', 'v'])).toBeUndefined();
    expect(limitOf(snapshot, ['b', 'v'])).toBe(3);
  });
});
