import { describe, expect, it } from 'vitest';
import {
  ALGORITHM_BY_NAME,
  ALGORITHM_DESCRIPTORS,
  ALGORITHM_STEPS,
  ALGORITHMS,
  checkRegistry,
  DEFAULT_ALGORITHM,
  type AlgorithmDescriptor,
} from '../../../src/algorithms/index.js';
import { ALGORITHM_TAGS } from '../../../src/limiter/keys.js';
import {
  ALGORITHM_CODES,
  APPLY_SCRIPT,
  assembleApplyScript,
} from '../../../src/stores/redis/apply-script.js';

/** A copy of `algorithm` with some fields replaced. */
function changed(
  algorithm: AlgorithmDescriptor,
  fields: Partial<AlgorithmDescriptor>,
): AlgorithmDescriptor {
  return { ...algorithm, ...fields };
}

describe('the algorithm registry is the one home of each algorithm', () => {
  it('derives the names, steps, key tags and Redis codes from the descriptors', () => {
    expect(ALGORITHMS).toEqual(ALGORITHM_DESCRIPTORS.map((algorithm) => algorithm.name));
    expect(ALGORITHMS).toContain(DEFAULT_ALGORITHM);
    for (const algorithm of ALGORITHM_DESCRIPTORS) {
      expect(ALGORITHM_BY_NAME[algorithm.name]).toBe(algorithm);
      expect(ALGORITHM_STEPS[algorithm.name]).toBe(algorithm.steps);
      expect(ALGORITHM_TAGS[algorithm.name]).toBe(algorithm.tag);
      expect(ALGORITHM_CODES[algorithm.name]).toBe(algorithm.redisCode);
    }
  });

  it('refuses two algorithms sharing a name, a tag or a code, and malformed tags or codes', () => {
    const [first, second] = ALGORITHM_DESCRIPTORS as [AlgorithmDescriptor, AlgorithmDescriptor];
    expect(() => checkRegistry([first, second])).not.toThrow();
    expect(() => checkRegistry([first, changed(second, { name: first.name })])).toThrow(
      /share the name/,
    );
    expect(() => checkRegistry([first, changed(second, { tag: first.tag })])).toThrow(
      /share the tag/,
    );
    expect(() => checkRegistry([first, changed(second, { redisCode: first.redisCode })])).toThrow(
      /share the code/,
    );
    // A tag is a counter key part and a Lua identifier: no `|`, no upper case, no leading digit.
    for (const tag of ['s|w', 'SW', '1w', '']) {
      expect(() => checkRegistry([changed(first, { tag })])).toThrow(/bad tag/);
    }
    // Longer tags and snake_case names are fine; a name is lower case from its first letter to
    // its last.
    expect(() => checkRegistry([changed(first, { tag: 'swx2' })])).not.toThrow();
    expect(() => checkRegistry([changed(first, { name: 'sliding_window_2' })])).not.toThrow();
    for (const name of ['Sliding', 'sliding-window', '2window', 'window X', '']) {
      expect(() => checkRegistry([changed(first, { name })])).toThrow(
        `algorithm name ${name}: not lower case`,
      );
    }
    for (const redisCode of [0, -1, 1.5]) {
      expect(() => checkRegistry([changed(first, { redisCode })])).toThrow(/Redis code/);
    }
  });
});

describe('the Redis script is assembled from the algorithm modules', () => {
  it("declares each compared algorithm's code as its module gives it", () => {
    const codes = ALGORITHM_DESCRIPTORS.map((algorithm) =>
      changed(algorithm, { redisCode: algorithm.redisCode + 40 }),
    );
    const script = assembleApplyScript(codes);
    expect(script).toContain('local SW, FW, TB = 41, 42, 43\n');
    expect(APPLY_SCRIPT).toContain('local SW, FW, TB = 1, 2, 3\n');
  });

  it("splices each algorithm's parts in, and only the parts of the algorithms given", () => {
    for (const algorithm of ALGORITHM_DESCRIPTORS) {
      for (const part of [algorithm.lua.load, algorithm.lua.charge, algorithm.lua.result]) {
        expect(APPLY_SCRIPT).toContain(part);
      }
    }
    const [slidingWindow, fixedWindow] = ALGORITHM_DESCRIPTORS as [
      AlgorithmDescriptor,
      AlgorithmDescriptor,
    ];
    const two = assembleApplyScript([slidingWindow, fixedWindow]);
    // The second is the `else` of each chain, but fixed_window's first look at the specs is a
    // part sliding_window lacks, so both codes are compared and declared.
    expect(two).toContain('local SW, FW = 1, 2\n');
    expect(two).toContain('if a == FW then');
    expect(two).not.toContain('elseif a == FW then');
    expect(two).toContain(fixedWindow.lua.finish);
    expect(two).not.toContain("HMGET', key, 's', 'n'");
  });
});
