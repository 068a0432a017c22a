import { describe, expect, it } from 'vitest';
import { EXPIRY_SPAN, SUB_BUCKETS } from '../../../../src/algorithms/sliding-window.js';
import { ALGORITHMS } from '../../../../src/algorithms/index.js';
import {
  ALGORITHM_CODES,
  APPLY_SCRIPT,
  REDIS_LAYOUT_VERSION,
} from '../../../../src/stores/redis/apply-script.js';
import { LAYOUT_KEY_MARK, redisKeyOf } from '../../../../src/stores/redis/keys.js';

describe('the Redis script takes its constants from the algorithm modules', () => {
  it('numbers the algorithms by their place in ALGORITHMS, and the script branches on those codes', () => {
    expect(ALGORITHMS.map((algorithm) => ALGORITHM_CODES[algorithm])).toEqual(
      ALGORITHMS.map((_, i) => i + 1),
    );
    expect(APPLY_SCRIPT).toContain(
      `local SW, FW, TB = ${ALGORITHM_CODES.sliding_window}, ${ALGORITHM_CODES.fixed_window}, ${ALGORITHM_CODES.token_bucket}`,
    );
  });

  it("uses sliding-window.ts's sub-bucket count and expiry span", () => {
    expect(APPLY_SCRIPT).toContain(`local SUB, SPAN = ${SUB_BUCKETS}, ${EXPIRY_SPAN}`);
    // No hand-written copy of either number is left elsewhere in the script.
    const rest = APPLY_SCRIPT.replace(`local SUB, SPAN = ${SUB_BUCKETS}, ${EXPIRY_SPAN}`, '');
    expect(rest).not.toMatch(new RegExp(`\\b(${SUB_BUCKETS}|${EXPIRY_SPAN})\\b`));
  });

  it('puts the layout version in every key, after the hash tag', () => {
    expect(LAYOUT_KEY_MARK).toBe(`v${REDIS_LAYOUT_VERSION}|`);
    expect(redisKeyOf('p:', 'sw|60000|d|k=v', 'abcd1234')).toBe('p:{abcd1234}v2|sw|60000|d|k=v');
  });
});
