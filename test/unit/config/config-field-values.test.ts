/**
 * What the validator makes of each field's value, in the cases the other config tests leave open
 * (src/config/validate.ts, docs/configuration.md): empty and null values, values of the wrong
 * type (each reported once, with the message a user sees, and the limit not built), where a
 * problem points, and `metadata` converted to JSON as the reference hands it on.
 */
import { describe, expect, it } from 'vitest';
import {
  validateFiles,
  type ConfigOptions,
  type DescriptorConfig,
  type FileConfig,
} from '../../../src/config/validate.js';

interface Checked {
  /** `path: message`, position suffixes removed. */
  readonly problems: string[];
  readonly warnings: string[];
  readonly config: FileConfig | undefined;
}

const stripPosition = (message: string): string =>
  message.replace(/ \(line \d+, column \d+\)$/, '');

function check(content: string, options?: ConfigOptions): Checked {
  const result = validateFiles([{ name: 'rules.yaml', content }], options);
  return {
    problems: result.problems.map((p) => `${p.file} ${p.path}: ${stripPosition(p.message)}`),
    warnings: result.warnings.map((p) => `${p.file} ${p.path}: ${stripPosition(p.message)}`),
    config: result.configs[0],
  };
}

/** The one descriptor `key: k` of a file, with `more` (indented lines) added to it. */
function descriptor(more: string, options?: ConfigOptions): Checked & { d: DescriptorConfig } {
  const checked = check(`domain: d\ndescriptors:\n  - key: k\n${more}`, options);
  return { ...checked, d: checked.config!.descriptors[0]! };
}

/** `line:column` each problem names. */
const where = (content: string, options?: ConfigOptions): string[] =>
  validateFiles([{ name: 'rules.yaml', content }], options).problems.map(
    (p) => /\(line (\d+), column (\d+)\)$/.exec(p.message)?.slice(1).join(':') ?? 'none',
  );
const whereWarned = (content: string): string[] =>
  validateFiles([{ name: 'rules.yaml', content }]).warnings.map(
    (p) => /\(line (\d+), column (\d+)\)$/.exec(p.message)?.slice(1).join(':') ?? 'none',
  );

describe('empty and null values', () => {
  it('an empty rate_limit is no rule, without a problem, as in the reference', () => {
    const { problems, d } = descriptor('    rate_limit:\n');
    expect(problems).toEqual([]);
    expect(d.rateLimit).toBeUndefined();
  });

  it('empty requests_per_unit, replaces and flags read as 0, none and false', () => {
    const { problems, d } = descriptor(
      '    shadow_mode:\n    rate_limit:\n      unit: minute\n      requests_per_unit:\n      replaces:\n',
    );
    expect(problems).toEqual([]);
    expect(d.shadowMode).toBe(false);
    expect(d.rateLimit).toMatchObject({ unit: 'minute', requestsPerUnit: 0, replaces: [] });
  });

  it('an explicit null value is an empty text', () => {
    const { problems, d } = descriptor(
      '    value: null\n    rate_limit: {unit: second, name: ~}\n',
    );
    expect(problems).toEqual([]);
    expect(d.value).toBe('');
    expect(d.rateLimit!.name).toBe('');
  });

  it('an empty unit is an invalid unit, named as empty text', () => {
    const { problems, d } = descriptor(
      '    rate_limit:\n      unit:\n      requests_per_unit: 1\n',
    );
    expect(problems).toEqual([
      "rules.yaml descriptors[0].rate_limit.unit: invalid rate limit unit ''; use one of second, minute, hour, day, week, month or year",
    ]);
    expect(d.rateLimit).toBeUndefined();
  });

  it('an empty rate_limits is refused, saying it is empty', () => {
    expect(descriptor('    rate_limits:\n').problems).toEqual([
      'rules.yaml descriptors[0].rate_limits: rate_limits must be a non-empty list of limits such as [{unit: second, requests_per_unit: 10}, {unit: day, requests_per_unit: 1000}], not empty',
    ]);
  });
});

describe('values of the wrong type', () => {
  it('a domain that is not text leaves the file without a domain, so no duplicate is reported', () => {
    const bad = 'domain: [edge]\ndescriptors: [{key: k}]\n';
    const result = validateFiles([
      { name: 'a.yaml', content: bad },
      { name: 'b.yaml', content: bad },
    ]);
    expect(result.configs.map((c) => c?.domain)).toEqual(['', '']);
    expect(result.problems.map((p) => `${p.file} ${p.path}`)).toEqual([
      'a.yaml domain',
      'b.yaml domain',
    ]);
  });

  it('a value that is not text is reported and leaves the node a key-only one', () => {
    const { problems, d } = descriptor('    value: [x]\n');
    expect(problems).toEqual([
      'rules.yaml descriptors[0].value: value must be a string (for example value: /login), not a list',
    ]);
    expect(d.value).toBe('');
  });

  it('a name that is not text is reported and the limit is not built', () => {
    const { problems, d } = descriptor(
      '    rate_limit: {unit: second, requests_per_unit: 1, name: [x]}\n',
    );
    expect(problems).toEqual([
      'rules.yaml descriptors[0].rate_limit.name: name must be a string (for example name: per_user), not a list',
    ]);
    expect(d.rateLimit).toBeUndefined();
  });

  it('a unit that is not text next to unlimited is reported and the limit is not built', () => {
    const { problems, d } = descriptor('    rate_limit: {unlimited: true, unit: [second]}\n');
    expect(problems).toEqual([
      'rules.yaml descriptors[0].rate_limit.unit: unit must be a string (for example unit: second), not a list',
    ]);
    expect(d.rateLimit).toBeUndefined();
  });

  it('an algorithm that is not text gets an example', () => {
    expect(
      descriptor('    rate_limit: {unit: second, requests_per_unit: 1, algorithm: [x]}\n').problems,
    ).toEqual([
      'rules.yaml descriptors[0].rate_limit.algorithm: algorithm must be a string (for example algorithm: token_bucket), not a list',
    ]);
  });

  it('a replaces name that is not text: reported, and the entry is empty', () => {
    expect(
      descriptor('    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: [x]}]}\n')
        .problems,
    ).toEqual([
      'rules.yaml descriptors[0].rate_limit.replaces[0].name: name must be a string (for example name: other_limit), not a list',
      "rules.yaml descriptors[0].rate_limit.replaces[0]: should not have an empty replaces entry; write '- name: <name of the rule to replace>'",
    ]);
  });

  it('an invalid unit is the only problem, also under an algorithm with bounds', () => {
    for (const algorithm of ['token_bucket', 'sliding_log', 'fixed_window']) {
      const { problems } = descriptor(
        `    rate_limit: {unit: fortnight, requests_per_unit: 4294967295, algorithm: ${algorithm}}\n`,
      );
      expect(problems).toEqual([
        "rules.yaml descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; use one of second, minute, hour, day, week, month or year",
      ]);
    }
  });

  it('a number above 2^63-1 is reported once, as the reference refuses it', () => {
    const { problems } = descriptor(
      '    rate_limit: {unit: second, requests_per_unit: 18446744073709551615}\n',
    );
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(
      'requests_per_unit: error checking config: requests_per_unit is ',
    );
    expect(problems[0]).toContain('a whole number above 2^63-1');
  });

  it('booleans: only a quoted true or false is told to drop the quotes', () => {
    const flag = (text: string) => descriptor(`    shadow_mode: ${text}\n`).problems;
    expect(flag('1')).toEqual([
      'rules.yaml descriptors[0].shadow_mode: shadow_mode must be true or false, not 1',
    ]);
    expect(flag('[true]')).toEqual([
      'rules.yaml descriptors[0].shadow_mode: shadow_mode must be true or false, not a list',
    ]);
    expect(flag('"yes"')).toEqual([
      "rules.yaml descriptors[0].shadow_mode: shadow_mode must be true or false, not 'yes'",
    ]);
    expect(flag('"False"')).toEqual([
      "rules.yaml descriptors[0].shadow_mode: shadow_mode must be true or false, not 'False'; write it without quotes",
    ]);
  });
});

describe('rate_limits with one bad item builds no limits', () => {
  it('an item that is not a mapping', () => {
    const { problems, d } = descriptor(
      '    rate_limits:\n      - 5\n      - {unit: minute, requests_per_unit: 1}\n',
    );
    expect(problems).toEqual([
      'rules.yaml descriptors[0].rate_limits[0]: config error, yaml file contains list of type other than map: 5',
    ]);
    expect(d.rateLimits).toBeUndefined();
  });

  it('an unlimited item', () => {
    const { problems, d } = descriptor(
      '    rate_limits:\n      - {unit: minute, requests_per_unit: 1}\n      - {unlimited: true}\n',
    );
    expect(problems).toEqual([
      'rules.yaml descriptors[0].rate_limits[1].unlimited: unlimited cannot be one of several limits; use rate_limit: {unlimited: true} on its own',
    ]);
    expect(d.rateLimits).toBeUndefined();
  });
});

describe('where a problem points', () => {
  it('a list item that is an alias of a scalar: at the scalar the alias names', () => {
    const content =
      'domain: d\nx: &five 5\ndescriptors:\n  - key: k\n    descriptors:\n      - *five\n';
    // The unknown top-level key is reported too; the item's problem points at line 2 ("5").
    expect(where(content)).toEqual(['2:1', '2:10']);
  });

  it('a too-large sliding_log limit under DEFAULT_ALGORITHM: at the rule, which names no algorithm', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10001}\n';
    expect(where(content, { defaultAlgorithm: 'sliding_log' })).toEqual(['4:17']);
  });

  it('a token bucket too large by its limit, with algorithm written: at the rule, not the algorithm', () => {
    const content =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, algorithm: token_bucket, requests_per_unit: 4294967295}\n';
    expect(where(content)).toEqual(['4:17']);
  });

  it('a repeated key is warned about at its last occurrence', () => {
    const content = 'domain: d\ndescriptors:\n  - key: k\n    key: j\n    value: v\n';
    expect(whereWarned(content)).toEqual(['4:5']);
  });
});

describe('metadata as JSON', () => {
  it('scalars as YAML 1.1 reads them, timestamps as written, lists and nested mappings', () => {
    const { problems, d } = descriptor(`    metadata:
      text: hello
      quoted: "42"
      int: 42
      hex: 0x10
      neg: -3
      on: true
      nothing: null
      empty:
      list: [1, two, {three: 3}, [4]]
      day: 2024-01-02
      stamp: 2001-12-14t21:59:43.10-05:00
      7: seven
`);
    expect(problems).toEqual([]);
    expect(d.metadata).toStrictEqual({
      '7': 'seven',
      text: 'hello',
      quoted: '42',
      int: 42,
      hex: 16,
      neg: -3,
      // `on` is a YAML 1.1 boolean, as a key too.
      true: true,
      nothing: null,
      empty: null,
      list: [1, 'two', { three: 3 }, [4]],
      day: '2024-01-02',
      stamp: '2001-12-14t21:59:43.10-05:00',
    });
  });

  it("applies merge keys as the reference's YAML reader does: explicit keys win", () => {
    const { problems, d } = descriptor(`    metadata:
      base: &base {team: edge, tier: 1}
      <<: [*base, {owner: ops, tier: 3}]
      tier: 2
`);
    expect(problems).toEqual([]);
    expect(d.metadata).toStrictEqual({
      base: { team: 'edge', tier: 1 },
      team: 'edge',
      owner: 'ops',
      tier: 2,
    });
    expect(descriptor('    metadata:\n      <<: {a: 1}\n').d.metadata).toStrictEqual({ a: 1 });
  });

  it('an empty mapping is no metadata; a mapping with a key is kept', () => {
    expect(descriptor('    metadata: {}\n').d.metadata).toBeUndefined();
    expect(descriptor('    metadata: {a: 1}\n').d.metadata).toStrictEqual({ a: 1 });
  });
});
