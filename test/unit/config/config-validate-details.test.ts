/**
 * The validator's details (src/config/validate.ts, docs/configuration.md): the exact YAML path and
 * message of each problem, that a limit with a problem is not built (so nothing half-valid
 * reaches a snapshot), the nesting bound, the key suggestions, the positions named in duplicate
 * messages, and the boundaries of the numeric checks.
 */
import { describe, expect, it } from 'vitest';
import { TOKEN_BUCKET_MAX_PRODUCT } from '../../../src/algorithms/token-bucket.js';
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
    problems: result.problems.map((p) => `${p.path}: ${stripPosition(p.message)}`),
    warnings: result.warnings.map((p) => `${p.path}: ${stripPosition(p.message)}`),
    config: result.configs[0],
  };
}

/** The first descriptor of a one-descriptor file with `rate_limit: <rule>`. */
function ruleCheck(rule: string, options?: ConfigOptions): Checked & { d: DescriptorConfig } {
  const checked = check(`domain: d\ndescriptors:\n  - key: k\n    rate_limit: ${rule}\n`, options);
  return { ...checked, d: checked.config!.descriptors[0]! };
}

describe('a limit with a problem is reported and not built', () => {
  it.each([
    ['a unit that is not a string', '{unit: [second], requests_per_unit: 1}'],
    ['an unknown unit', '{unit: fortnight, requests_per_unit: 1}'],
    ['no unit', '{requests_per_unit: 1}'],
    ['a negative count', '{unit: second, requests_per_unit: -1}'],
    ['a count above uint32', '{unit: second, requests_per_unit: 4294967296}'],
    ['an unknown algorithm', '{unit: second, requests_per_unit: 1, algorithm: leaky}'],
    ['an algorithm that is not a string', '{unit: second, requests_per_unit: 1, algorithm: [x]}'],
    ['unit_multiplier 0', '{unit: second, requests_per_unit: 1, unit_multiplier: 0}'],
    ['unit_multiplier -1', '{unit: second, requests_per_unit: 1, unit_multiplier: -1}'],
    [
      'a negative burst',
      '{unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: -1}',
    ],
    ['burst without token_bucket', '{unit: second, requests_per_unit: 1, burst: 2}'],
    ['unlimited with a unit', '{unlimited: true, unit: second}'],
    ['replaces that is not a list', '{unit: second, requests_per_unit: 1, replaces: x}'],
    [
      'replaces naming itself',
      '{unit: second, requests_per_unit: 1, name: a, replaces: [{name: a}]}',
    ],
    ['an empty replaces entry', '{unit: second, requests_per_unit: 1, replaces: [{name: ""}]}'],
    [
      'a replaces item that is not a mapping',
      '{unit: second, requests_per_unit: 1, replaces: [x]}',
    ],
  ])('%s', (_, rule) => {
    const { problems, d } = ruleCheck(rule);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^descriptors\[0\]\.rate_limit/);
    expect(d.rateLimit).toBeUndefined();
    expect(d.key).toBe('k');
  });

  it('a valid limit is built with every field', () => {
    const { problems, d } = ruleCheck(
      '{unit: Minute, requests_per_unit: 7, name: n, replaces: [{name: o}], algorithm: TOKEN_BUCKET, unit_multiplier: 5, burst: 9}',
    );
    expect(problems).toEqual([]);
    expect(d.rateLimit).toEqual({
      unit: 'minute',
      requestsPerUnit: 7,
      unlimited: false,
      name: 'n',
      replaces: ['o'],
      algorithm: 'token_bucket',
      unitMultiplier: 5,
      burst: 9,
    });
  });

  it('defaults: count 0, multiplier 1, no name, no burst, no algorithm; an empty name and value are ""', () => {
    const { problems, d } = ruleCheck('{unit: second, name: }');
    expect(problems).toEqual([]);
    expect(d.rateLimit).toEqual({
      unit: 'second',
      requestsPerUnit: 0,
      unlimited: false,
      name: '',
      replaces: [],
      algorithm: undefined,
      unitMultiplier: 1,
      burst: undefined,
    });
    expect(d.value).toBe('');
  });

  it('unlimited with no unit is built without a unit; a non-unit text next to it is ignored', () => {
    expect(ruleCheck('{unlimited: true}').d.rateLimit).toMatchObject({
      unit: undefined,
      unlimited: true,
    });
    const odd = ruleCheck('{unlimited: true, unit: whenever}');
    expect(odd.problems).toEqual([]);
    expect(odd.d.rateLimit).toMatchObject({ unit: undefined, unlimited: true });
  });

  it('a rate_limits list with one bad item builds no limits at all', () => {
    const { problems, config } = check(`domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {unit: parsec, requests_per_unit: 1}
`);
    expect(problems).toEqual([
      "descriptors[0].rate_limits[1].unit: invalid rate limit unit 'parsec'; use one of second, minute, hour, day, week, month or year",
    ]);
    expect(config!.descriptors[0]!.rateLimits).toBeUndefined();
  });

  it('rate_limits items that are not mappings, unlimited, or repeat a window are refused', () => {
    const { problems, config } = check(`domain: d
descriptors:
  - key: k
    rate_limits:
      - 5
      - {unlimited: true}
      - {unit: minute, requests_per_unit: 1}
      - {unit: second, requests_per_unit: 60, unit_multiplier: 60}
`);
    expect(problems).toEqual([
      'descriptors[0].rate_limits[0]: config error, yaml file contains list of type other than map: 5',
      'descriptors[0].rate_limits[1].unlimited: unlimited cannot be one of several limits; use rate_limit: {unlimited: true} on its own',
      'descriptors[0].rate_limits[3]: rate_limits[2] already has a sliding_window limit with a 60000 ms window; keep the stricter one',
    ]);
    expect(config!.descriptors[0]!.rateLimits).toBeUndefined();
  });

  it('the same window under two algorithms is two limits', () => {
    const { problems, config } = check(`domain: d
descriptors:
  - key: k
    rate_limits:
      - {unit: minute, requests_per_unit: 1}
      - {unit: minute, requests_per_unit: 2, algorithm: fixed_window}
`);
    expect(problems).toEqual([]);
    expect(config!.descriptors[0]!.rateLimits!.map((l) => l.requestsPerUnit)).toEqual([1, 2]);
  });

  it('an empty rate_limits is refused, saying what it found', () => {
    const base = 'domain: d\ndescriptors:\n  - key: k\n    rate_limits:';
    const message =
      'descriptors[0].rate_limits: rate_limits must be a non-empty list of limits such as [{unit: second, requests_per_unit: 10}, {unit: day, requests_per_unit: 1000}], not ';
    expect(check(`${base}\n`).problems).toEqual([`${message}empty`]);
    expect(check(`${base} []\n`).problems).toEqual([`${message}an empty list`]);
  });
});

describe('the numeric bounds', () => {
  it('token_bucket: capacity x window may equal 2^53 - 1, not exceed it', () => {
    // A one-second window: capacity 9007199254740 x 1000 ms < 2^53 - 1 < capacity + 1.
    const fits = Math.floor(TOKEN_BUCKET_MAX_PRODUCT / 1_000);
    expect(
      ruleCheck(`{unit: second, requests_per_unit: 1, algorithm: token_bucket, burst: ${fits}}`)
        .problems,
    ).toEqual([
      'descriptors[0].rate_limit.burst: burst must be a whole number from 0 to 4294967295, not 9007199254740',
    ]);
    // Within uint32, the product bound is reached through the window: a year is 31536000000 ms.
    const yearMs = 365 * 24 * 3_600_000;
    const most = Math.floor(TOKEN_BUCKET_MAX_PRODUCT / yearMs);
    const atBound = ruleCheck(
      `{unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: ${most}}`,
    );
    expect(atBound.problems).toEqual([]);
    expect(atBound.d.rateLimit?.burst).toBe(most);
    const over = ruleCheck(
      `{unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: ${most + 1}}`,
    );
    expect(over.problems).toEqual([
      `descriptors[0].rate_limit.burst: token_bucket capacity ${most + 1} x window ${yearMs} ms is too large to count exactly (the product must stay below 2^53); use a smaller burst or a shorter window`,
    ]);
    expect(over.d.rateLimit).toBeUndefined();
    // Without burst the capacity is requests_per_unit, and the problem is named there; the
    // multiplier lengthens the window.
    const noBurst = ruleCheck(
      `{unit: year, requests_per_unit: ${most}, algorithm: token_bucket, unit_multiplier: 2}`,
    );
    expect(noBurst.problems).toEqual([
      `descriptors[0].rate_limit.requests_per_unit: token_bucket capacity ${most} x window ${2 * yearMs} ms is too large to count exactly (the product must stay below 2^53); use a smaller burst or a shorter window`,
    ]);
    expect(
      ruleCheck(`{unit: year, requests_per_unit: ${most}, algorithm: token_bucket}`).problems,
    ).toEqual([]);
    // The default algorithm counts too.
    expect(
      ruleCheck(`{unit: year, requests_per_unit: ${most + 1}}`, {
        defaultAlgorithm: 'token_bucket',
      }).problems,
    ).toHaveLength(1);
  });

  it('sliding_log: at most 10000 per unit', () => {
    expect(
      ruleCheck('{unit: second, requests_per_unit: 10000, algorithm: sliding_log}').problems,
    ).toEqual([]);
    const over = ruleCheck('{unit: second, requests_per_unit: 10001, algorithm: sliding_log}');
    expect(over.problems).toEqual([
      'descriptors[0].rate_limit.requests_per_unit: sliding_log keeps one timestamp per admitted hit, so requests_per_unit is at most 10000 (found 10001); use sliding_window for larger limits',
    ]);
    expect(over.d.rateLimit).toBeUndefined();
    expect(ruleCheck('{unit: second, requests_per_unit: 10001}').problems).toEqual([]);
  });

  it('requests_per_unit: 0 to 4294967295, hex and underscores as the reference reads them', () => {
    expect(
      ruleCheck('{unit: second, requests_per_unit: 4294967295}').d.rateLimit?.requestsPerUnit,
    ).toBe(4294967295);
    expect(ruleCheck('{unit: second, requests_per_unit: 0x10}').d.rateLimit?.requestsPerUnit).toBe(
      16,
    );
    expect(ruleCheck('{unit: second, requests_per_unit: 1_000}').d.rateLimit?.requestsPerUnit).toBe(
      1000,
    );
    expect(ruleCheck('{unit: second, requests_per_unit: 0}').d.rateLimit?.requestsPerUnit).toBe(0);
    expect(ruleCheck('{unit: second, requests_per_unit: "12"}').problems).toEqual([
      "descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, not '12'; write it without quotes",
    ]);
    expect(ruleCheck('{unit: second, requests_per_unit: "12a"}').problems).toEqual([
      "descriptors[0].rate_limit.requests_per_unit: requests_per_unit must be a whole number from 0 to 4294967295, not '12a'",
    ]);
    expect(ruleCheck('{unit: second, requests_per_unit: "a12"}').problems[0]).not.toMatch(
      /without quotes/,
    );
  });

  it('floats and numbers above 2^63-1 are refused anywhere, as the reference refuses them', () => {
    expect(check('domain: d\ndescriptors:\n  - key: k\n    value: 1.5\n').problems).toEqual([
      'descriptors[0].value: error checking config: value is 1.5, a floating-point number, which envoyproxy/ratelimit refuses; write a whole number, or quote it if it is text ("1.5")',
    ]);
    expect(check('domain: 9223372036854775808\ndescriptors: []\n').problems).toEqual([
      'domain: error checking config: domain is 9223372036854775808, a whole number above 2^63-1, which envoyproxy/ratelimit refuses; write a whole number, or quote it if it is text ("9223372036854775808")',
    ]);
    expect(ruleCheck('{unit: second, requests_per_unit: 2.5}').problems).toEqual([
      'descriptors[0].rate_limit.requests_per_unit: error checking config: requests_per_unit is 2.5, a floating-point number, which envoyproxy/ratelimit refuses; write a whole number, or quote it if it is text ("2.5")',
    ]);
    // A whole number keeps its text as a string value.
    expect(check('domain: 429\ndescriptors: []\n')).toMatchObject({ problems: [] });
    expect(check('domain: 429\ndescriptors: []\n').config!.domain).toBe('429');
  });
});

describe('strings and booleans', () => {
  it('numbers, booleans and timestamps keep their text as keys and values; null is empty', () => {
    const { problems, config } = check(`domain: d
descriptors:
  - key: 1
    value: true
  - key: k
    value: 2001-12-14
  - key: n
    value: ~
`);
    expect(problems).toEqual([]);
    expect(config!.descriptors.map((d) => [d.key, d.value])).toEqual([
      ['1', 'true'],
      ['k', '2001-12-14'],
      ['n', ''],
    ]);
  });

  it('a key that is a list or mapping is refused with an example', () => {
    const { problems, config } = check(
      'domain: d\ndescriptors:\n  - key: [a]\n    value: {b: c}\n',
    );
    expect(problems).toEqual([
      'descriptors[0].key: key must be a string (for example key: remote_address), not a list',
      'descriptors[0].value: value must be a string (for example value: /login), not a mapping',
    ]);
    expect(config!.descriptors).toEqual([]);
  });

  it('a domain that is not a string is named once; an empty one says so', () => {
    expect(check('domain: [x]\ndescriptors: []\n').problems).toEqual([
      'domain: domain must be a string (for example domain: edge), not a list',
    ]);
    expect(check('domain: ""\ndescriptors: []\n').problems).toEqual([
      'domain: config file cannot have empty domain',
    ]);
    expect(check('descriptors: []\n').problems).toEqual([
      'domain: config file cannot have empty domain',
    ]);
  });

  it('booleans: unquoted only; a quoted true or false is told to drop the quotes', () => {
    const flags = (text: string) =>
      check(`domain: d\ndescriptors:\n  - key: k\n    shadow_mode: ${text}\n`);
    expect(flags('true').config!.descriptors[0]!.shadowMode).toBe(true);
    expect(flags('').config!.descriptors[0]!.shadowMode).toBe(false);
    expect(flags('"True"').problems).toEqual([
      "descriptors[0].shadow_mode: shadow_mode must be true or false, not 'True'; write it without quotes",
    ]);
    expect(flags('"truer"').problems).toEqual([
      "descriptors[0].shadow_mode: shadow_mode must be true or false, not 'truer'",
    ]);
    expect(flags('"nottrue"').problems[0]).not.toMatch(/without quotes/);
    expect(flags('1').problems).toEqual([
      'descriptors[0].shadow_mode: shadow_mode must be true or false, not 1',
    ]);
    expect(flags('"true"').config!.descriptors[0]!.shadowMode).toBe(false);
  });

  it('each descriptor flag lands in its own field, false by default', () => {
    const all = check(`domain: d
descriptors:
  - key: k
    value: "v*"
    shadow_mode: true
    detailed_metric: true
    value_to_metric: true
    share_threshold: true
    quota_mode: true
  - key: plain
`).config!.descriptors;
    expect(all[0]).toMatchObject({
      shadowMode: true,
      detailedMetric: true,
      valueToMetric: true,
      shareThreshold: true,
      quotaMode: true,
    });
    expect(all[1]).toMatchObject({
      shadowMode: false,
      detailedMetric: false,
      valueToMetric: false,
      shareThreshold: false,
      quotaMode: false,
      rateLimit: undefined,
      rateLimits: undefined,
      descriptors: [],
    });
  });
});

describe('structure', () => {
  const nested = (levels: number): string => {
    let yaml = 'domain: d\ndescriptors:\n';
    for (let i = 0; i < levels; i++) {
      const pad = '  '.repeat(2 * i);
      yaml += `${pad}  - key: k${i}\n`;
      if (i < levels - 1) yaml += `${pad}    descriptors:\n`;
    }
    return yaml;
  };

  it('descriptors nest 64 levels deep, not 65', () => {
    const ok = check(nested(64));
    expect(ok.problems).toEqual([]);
    let level = ok.config!.descriptors;
    for (let i = 0; i < 63; i++) level = level[0]!.descriptors;
    expect(level[0]!.key).toBe('k63');
    const deep = check(nested(65));
    expect(deep.problems).toHaveLength(1);
    expect(deep.problems[0]).toMatch(
      /^descriptors(\[0\]\.descriptors){64}: descriptors are nested more than 64 levels deep$/,
    );
  });

  it('a file that is not a mapping, and list items that are not mappings', () => {
    expect(check('- a\n- b\n')).toEqual({
      problems: [
        ": error loading config file: the file must be a mapping with 'domain' and 'descriptors' keys, not a list",
      ],
      warnings: [],
      config: { file: 'rules.yaml', domain: '', domainPosition: undefined, descriptors: [] },
    });
    expect(check('domain: d\ndescriptors:\n  - a\n  - key: b\n').problems).toEqual([
      "descriptors[0]: config error, yaml file contains list of type other than map: 'a'",
    ]);
    expect(check('domain: d\ndescriptors: {a: b}\n').problems).toEqual([
      "descriptors: descriptors must be a list whose items start with '- key: ...', not a mapping",
    ]);
  });

  it('metadata: a mapping or nothing', () => {
    const base = 'domain: d\ndescriptors:\n  - key: k\n    metadata:';
    expect(check(`${base} {team: a}\n`).problems).toEqual([]);
    expect(check(`${base}\n`).problems).toEqual([]);
    expect(check(`${base} x\n`).problems).toEqual([
      "descriptors[0].metadata: metadata must be a mapping of names to values (for example metadata: {team: payments}), not 'x'",
    ]);
  });

  it('an empty key is refused and the descriptor dropped', () => {
    const { problems, config } = check('domain: d\ndescriptors:\n  - value: v\n  - key: b\n');
    expect(problems).toEqual(['descriptors[0].key: descriptor has empty key']);
    expect(config!.descriptors.map((d) => d.key)).toEqual(['b']);
  });

  it('rate_limit and rate_limits together: the list is dropped, the single limit kept', () => {
    const { problems, config } = check(`domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    rate_limits: [{unit: minute, requests_per_unit: 2}]
`);
    expect(problems).toEqual([
      "descriptors[0].rate_limits: a descriptor has either 'rate_limit' (one limit) or 'rate_limits' (a list), not both; move the rate_limit block into the rate_limits list",
    ]);
    expect(config!.descriptors[0]!.rateLimits).toBeUndefined();
    expect(config!.descriptors[0]!.rateLimit?.requestsPerUnit).toBe(1);
  });
});

describe('unknown keys, repeated keys and their messages', () => {
  it('suggests the closest key within a third of its length (at least 2 edits)', () => {
    const key = (name: string) =>
      check(`domain: d\ndescriptors:\n  - key: k\n    ${name}: x\n`).problems[0];
    expect(key('vaule')).toBe(
      "descriptors[0].vaule: config error, unknown key 'vaule'; did you mean 'value'?",
    );
    expect(key('VALUE')).toBe(
      "descriptors[0].VALUE: config error, unknown key 'VALUE'; did you mean 'value'?",
    );
    // Two edits from `key` (length 3): still suggested; three are not.
    expect(key('kez1')).toBe(
      "descriptors[0].kez1: config error, unknown key 'kez1'; did you mean 'key'?",
    );
    expect(key('zzzzz')).toBe(
      "descriptors[0].zzzzz: config error, unknown key 'zzzzz'; valid keys here: key, value, rate_limit, descriptors, shadow_mode, detailed_metric, value_to_metric, share_threshold, quota_mode, metadata, rate_limits",
    );
    // The closest wins, and the first of equally close ones.
    expect(key('shadow_modes')).toMatch(/did you mean 'shadow_mode'\?$/);
    expect(key('valuee')).toMatch(/did you mean 'value'\?$/);
    // A long key allows a third of its length in edits.
    expect(key('detailed_metricxyz')).toMatch(/did you mean 'detailed_metric'\?$/);
    expect(key('detailed_mexyzxyzx')).toMatch(/valid keys here/);
  });

  it('an unknown key at the top level has a bare path; in a rule, the rule path', () => {
    expect(check('domain: d\ndomian: e\ndescriptors: []\n').problems).toEqual([
      "domian: config error, unknown key 'domian'; did you mean 'domain'?",
    ]);
    expect(ruleCheck('{unit: second, requests_per_unit: 1, nmae: x}').problems).toEqual([
      "descriptors[0].rate_limit.nmae: config error, unknown key 'nmae'; did you mean 'name'?",
    ]);
    expect(
      ruleCheck('{unit: second, requests_per_unit: 1, replaces: [{nam: x}]}').problems,
    ).toEqual([
      "descriptors[0].rate_limit.replaces[0].nam: config error, unknown key 'nam'; did you mean 'name'?",
      "descriptors[0].rate_limit.replaces[0]: should not have an empty replaces entry; write '- name: <name of the rule to replace>'",
    ]);
  });

  it('an extension key in the wrong place is an error naming its place; a reference key only a warning', () => {
    const misplaced = check(`domain: d
descriptors:
  - key: k
    algorithm: token_bucket
    rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}
`);
    expect(misplaced.problems).toEqual([
      "descriptors[0].algorithm: config error, unknown key 'algorithm'; it belongs inside rate_limit",
    ]);
    expect(misplaced.warnings).toEqual([
      "descriptors[0].rate_limit.shadow_mode: 'shadow_mode' is ignored here; it belongs on a descriptor, next to 'key'",
    ]);
    const top = check('domain: d\nshadow_mode: true\ndescriptors: []\n');
    expect(top.problems).toEqual([]);
    expect(top.warnings).toEqual([
      "shadow_mode: 'shadow_mode' is ignored here; it belongs on a descriptor, next to 'key'",
    ]);
  });

  it('a repeated key: the last wins, with a warning naming every line', () => {
    const { warnings, config } = check(`domain: d
descriptors:
  - key: a
    value: one
    value: two
`);
    expect(config!.descriptors[0]!.value).toBe('two');
    expect(warnings).toEqual([
      "descriptors[0].value: 'value' is written 2 times (lines 4, 5); only the last one (line 5) is used, as envoyproxy/ratelimit reads it; remove the others",
    ]);
    expect(check('domain: a\ndomain: b\ndescriptors: []\n').warnings).toEqual([
      "domain: 'domain' is written 2 times (lines 1, 2); only the last one (line 2) is used, as envoyproxy/ratelimit reads it; remove the others",
    ]);
  });
});

describe('duplicates across the file set', () => {
  it('a duplicate composite key names where it was first defined, in this file or another', () => {
    const same = validateFiles([
      { name: 'a.yaml', content: 'domain: d\ndescriptors:\n  - key: k\n  - key: k\n' },
    ]);
    expect(same.problems.map((p) => p.message)).toEqual([
      "duplicate descriptor composite key 'd.k'; it is first defined at line 3, column 5 (line 4, column 5)",
    ]);
    const across = validateFiles(
      [
        { name: 'a.yaml', content: 'domain: d\ndescriptors:\n  - key: k\n    value: v\n' },
        { name: 'b.yaml', content: 'domain: d\ndescriptors:\n  - key: k_v\n' },
      ],
      { mergeDomainConfigs: true },
    );
    expect(across.problems).toEqual([
      {
        file: 'b.yaml',
        path: 'descriptors[0]',
        message:
          "duplicate descriptor composite key 'd.k_v'; it is first defined at line 3, column 5 of a.yaml (line 3, column 5)",
      },
    ]);
  });

  it('nested keys are scoped by their parent; a file without a domain takes part in no check', () => {
    const ok = validateFiles([
      {
        name: 'a.yaml',
        content:
          'domain: d\ndescriptors:\n  - key: a\n    descriptors: [{key: x}]\n  - key: b\n    descriptors: [{key: x}]\n',
      },
      { name: 'b.yaml', content: 'domain: ""\ndescriptors:\n  - key: a\n' },
      { name: 'c.yaml', content: 'domain: ""\ndescriptors:\n  - key: a\n' },
    ]);
    expect(ok.problems.map((p) => `${p.file}: ${p.message}`)).toEqual([
      expect.stringMatching(/^b\.yaml: config file cannot have empty domain/),
      expect.stringMatching(/^c\.yaml: config file cannot have empty domain/),
    ]);
  });

  it('a duplicate domain without merging names the other file and the line', () => {
    const { problems } = validateFiles([
      { name: 'a.yaml', content: 'domain: d\ndescriptors: []\n' },
      { name: 'b.yaml', content: '\ndomain: d\ndescriptors: []\n' },
    ]);
    expect(problems).toEqual([
      {
        file: 'b.yaml',
        path: 'domain',
        message:
          "duplicate domain 'd' in config file; it is already defined in a.yaml (set MERGE_DOMAIN_CONFIG=true to merge files of one domain) (line 2, column 9)",
      },
    ]);
  });
});

describe('where a problem points', () => {
  /** The `line:column` each problem names. */
  const where = (content: string): string[] =>
    validateFiles([{ name: 'rules.yaml', content }]).problems.map(
      (p) => /\(line (\d+), column (\d+)\)$/.exec(p.message)?.slice(1).join(':') ?? 'none',
    );
  /** `line:column` (1-based) of the first `needle` in `content`. */
  const at = (content: string, needle: string): string => {
    const before = content.slice(0, content.indexOf(needle)).split('\n');
    return `${before.length}:${before.at(-1)!.length + 1}`;
  };
  const rule = (text: string): string =>
    `domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, ${text}}\n`;

  it('at the offending value when there is one, else at its key', () => {
    const algorithm = rule('algorithm: leaky');
    expect(where(algorithm)).toEqual([at(algorithm, 'leaky')]);
    const multiplier = rule('unit_multiplier: 0');
    expect(where(multiplier)).toEqual([at(multiplier, '0}')]);
    const emptyKey = 'domain: d\ndescriptors:\n  - key: ""\n';
    expect(where(emptyKey)).toEqual([at(emptyKey, '""')]);
    const emptyName = rule('replaces: [{name: ""}]');
    expect(where(emptyName)).toEqual([at(emptyName, '""')]);
  });

  it('at the burst or algorithm key of a limit that is too large', () => {
    const yearMs = 365 * 24 * 3_600_000;
    const most = Math.floor(TOKEN_BUCKET_MAX_PRODUCT / yearMs);
    const burst = `domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, algorithm: token_bucket, burst: ${most + 1}}\n`;
    expect(where(burst)).toEqual([at(burst, 'burst:')]);
    const log =
      'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 10001, algorithm: sliding_log}\n';
    expect(where(log)).toEqual([at(log, 'algorithm:')]);
  });
});
