import { describe, expect, it } from 'vitest';
import { LocalOverLimitCache } from '../../src/stores/redis/local-cache.js';
import { hashTagOf, redisKeyOf, slotOfTag } from '../../src/stores/redis/keys.js';

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
