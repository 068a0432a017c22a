import { describe, expect, it } from 'vitest';
import { counterKey, decodeCounterKey } from '../../../src/limiter/keys.js';
import { makeRule } from '../../helpers/rules.js';

const RULE = makeRule({ requestsPerUnit: 10, fullKey: 'edge.k' });

describe('decodeCounterKey: the edges of the layout', () => {
  it('reads back a key with no entries (algorithm, window and domain only)', () => {
    const key = counterKey('edge', [], { rule: RULE, sharedPatterns: undefined }, 1_000);
    expect(key.split('|')).toHaveLength(3);
    expect(decodeCounterKey(key)).toEqual({
      algorithm: RULE.algorithm,
      windowMs: 1_000,
      domain: 'edge',
      entries: [],
    });
  });

  it('refuses a key cut before its domain, without throwing', () => {
    const full = counterKey('edge', [], { rule: RULE, sharedPatterns: undefined }, 1_000);
    const cut = full.slice(0, full.lastIndexOf('|'));
    expect(() => decodeCounterKey(cut)).not.toThrow();
    expect(decodeCounterKey(cut)).toBeUndefined();
  });

  it('reads back an entry whose key is empty (its separator at position 0)', () => {
    const key = counterKey(
      'edge',
      [{ key: '', value: 'v' }],
      { rule: RULE, sharedPatterns: undefined },
      1_000,
    );
    expect(decodeCounterKey(key)?.entries).toEqual([{ key: '', value: 'v', shared: false }]);
  });
});
