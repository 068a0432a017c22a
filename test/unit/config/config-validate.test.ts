import { describe, it, expect } from 'vitest';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import type { ConfigOptions } from '../../../src/config/validate.js';
import { ConfigError, type ConfigProblem } from '../../../src/errors.js';

type Files = Record<string, string>;

function problemsOf(files: Files | string, options?: ConfigOptions): ConfigProblem[] {
  const inputs =
    typeof files === 'string'
      ? [{ name: 'rules.yaml', content: files }]
      : Object.entries(files).map(([name, content]) => ({ name, content }));
  try {
    buildSnapshot(inputs, options);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return [...(error as ConfigError).problems];
  }
  return [];
}

/** The single problem of a file set, with the `(line L, column C)` suffix removed. */
function onlyProblem(files: Files | string, options?: ConfigOptions): ConfigProblem {
  const problems = problemsOf(files, options);
  expect(problems).toHaveLength(1);
  const problem = problems[0]!;
  return { ...problem, message: problem.message.replace(/ \(line \d+, column \d+\)$/, '') };
}

const rule = '{unit: second, requests_per_unit: 1}';

describe('valid files', () => {
  it('accepts the whole reference format', () => {
    const problems = problemsOf(`
domain: edge
descriptors:
  - key: remote_address
    value: "10.*"
    share_threshold: true
    shadow_mode: yes
    detailed_metric: true
    value_to_metric: false
    quota_mode: true
    rate_limit:
      unit: Second
      requests_per_unit: 4294967295
      name: ips
      replaces:
        - name: other
    descriptors:
      - key: path
        rate_limit: {unlimited: true}
`);
    expect(problems).toEqual([]);
  });

  it('accepts anchors and merge keys, as the reference’s YAML decoder does', () => {
    const content = `
domain: edge
descriptors:
  - key: a
    rate_limit: &per_minute
      unit: minute
      requests_per_unit: 3
  - key: b
    rate_limit:
      <<: *per_minute
      requests_per_unit: 9
  - key: c
    rate_limit: *per_minute
`;
    expect(problemsOf(content)).toEqual([]);
    expect(buildSnapshot([{ name: 'r.yaml', content }]).dump()).toEqual([
      'edge.a: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false',
      'edge.b: unit=MINUTE requests_per_unit=9, shadow_mode: false, quota_mode: false',
      'edge.c: unit=MINUTE requests_per_unit=3, shadow_mode: false, quota_mode: false',
    ]);
  });

  it('accepts a file with a domain and no descriptors', () => {
    expect(problemsOf('domain: edge\n')).toEqual([]);
    expect(problemsOf('---\ndomain: edge\ndescriptors:\n')).toEqual([]);
  });
});

describe('every validation error', () => {
  it('unknown key', () => {
    expect(onlyProblem('domain: edge\nfoo: 1\n')).toEqual({
      file: 'rules.yaml',
      path: 'foo',
      message: "config error, unknown key 'foo'; valid keys here: domain, descriptors",
    });
  });

  it('unknown key: a typo gets a suggestion', () => {
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, request_per_unit: 1}\n',
      ),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].rate_limit.request_per_unit',
      message: "config error, unknown key 'request_per_unit'; did you mean 'requests_per_unit'?",
    });
  });

  it('a misplaced reference key loads (as in the reference) with a warning saying where it belongs', () => {
    const snapshot = buildSnapshot([
      {
        name: 'rules.yaml',
        content:
          'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, shadow_mode: true}\n',
      },
    ]);
    expect(snapshot.warnings).toHaveLength(1);
    expect(snapshot.warnings[0]).toMatchObject({
      file: 'rules.yaml',
      path: 'descriptors[0].rate_limit.shadow_mode',
      message: expect.stringMatching(
        /^'shadow_mode' is ignored here; it belongs on a descriptor, next to 'key' \(line 4, column \d+\)$/,
      ),
    });
    // Ignored, as the reference ignores it: the rule is not in shadow mode.
    const match = snapshot.getLimit('edge', {
      entries: [{ key: 'a', value: 'x' }],
      limit: undefined,
      hitsAddend: undefined,
    });
    expect(match?.rule.shadowMode).toBe(false);
  });

  it('unlimited with a text that is not a unit loads, as in the reference', () => {
    expect(
      problemsOf(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: none}\n',
      ),
    ).toEqual([]);
  });

  it('sluice extension keys load in place and are errors elsewhere (never ignored)', () => {
    expect(
      problemsOf(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, unit_multiplier: 5, burst: 3}
  - key: b
    rate_limits: [${rule}]
`),
    ).toEqual([]);
    const misplaced = onlyProblem(
      `domain: edge\ndescriptors:\n  - key: a\n    algorithm: fixed_window\n    rate_limit: ${rule}\n`,
    );
    expect(misplaced.path).toBe('descriptors[0].algorithm');
    expect(misplaced.message).toBe(
      "config error, unknown key 'algorithm'; it belongs inside rate_limit",
    );
  });

  it('key that is not a string', () => {
    expect(onlyProblem('domain: edge\n1: x\n')).toEqual({
      file: 'rules.yaml',
      path: '',
      message: 'config error, key is not of type string: 1',
    });
  });

  it('empty domain', () => {
    const expected = {
      file: 'rules.yaml',
      path: 'domain',
      message: 'config file cannot have empty domain',
    };
    expect(onlyProblem('domain: ""\ndescriptors: []\n')).toEqual(expected);
    expect(onlyProblem('descriptors: []\n')).toEqual(expected);
    expect(onlyProblem('')).toEqual(expected);
    expect(onlyProblem('# only a comment\n')).toEqual(expected);
  });

  it('duplicate domain', () => {
    const problem = onlyProblem({
      'a.yaml': `domain: edge\ndescriptors: [{key: a, rate_limit: ${rule}}]`,
      'b.yaml': `domain: edge\ndescriptors: [{key: b, rate_limit: ${rule}}]`,
    });
    expect(problem.file).toBe('b.yaml');
    expect(problem.path).toBe('domain');
    expect(problem.message).toMatch(
      /^duplicate domain 'edge' in config file; it is already defined in a\.yaml/,
    );
    expect(problem.message).toContain('MERGE_DOMAIN_CONFIG=true');
  });

  it('duplicate domain: merged when mergeDomainConfigs is set', () => {
    const files = {
      'a.yaml': `domain: edge\ndescriptors: [{key: a, rate_limit: ${rule}}]`,
      'b.yaml': `domain: edge\ndescriptors: [{key: b, rate_limit: ${rule}}]`,
    };
    expect(problemsOf(files, { mergeDomainConfigs: true })).toEqual([]);
    const s = buildSnapshot(
      Object.entries(files).map(([name, content]) => ({ name, content })),
      { mergeDomainConfigs: true },
    );
    expect(s.dump()).toEqual([
      'edge.a: unit=SECOND requests_per_unit=1, shadow_mode: false, quota_mode: false',
      'edge.b: unit=SECOND requests_per_unit=1, shadow_mode: false, quota_mode: false',
    ]);
  });

  it('duplicate composite key across merged files is still an error', () => {
    const problem = onlyProblem(
      {
        'a.yaml': `domain: edge\ndescriptors: [{key: a, value: x, rate_limit: ${rule}}]`,
        'b.yaml': `domain: edge\ndescriptors: [{key: a, value: x, rate_limit: ${rule}}]`,
      },
      { mergeDomainConfigs: true },
    );
    expect(problem.file).toBe('b.yaml');
    expect(problem.path).toBe('descriptors[0]');
    expect(problem.message).toMatch(
      /^duplicate descriptor composite key 'edge\.a_x'; it is first defined at line 2, column \d+ of a\.yaml$/,
    );
  });

  it('empty key', () => {
    expect(
      onlyProblem(`domain: edge\ndescriptors:\n  - value: x\n    rate_limit: ${rule}\n`),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].key',
      message: 'descriptor has empty key',
    });
    expect(onlyProblem(`domain: edge\ndescriptors:\n  - key: ""\n`).message).toBe(
      'descriptor has empty key',
    );
  });

  it('duplicate composite key', () => {
    const problems = problemsOf(`
domain: edge
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: ${rule}
      - key: remote_address
        rate_limit: ${rule}
  - key: path
    value: /login
  - key: path
  - key: path
  - key: a_b
  - key: a
    value: b
`);
    expect(problems.map((p) => [p.path, p.message.replace(/;.*/, '')])).toEqual([
      [
        'descriptors[0].descriptors[1]',
        "duplicate descriptor composite key 'edge.path_/login.remote_address'",
      ],
      ['descriptors[1]', "duplicate descriptor composite key 'edge.path_/login'"],
      ['descriptors[3]', "duplicate descriptor composite key 'edge.path'"],
      // The reference indexes a level on the joined `key_value` string, so these two collide.
      ['descriptors[5]', "duplicate descriptor composite key 'edge.a_b'"],
    ]);
  });

  it('invalid unit', () => {
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
      ),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].rate_limit.unit',
      message:
        "invalid rate limit unit 'fortnight'; use one of second, minute, hour, day, week, month or year",
    });
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {requests_per_unit: 1}\n',
      ).message,
    ).toMatch(/^invalid rate limit unit ''/);
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: unknown, requests_per_unit: 1}\n',
      ).message,
    ).toMatch(/^invalid rate limit unit 'unknown'/);
  });

  it('units are case-insensitive', () => {
    const units = ['second', 'MINUTE', 'Hour', 'dAy', 'week', 'month', 'YEAR'];
    const content = `domain: edge\ndescriptors:\n${units
      .map((unit, i) => `  - key: k${i}\n    rate_limit: {unit: ${unit}, requests_per_unit: 1}\n`)
      .join('')}`;
    expect(problemsOf(content)).toEqual([]);
  });

  it('unlimited with a unit', () => {
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n',
      ),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].rate_limit.unit',
      message: 'should not specify rate limit unit when unlimited; remove the unit line',
    });
  });

  it('empty replaces entry', () => {
    const problem = onlyProblem(
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: n, replaces: [{name: ""}]}\n',
    );
    expect(problem.path).toBe('descriptors[0].rate_limit.replaces[0]');
    expect(problem.message).toMatch(/^should not have an empty replaces entry/);
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, replaces: [{}]}\n',
      ).message,
    ).toMatch(/^should not have an empty replaces entry/);
  });

  it('replaces naming its own rule', () => {
    expect(
      onlyProblem(
        'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: me, replaces: [{name: other}, {name: me}]}\n',
      ),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].rate_limit.replaces[1].name',
      message: 'replaces should not contain name of same descriptor',
    });
  });

  it('share_threshold without a wildcard value', () => {
    expect(
      onlyProblem(
        `domain: edge\ndescriptors:\n  - key: file\n    value: report.pdf\n    share_threshold: true\n    rate_limit: ${rule}\n`,
      ),
    ).toEqual({
      file: 'rules.yaml',
      path: 'descriptors[0].share_threshold',
      message:
        "share_threshold can only be used with wildcard values (containing '*'), but found key 'file_report.pdf'",
    });
    expect(
      onlyProblem(`domain: edge\ndescriptors:\n  - key: file\n    share_threshold: true\n`).message,
    ).toContain("but found key 'file'");
    expect(
      problemsOf(`domain: edge\ndescriptors:\n  - key: file\n    share_threshold: false\n`),
    ).toEqual([]);
  });

  it('bad YAML', () => {
    const problems = problemsOf('domain: edge\ndescriptors:\n  - key: a\n    value: [unclosed\n');
    expect(problems.length).toBeGreaterThan(0);
    for (const problem of problems) {
      expect(problem.file).toBe('rules.yaml');
      expect(problem.path).toBe('');
      expect(problem.message).toMatch(/^error loading config file: .+ at line \d+, column \d+$/);
    }
  });

  it('an unquoted value starting with * (a YAML alias)', () => {
    expect(
      onlyProblem('domain: edge\ndescriptors:\n  - key: host\n    value: *.example.com\n'),
    ).toEqual({
      file: 'rules.yaml',
      path: '',
      message:
        "error loading config file: unknown anchor '.example.com' referenced; a value starting with '*' must be quoted (\"*.example.com\")",
    });
  });

  it('an alias inside the node it refers to', () => {
    expect(
      onlyProblem('domain: edge\ndescriptors: &d\n  - key: a\n    descriptors: *d\n').message,
    ).toBe("error loading config file: alias '*d' refers to a node that contains it");
  });

  it('a file that is not a mapping', () => {
    expect(onlyProblem('- domain: edge\n').message).toBe(
      "error loading config file: the file must be a mapping with 'domain' and 'descriptors' keys, not a list",
    );
  });

  describe('wrong types', () => {
    const rateLimit = (body: string): string =>
      `domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, ${body}}\n`;

    it.each([
      ['-1', '-1'],
      ['4294967296', '4294967296'],
      ['[1]', 'a list'],
      ['true', 'true'],
    ])('requests_per_unit: %s', (text, shown) => {
      expect(onlyProblem(rateLimit(`requests_per_unit: ${text}`))).toEqual({
        file: 'rules.yaml',
        path: 'descriptors[0].rate_limit.requests_per_unit',
        message: `requests_per_unit must be a whole number from 0 to 4294967295, not ${shown}`,
      });
    });

    it('requests_per_unit in quotes', () => {
      expect(onlyProblem(rateLimit('requests_per_unit: "10"')).message).toBe(
        "requests_per_unit must be a whole number from 0 to 4294967295, not '10'; write it without quotes",
      );
    });

    it('value that is not a string', () => {
      expect(onlyProblem('domain: edge\ndescriptors:\n  - key: a\n    value: {x: 1}\n')).toEqual({
        file: 'rules.yaml',
        path: 'descriptors[0].value',
        message: 'value must be a string (for example value: /login), not a mapping',
      });
    });

    it('key, domain, unit and name that are not strings', () => {
      expect(onlyProblem('domain: edge\ndescriptors:\n  - key: [a]\n').message).toBe(
        'key must be a string (for example key: remote_address), not a list',
      );
      expect(onlyProblem('domain: {a: 1}\n').message).toBe(
        'domain must be a string (for example domain: edge), not a mapping',
      );
      expect(onlyProblem(rateLimit('requests_per_unit: 1, name: [x]')).message).toBe(
        'name must be a string (for example name: per_user), not a list',
      );
      expect(
        onlyProblem(
          'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: [s], requests_per_unit: 1}\n',
        ).message,
      ).toBe('unit must be a string (for example unit: second), not a list');
    });

    it('booleans', () => {
      expect(
        onlyProblem('domain: edge\ndescriptors:\n  - key: a\n    shadow_mode: "true"\n'),
      ).toEqual({
        file: 'rules.yaml',
        path: 'descriptors[0].shadow_mode',
        message: "shadow_mode must be true or false, not 'true'; write it without quotes",
      });
      expect(onlyProblem(rateLimit('unlimited: 1')).message).toBe(
        'unlimited must be true or false, not 1',
      );
    });

    it('descriptors that are not a list of mappings', () => {
      expect(onlyProblem('domain: edge\ndescriptors: remote_address\n')).toEqual({
        file: 'rules.yaml',
        path: 'descriptors',
        message:
          "descriptors must be a list whose items start with '- key: ...', not 'remote_address'",
      });
      expect(onlyProblem('domain: edge\ndescriptors:\n  - remote_address\n')).toEqual({
        file: 'rules.yaml',
        path: 'descriptors[0]',
        message: "config error, yaml file contains list of type other than map: 'remote_address'",
      });
    });

    it('rate_limit that is not a mapping, replaces that is not a list', () => {
      expect(
        onlyProblem('domain: edge\ndescriptors:\n  - key: a\n    rate_limit: 10\n').message,
      ).toBe('rate_limit must be a mapping such as {unit: second, requests_per_unit: 10}, not 10');
      expect(onlyProblem(rateLimit('requests_per_unit: 1, replaces: other')).message).toBe(
        "replaces must be a list such as [{name: other_limit}], not 'other'",
      );
    });
  });
});

describe('reporting', () => {
  it('reports every error of every file with file and path, in file order', () => {
    const problems = problemsOf({
      'b.yaml': `
domain: edge
descriptors:
  - key: user
    rate_limit: {unlimited: true, unit: second}
  - key: path
    rate_limit: {unit: sometimes, requests_per_unit: -3}
`,
      'a.yaml': `
domain: ""
descriptors:
  - value: orphan
  - key: ip
    color: blue
`,
    });
    expect(problems.map(({ file, path }) => `${file}: ${path}`)).toEqual([
      'a.yaml: descriptors[0].key',
      'a.yaml: descriptors[1].color',
      'a.yaml: domain',
      'b.yaml: descriptors[0].rate_limit.unit',
      'b.yaml: descriptors[1].rate_limit.requests_per_unit',
      'b.yaml: descriptors[1].rate_limit.unit',
    ]);
  });

  it('names the line and column of each problem', () => {
    const [problem] = problemsOf(
      'domain: edge\ndescriptors:\n  - key: a\n    rate_limit: {unit: x}\n',
    );
    expect(problem?.message).toMatch(/ \(line 4, column 24\)$/);
  });

  it('throws one ConfigError whose message lists every problem', () => {
    expect(() =>
      buildSnapshot([
        { name: 'a.yaml', content: 'domain: ""\n' },
        { name: 'b.yaml', content: 'domain: b\nbad: 1\n' },
      ]),
    ).toThrow(
      /a\.yaml: domain: config file cannot have empty domain[\s\S]*\nb\.yaml: bad: config error, unknown key 'bad'/,
    );
  });
});
