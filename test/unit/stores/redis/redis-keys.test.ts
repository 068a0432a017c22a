/**
 * Redis key names (src/stores/redis/keys.ts): the hash tag (FNV-1a 32 of a counter key's
 * descriptor part) and the cluster slot of a tag, against values computed independently (FNV-1a
 * reference values, and `CLUSTER KEYSLOT` of a real Redis 7 cluster node).
 */
import { describe, expect, it } from 'vitest';
import { hashTagOf, redisKeyOf, slotOfTag } from '../../../../src/stores/redis/keys.js';

describe('hashTagOf', () => {
  it('is FNV-1a 32 of what follows ALG|WINDOW|, as 8 lower-case hex digits', () => {
    expect(hashTagOf('sw|60000|edge|user=a')).toBe('a4ce9b61');
    expect(hashTagOf('fw|1000|edge|user=a')).toBe('a4ce9b61');
    // Nothing after the second bar: the FNV offset basis.
    expect(hashTagOf('sw|60000|')).toBe('811c9dc5');
  });

  it('keeps leading zeros', () => {
    expect(hashTagOf('fw|60000|user=961')).toBe('000970cd');
  });

  it('hashes the whole key when it has fewer than two bars', () => {
    expect(hashTagOf('abc')).toBe('1a47e90b');
    expect(hashTagOf('x|a')).toBe('ab9b05c0');
  });
});

describe('slotOfTag', () => {
  it('agrees with CLUSTER KEYSLOT of Redis 7 for keys carrying the tag', () => {
    // redis-cli -p <cluster node> CLUSTER KEYSLOT 'x{<tag>}y'
    const keyslot: Record<string, number> = {
      '811c9dc5': 1138,
      '000970cd': 7797,
      ffffffff: 9088,
      a4ce9b61: 6791,
      e40c292c: 8264,
      '00000000': 9913,
    };
    for (const [tag, slot] of Object.entries(keyslot)) expect(slotOfTag(tag), tag).toBe(slot);
  });
});

describe('redisKeyOf', () => {
  it('is prefix, {tag}, the layout mark, then the counter key', () => {
    expect(redisKeyOf('p:', 'fw|60000|user=961')).toBe('p:{000970cd}v2|fw|60000|user=961');
    expect(redisKeyOf('', 'k', 'given')).toBe('{given}v2|k');
  });
});
