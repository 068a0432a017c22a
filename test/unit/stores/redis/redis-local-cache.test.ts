import { describe, expect, it } from 'vitest';
import { LocalOverLimitCache } from '../../../../src/stores/redis/local-cache.js';
import { hashTagOf, redisKeyOf, slotOfTag } from '../../../../src/stores/redis/keys.js';

describe('local over-limit cache', () => {
  it('answers until the reset, only for as many hits or more, and only under the same limit', () => {
    const cache = new LocalOverLimitCache(10_000);
    cache.remember('k', 2, 5, 1_000);
    expect(cache.overLimitForMs('k', 2, 5, 400)).toBe(600);
    expect(cache.overLimitForMs('k', 3, 5, 400)).toBe(600);
    expect(cache.overLimitForMs('k', 1, 5, 400)).toBe(0);
    expect(cache.overLimitForMs('k', 2, 6, 400)).toBe(0);
    expect(cache.overLimitForMs('other', 2, 5, 400)).toBe(0);
    expect(cache.overLimitForMs('k', 2, 5, 1_000)).toBe(0);
    expect(cache.size).toBe(0);
  });

  it('stays within its byte budget, dropping the oldest entries first', () => {
    const cache = new LocalOverLimitCache(1_000);
    for (let i = 0; i < 100; i++) cache.remember(`key-${i}`, 1, 5, 10_000);
    expect(cache.size).toBeGreaterThan(0);
    expect(cache.size).toBeLessThan(10);
    expect(cache.overLimitForMs('key-99', 1, 5, 0)).toBe(10_000);
    expect(cache.overLimitForMs('key-0', 1, 5, 0)).toBe(0);
  });
});

describe('local over-limit cache: its byte budget', () => {
  /** What an entry with a one-character key costs: 2 bytes per UTF-16 unit and 96 of overhead. */
  const ONE = 98;
  const held = (cache: LocalOverLimitCache, keys: string[]): string[] =>
    keys.filter((key) => cache.overLimitForMs(key, 1, 5, 0) > 0);

  it('holds exactly as many entries as the budget pays for, then drops the oldest one per new one', () => {
    const cache = new LocalOverLimitCache(3 * ONE);
    for (const key of ['a', 'b', 'c']) cache.remember(key, 1, 5, 10_000);
    expect(cache.size).toBe(3);
    expect(held(cache, ['a', 'b', 'c'])).toEqual(['a', 'b', 'c']);
    cache.remember('d', 1, 5, 10_000);
    expect(held(cache, ['a', 'b', 'c', 'd'])).toEqual(['b', 'c', 'd']);
    cache.remember('e', 1, 5, 10_000);
    expect(held(cache, ['a', 'b', 'c', 'd', 'e'])).toEqual(['c', 'd', 'e']);
  });

  it('counts two bytes per key character: a longer key makes room by dropping more', () => {
    // 'abcd' costs 96 + 8 = 104 bytes: budget 3 * 98 holds it with one 98-byte entry, not two.
    const cache = new LocalOverLimitCache(3 * ONE);
    for (const key of ['a', 'b', 'c']) cache.remember(key, 1, 5, 10_000);
    cache.remember('abcd', 1, 5, 10_000);
    expect(held(cache, ['a', 'b', 'c', 'abcd'])).toEqual(['c', 'abcd']);
  });

  it('a budget of exactly one entry holds it; a key too large for the budget is not kept and drops nothing', () => {
    const exact = new LocalOverLimitCache(ONE);
    exact.remember('a', 1, 5, 10_000);
    expect(held(exact, ['a'])).toEqual(['a']);
    const cache = new LocalOverLimitCache(2 * ONE);
    cache.remember('a', 1, 5, 10_000);
    cache.remember('x'.repeat(60), 1, 5, 10_000);
    expect(cache.size).toBe(1);
    expect(held(cache, ['a', 'x'.repeat(60)])).toEqual(['a']);
  });

  it('remembering a key again replaces its entry without paying for it twice', () => {
    const cache = new LocalOverLimitCache(2 * ONE);
    cache.remember('a', 1, 5, 10_000);
    cache.remember('b', 1, 5, 10_000);
    for (let i = 0; i < 5; i++) cache.remember('b', 2, 5, 20_000);
    expect(cache.size).toBe(2);
    expect(held(cache, ['a', 'b'])).toEqual(['a']);
    expect(cache.overLimitForMs('b', 2, 5, 0)).toBe(20_000);
  });

  it('an expired entry that is looked up gives its bytes back', () => {
    const cache = new LocalOverLimitCache(2 * ONE);
    cache.remember('a', 1, 5, 100);
    cache.remember('b', 1, 5, 10_000);
    expect(cache.overLimitForMs('a', 1, 5, 100)).toBe(0);
    cache.remember('c', 1, 5, 10_000);
    expect(held(cache, ['a', 'b', 'c'])).toEqual(['b', 'c']);
  });

  it('clear() forgets every entry and frees the whole budget', () => {
    const cache = new LocalOverLimitCache(2 * ONE);
    cache.remember('a', 1, 5, 10_000);
    cache.remember('b', 1, 5, 10_000);
    cache.clear();
    expect(cache.size).toBe(0);
    expect(held(cache, ['a', 'b'])).toEqual([]);
    cache.remember('c', 1, 5, 10_000);
    cache.remember('d', 1, 5, 10_000);
    expect(held(cache, ['c', 'd'])).toEqual(['c', 'd']);
  });
});

describe('redis key names', () => {
  it('share one hash tag across the limits of one descriptor, and differ between descriptors', () => {
    expect(hashTagOf('sw|60000|edge|user=a')).toBe(hashTagOf('fw|1000|edge|user=a'));
    expect(hashTagOf('sw|60000|edge|user=a')).not.toBe(hashTagOf('sw|60000|edge|user=b'));
    expect(hashTagOf('sw|60000|edge|user=a')).toMatch(/^[0-9a-f]{8}$/);
    expect(redisKeyOf('rl_', 'sw|60000|edge|user=a')).toBe(
      `rl_{${hashTagOf('sw|60000|edge|user=a')}}v2|sw|60000|edge|user=a`,
    );
  });

  it('computes cluster slots as Redis does (CRC16-XMODEM mod 16384)', () => {
    // Redis: CLUSTER KEYSLOT foo = 12182, CLUSTER KEYSLOT 123456789 = 12739.
    expect(slotOfTag('foo')).toBe(12182);
    expect(slotOfTag('123456789')).toBe(0x31c3 % 16384);
  });
});
