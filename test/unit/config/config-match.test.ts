import { describe, it, expect } from 'vitest';
import { compileGlob, matchGlob } from '../../../src/config/glob.js';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import type { ConfigSnapshot, LimitMatch } from '../../../src/config/types.js';
import type { LimitOverride, RequestDescriptor } from '../../../src/model.js';
import { makeRule } from '../../helpers/rules.js';

function snapshot(content: string, name = 'rules.yaml'): ConfigSnapshot {
  return buildSnapshot([{ name, content }]);
}

function descriptor(entries: [string, string][], limit?: LimitOverride): RequestDescriptor {
  return { entries: entries.map(([key, value]) => ({ key, value })), limit, hitsAddend: undefined };
}

function limit(
  s: ConfigSnapshot,
  entries: [string, string][],
  domain = 'edge',
): LimitMatch | undefined {
  return s.getLimit(domain, descriptor(entries));
}

function rpu(s: ConfigSnapshot, entries: [string, string][], domain = 'edge'): number | undefined {
  return limit(s, entries, domain)?.rule.requestsPerUnit;
}

describe('matchGlob', () => {
  const matches = (pattern: string, value: string): boolean =>
    matchGlob(compileGlob(pattern), value);

  it('treats a trailing * as a prefix match, like the reference', () => {
    expect(matches('foo*', 'foo')).toBe(true);
    expect(matches('foo*', 'foobar')).toBe(true);
    expect(matches('foo*', 'fo')).toBe(false);
    expect(matches('foo*', 'xfoo')).toBe(false);
  });

  it('matches * anywhere in the pattern', () => {
    expect(matches('*-admin', 'alice-admin')).toBe(true);
    expect(matches('*-admin', 'alice-admins')).toBe(false);
    expect(matches('api/*/users', 'api/v1/users')).toBe(true);
    expect(matches('api/*/users', 'api/users')).toBe(false);
    expect(matches('a*b*c', 'abc')).toBe(true);
    expect(matches('a*b*c', 'a-x-b-y-c')).toBe(true);
    expect(matches('a*b*c', 'acb')).toBe(false);
    expect(matches('a*b*c', 'ab')).toBe(false);
    expect(matches('a*bc*bc', 'abcbc')).toBe(true);
    expect(matches('a*bc*bc', 'abc')).toBe(false);
    expect(matches('a**b', 'ab')).toBe(true);
    // Several literal runs between stars must appear in order, each after the previous one.
    expect(matches('a*b*c*d', 'a-b-c-d')).toBe(true);
    expect(matches('a*b*c*d', 'a-c-b-d')).toBe(false);
    expect(matches('x*ab*ab*y', 'xababy')).toBe(true);
    expect(matches('x*ab*ab*y', 'xaby')).toBe(false);
    expect(matches('*b*b*', 'bb')).toBe(true);
    expect(matches('*b*b*', 'b')).toBe(false);
  });

  it('lets a lone * match anything, including the empty value', () => {
    expect(matches('*', '')).toBe(true);
    expect(matches('*', 'anything')).toBe(true);
  });

  it('does not let the head and tail overlap', () => {
    expect(matches('ab*ba', 'aba')).toBe(false);
    expect(matches('ab*ba', 'abba')).toBe(true);
  });
});

describe('getLimit: choosing the node of one entry', () => {
  const rules = snapshot(`
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    value: "vip*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: user
    value: vip-alice
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: user
    value: "v*"
    rate_limit: {unit: second, requests_per_unit: 4}
`);

  it('prefers the exact key_value node', () => {
    expect(rpu(rules, [['user', 'vip-alice']])).toBe(3);
  });

  it('then the first declared wildcard that matches', () => {
    expect(rpu(rules, [['user', 'vip-bob']])).toBe(2);
    expect(rpu(rules, [['user', 'vx']])).toBe(4);
  });

  it('then the key-only default node', () => {
    expect(rpu(rules, [['user', 'bob']])).toBe(1);
  });

  it('uses declaration order, not specificity, between wildcards', () => {
    const reversed = snapshot(`
domain: edge
descriptors:
  - key: user
    value: "v*"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: user
    value: "vip*"
    rate_limit: {unit: second, requests_per_unit: 2}
`);
    expect(rpu(reversed, [['user', 'vip-bob']])).toBe(4);
  });

  it('matches a wildcard anywhere in the value (sluice extension)', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: path
    value: "/api/*/users/*"
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: host
    value: "*.example.com"
    rate_limit: {unit: second, requests_per_unit: 8}
`);
    expect(rpu(s, [['path', '/api/v1/users/42']])).toBe(7);
    expect(rpu(s, [['path', '/api/v1/orders/42']])).toBeUndefined();
    expect(rpu(s, [['host', 'www.example.com']])).toBe(8);
    expect(rpu(s, [['host', 'www.example.org']])).toBeUndefined();
  });

  it('only tries wildcards of the same key', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: a
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 1}
`);
    expect(rpu(s, [['a', 'x']])).toBe(1);
    // The reference's prefix test on "key_value" strings would also let key "a_b" match here.
    expect(rpu(s, [['a_b', 'x']])).toBeUndefined();
  });

  it('lets a * wildcard match an entry with an empty value', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: a
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    rate_limit: {unit: second, requests_per_unit: 2}
`);
    expect(rpu(s, [['a', '']])).toBe(1);
  });

  it('finds a wildcard node whose pattern text equals the value exactly', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: a
    value: "x*"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: "xy*"
    rate_limit: {unit: second, requests_per_unit: 2}
`);
    // Like the reference's exact `key_value` lookup, which runs before the wildcard scan.
    expect(rpu(s, [['a', 'xy*']])).toBe(2);
    expect(rpu(s, [['a', 'xyz']])).toBe(1);
  });

  it('accepts whole numbers written without quotes (a float must be quoted, as in the reference)', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: status
    value: 429
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: version
    value: "1.10"
    rate_limit: {unit: second, requests_per_unit: 2}
`);
    expect(rpu(s, [['status', '429']])).toBe(1);
    expect(rpu(s, [['version', '1.10']])).toBe(2);
  });
});

describe('getLimit: walking the levels', () => {
  const rules = snapshot(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: path
    value: /login
    descriptors:
      - key: user
        value: admin
        rate_limit: {unit: second, requests_per_unit: 3}
  - key: path
    value: "/log*"
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 4}
  - key: path
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: only_top
    value: x
    rate_limit: {unit: second, requests_per_unit: 6}
`);

  it('applies a rule only at the request descriptor’s last entry', () => {
    expect(rpu(rules, [['a', '1']])).toBe(1);
    expect(
      rpu(rules, [
        ['a', '1'],
        ['b', '2'],
      ]),
    ).toBe(2);
  });

  it('returns nothing when the request has more entries than the matched path', () => {
    expect(
      rpu(rules, [
        ['a', '1'],
        ['c', '3'],
      ]),
    ).toBeUndefined();
    expect(
      rpu(rules, [
        ['a', '1'],
        ['b', '2'],
        ['c', '3'],
      ]),
    ).toBeUndefined();
    expect(
      rpu(rules, [
        ['only_top', 'x'],
        ['sub', 'y'],
      ]),
    ).toBeUndefined();
  });

  it('returns nothing when the request stops above the rule', () => {
    expect(rpu(rules, [['path', '/login']])).toBeUndefined();
    expect(rpu(rules, [['path', '/other']])).toBeUndefined();
  });

  it('descends through exact, wildcard and default nodes', () => {
    expect(
      rpu(rules, [
        ['path', '/login'],
        ['user', 'admin'],
      ]),
    ).toBe(3);
    expect(
      rpu(rules, [
        ['path', '/logout'],
        ['user', 'bob'],
      ]),
    ).toBe(4);
    expect(
      rpu(rules, [
        ['path', '/home'],
        ['user', 'bob'],
      ]),
    ).toBe(5);
  });

  it('never backtracks to a wildcard or default sibling', () => {
    // /login matches exactly; its children have no default `user`, and the `/log*` and `path`
    // siblings (which do) are not tried.
    expect(
      rpu(rules, [
        ['path', '/login'],
        ['user', 'bob'],
      ]),
    ).toBeUndefined();
  });

  it('returns nothing for an empty descriptor', () => {
    expect(rpu(rules, [])).toBeUndefined();
  });

  it('matches three levels deep', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: tenant
    descriptors:
      - key: plan
        value: "gold*"
        descriptors:
          - key: user
            rate_limit: {unit: minute, requests_per_unit: 9}
`);
    expect(
      rpu(s, [
        ['tenant', 't1'],
        ['plan', 'gold-2'],
        ['user', 'u'],
      ]),
    ).toBe(9);
    expect(
      rpu(s, [
        ['tenant', 't1'],
        ['plan', 'silver'],
        ['user', 'u'],
      ]),
    ).toBeUndefined();
  });
});

describe('getLimit: what is returned', () => {
  it('whitelists a node with neither rule nor nested descriptors', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 10.0.0.1
`);
    expect(rpu(s, [['remote_address', '10.0.0.1']])).toBeUndefined();
    expect(rpu(s, [['remote_address', '10.0.0.2']])).toBe(10);
  });

  it('whitelists through the first matching wildcard node without falling through', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: user
    value: "svc-*"
  - key: user
    value: "svc-billing*"
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 10}
`);
    // svc-* is declared first and has neither rule nor children: it whitelists, and neither the
    // later, more specific wildcard nor the default node is consulted.
    expect(rpu(s, [['user', 'svc-billing-1']])).toBeUndefined();
    expect(rpu(s, [['user', 'alice']])).toBe(10);
  });

  it('returns an unlimited rule as is', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: ldap
    rate_limit: {unlimited: true}
`);
    const match = limit(s, [['ldap', 'x']]);
    expect(match?.rule.unlimited).toBe(true);
    expect(match?.rule.fromOverride).toBe(false);
  });

  it('carries the rule’s fields: unit, window, name, replaces, flags and full key', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit:
          unit: HOUR
          requests_per_unit: 20
          name: login_per_user
          replaces: [{name: generic}, {name: other}]
        shadow_mode: true
        detailed_metric: true
        value_to_metric: true
        quota_mode: true
`);
    const rule = limit(s, [
      ['path', '/login'],
      ['user', 'bob'],
    ])?.rule;
    expect(rule).toEqual({
      requestsPerUnit: 20,
      unit: 'hour',
      windowMs: 3_600_000,
      name: 'login_per_user',
      unlimited: false,
      shadowMode: true,
      replaces: ['generic', 'other'],
      algorithm: 'sliding_window',
      limits: [
        {
          requestsPerUnit: 20,
          unit: 'hour',
          unitMultiplier: 1,
          windowMs: 3_600_000,
          algorithm: 'sliding_window',
          burst: 20,
          name: 'login_per_user',
        },
      ],
      fullKey: 'edge.path_/login.user',
      detailedMetric: true,
      valueToMetric: true,
      shareThreshold: false,
      quotaMode: true,
      fromOverride: false,
    });
  });

  it('reports shadow mode off unless the descriptor sets it', () => {
    const s = snapshot(`
domain: edge
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
`);
    expect(limit(s, [['a', 'x']])?.rule.shadowMode).toBe(false);
    expect(limit(s, [['b', 'x']])?.rule.shadowMode).toBe(true);
  });

  it('returns nothing for an unknown domain', () => {
    const s = snapshot(
      'domain: edge\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]',
    );
    expect(limit(s, [['a', 'x']], 'other')).toBeUndefined();
  });

  it('returns the same prebuilt object on every call (no allocation)', () => {
    const s = snapshot(
      'domain: edge\ndescriptors: [{key: a, rate_limit: {unit: second, requests_per_unit: 1}}]',
    );
    const first = limit(s, [['a', 'x']]);
    expect(limit(s, [['a', 'y']])).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first?.rule)).toBe(true);
  });
});

describe('getLimit: Envoy’s limit override', () => {
  const s = snapshot(`
domain: edge
descriptors:
  - key: path
    value: /login
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1, name: configured}
`);

  it('replaces the configured rule', () => {
    const match = s.getLimit(
      'edge',
      descriptor([['path', '/login']], { requestsPerUnit: 42, unit: 'minute' }),
    );
    // Nothing of the configured rule (name, shadow_mode, 1/second) survives but its key.
    expect(match).toEqual({
      rule: makeRule({
        requestsPerUnit: 42,
        unit: 'minute',
        windowMs: 60_000,
        fullKey: 'edge.path_/login',
        fromOverride: true,
      }),
      sharedPatterns: undefined,
    });
  });

  it('applies to a descriptor no configured node matches', () => {
    const match = s.getLimit(
      'edge',
      descriptor(
        [
          ['user', 'bob'],
          ['tier', ''],
        ],
        { requestsPerUnit: 5, unit: 'hour' },
      ),
    );
    expect(match?.rule.requestsPerUnit).toBe(5);
    expect(match?.rule.fullKey).toBe('edge.user_bob.tier');
  });

  it('does nothing for an unknown domain', () => {
    const match = s.getLimit(
      'nope',
      descriptor([['a', 'b']], { requestsPerUnit: 5, unit: 'hour' }),
    );
    expect(match).toBeUndefined();
  });

  it('means no limit when its unit is UNKNOWN', () => {
    const match = s.getLimit(
      'edge',
      descriptor([['path', '/login']], { requestsPerUnit: 5, unit: undefined }),
    );
    expect(match).toBeUndefined();
  });
});

describe('getLimit: share_threshold', () => {
  const s = snapshot(`
domain: edge
descriptors:
  - key: file
    value: "files/*"
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: model
    value: "gpt-*"
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 10}
  - key: tenant
    value: "t*"
    share_threshold: true
    descriptors:
      - key: region
        value: "eu-*"
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plain
    value: "p*"
    rate_limit: {unit: minute, requests_per_unit: 1}
`);

  it('returns the wildcard pattern and the entry it stands for', () => {
    const match = limit(s, [['file', 'files/a.pdf']]);
    expect(match?.sharedPatterns).toEqual(['files/*']);
    expect(match?.rule.shareThreshold).toBe(true);
    expect(limit(s, [['file', 'files/b.csv']])).toBe(match);
  });

  it('keeps the pattern of a share_threshold wildcard above the rule', () => {
    const match = limit(s, [
      ['model', 'gpt-4'],
      ['user', 'u1'],
    ]);
    expect(match?.sharedPatterns).toEqual(['gpt-*', undefined]);
  });

  it('lists every shared level', () => {
    const match = limit(s, [
      ['tenant', 't1'],
      ['region', 'eu-west'],
    ]);
    expect(match?.sharedPatterns).toEqual(['t*', 'eu-*']);
  });

  it('shares nothing without share_threshold', () => {
    const match = limit(s, [['plain', 'px']]);
    expect(match?.sharedPatterns).toBeUndefined();
  });
});

describe('merged domains', () => {
  it('keeps wildcard declaration order across files, in file name order', () => {
    const s = buildSnapshot(
      [
        {
          name: 'b.yaml',
          content:
            'domain: edge\ndescriptors: [{key: u, value: "a*", rate_limit: {unit: second, requests_per_unit: 2}}]',
        },
        {
          name: 'a.yaml',
          content:
            'domain: edge\ndescriptors: [{key: u, value: "ab*", rate_limit: {unit: second, requests_per_unit: 1}}]',
        },
      ],
      { mergeDomainConfigs: true },
    );
    expect(rpu(s, [['u', 'abc']])).toBe(1);
    expect(rpu(s, [['u', 'axe']])).toBe(2);
    expect(s.domains.get('edge')?.files).toEqual(['a.yaml', 'b.yaml']);
    expect(s.files).toEqual(['a.yaml', 'b.yaml']);
  });

  it("tries a later file's key wildcard after an earlier file's value wildcard", () => {
    const s = buildSnapshot(
      [
        {
          name: 'a.yaml',
          content:
            'domain: edge\ndescriptors: [{key: k, value: "x*", rate_limit: {unit: second, requests_per_unit: 1}}]',
        },
        {
          name: 'b.yaml',
          content:
            'domain: edge\ndescriptors: [{key: "k*", rate_limit: {unit: second, requests_per_unit: 2}}]',
        },
      ],
      { mergeDomainConfigs: true },
    );
    expect(rpu(s, [['k', 'xyz']])).toBe(1);
    expect(rpu(s, [['k', 'other']])).toBe(2);
  });
});

describe('the snapshot', () => {
  const s = snapshot(`
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: hour, requests_per_unit: 20}
  - key: ldap
    shadow_mode: true
    rate_limit: {unlimited: true}
`);

  it('dumps one line per rule in the reference’s /rlconfig format, sorted', () => {
    expect(s.dump()).toEqual([
      'edge.ldap: unit=UNKNOWN requests_per_unit=0, shadow_mode: true, quota_mode: false',
      'edge.path_/login.remote_address: unit=HOUR requests_per_unit=20, shadow_mode: false, quota_mode: false',
      'edge.remote_address: unit=SECOND requests_per_unit=10, shadow_mode: false, quota_mode: false',
    ]);
  });

  it('cannot be changed', () => {
    expect(Object.isFrozen(s)).toBe(true);
    expect(Object.isFrozen(s.files)).toBe(true);
    expect('set' in s.domains).toBe(false);
    expect(Object.isFrozen(s.domains.get('edge'))).toBe(true);
    s.dump().push('extra');
    expect(s.dump()).toHaveLength(3);
  });

  it('lists its domains and files', () => {
    expect([...s.domains.keys()]).toEqual(['edge']);
    expect(s.domains.get('edge')).toEqual({ name: 'edge', files: ['rules.yaml'] });
    expect(s.files).toEqual(['rules.yaml']);
  });
});
