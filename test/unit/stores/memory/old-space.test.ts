/**
 * The default of MEMORY_MAX_BYTES (src/stores/memory/old-space.ts, `defaultMaxBytes`): half of the
 * old-space limit that `--max-old-space-size` sets, not half of V8's heap limit, which includes
 * the young generation. Fed the figures real processes reported (24 GB host, no container), so
 * no process with those flags is needed: on Node 24 the young generation is 192 MiB, and half
 * the heap limit let a full store hold 224 of the 256 MiB old space.
 */
import { describe, expect, it } from 'vitest';
import { defaultMaxBytes } from '../../../../src/stores/memory/memory-store.js';
import {
  oldSpaceLimit,
  processOldSpaceLimit,
  type HeapFigures,
} from '../../../../src/stores/memory/old-space.js';

const MiB = 1_048_576;

/** Figures of a process: `heap_size_limit` in MiB, its NODE_OPTIONS and command-line options. */
function figures(heapLimitMib: number, nodeOptions: string, execArgv: string[] = []): HeapFigures {
  return { heapSizeLimit: heapLimitMib * MiB, nodeOptions, execArgv };
}

describe('the default MEMORY_MAX_BYTES', () => {
  it.each([
    // heap_size_limit reported by `node --max-old-space-size=256` (and 384, the Deployment's).
    { node: 'Node 22', heapLimitMib: 304, oldMib: 256 },
    { node: 'Node 24', heapLimitMib: 448, oldMib: 256 },
    { node: 'Node 22', heapLimitMib: 432, oldMib: 384 },
    { node: 'Node 24', heapLimitMib: 576, oldMib: 384 },
    // Node 24 with --max-semi-space-size=16: the young generation of Node 22.
    { node: 'Node 24 (semi-space 16 MiB)', heapLimitMib: 304, oldMib: 256 },
    // Node 24 in a 512 MiB container: V8 sizes the young generation from the cgroup's limit.
    { node: 'Node 24 (512 MiB container)', heapLimitMib: 387, oldMib: 384 },
  ])(
    'is half the old space on $node with --max-old-space-size=$oldMib',
    ({ heapLimitMib, oldMib }) => {
      const flag = `--max-old-space-size=${oldMib}`;
      expect(defaultMaxBytes(figures(heapLimitMib, flag))).toBe((oldMib / 2) * MiB);
      expect(defaultMaxBytes(figures(heapLimitMib, '', [flag]))).toBe((oldMib / 2) * MiB);
    },
  );

  it('is half the heap limit when the old space is not given (V8 does not report it)', () => {
    // Node's defaults on the 24 GB host: 4,096 MiB of old space plus 48 (22) or 192 (24) MiB.
    expect(defaultMaxBytes(figures(4_288, ''))).toBe(2_144 * MiB);
    expect(defaultMaxBytes(figures(4_144, '--max-semi-space-size=16'))).toBe(2_072 * MiB);
    // --max-heap-size sets the sum, and V8 splits it.
    expect(defaultMaxBytes(figures(300, '--max-heap-size=300'))).toBe(150 * MiB);
    expect(defaultMaxBytes({ heapSizeLimit: 301, nodeOptions: '', execArgv: [] })).toBe(150);
  });
});

describe('the old-space limit', () => {
  it("takes the command line's flag over NODE_OPTIONS', and the last of each, as Node does", () => {
    // `NODE_OPTIONS=--max-old-space-size=256 node --max-old-space-size=128` reports 320 on Node 24.
    expect(
      oldSpaceLimit(figures(320, '--max-old-space-size=256', ['--max-old-space-size=128'])),
    ).toBe(128 * MiB);
    expect(
      oldSpaceLimit(figures(320, '--max-old-space-size=64  --max_old_space_size=128 --trace-gc')),
    ).toBe(128 * MiB);
    expect(
      oldSpaceLimit(figures(320, '', ['--max-old-space-size=512', '--max-old-space-size=128'])),
    ).toBe(128 * MiB);
  });

  it('falls back to the heap limit when the flag does not say what V8 uses', () => {
    // 0 is V8's "not set"; the percentage flag takes precedence and its result is not reported.
    expect(oldSpaceLimit(figures(4_288, '--max-old-space-size=0'))).toBe(4_288 * MiB);
    expect(
      oldSpaceLimit(
        figures(2_602, '--max-old-space-size=256', ['--max-old-space-size-percentage=10']),
      ),
    ).toBe(2_602 * MiB);
    // Not a flag V8 accepts as such (the process would not have started), or past the limit.
    expect(oldSpaceLimit(figures(4_288, '--max-old-space-size=256MB'))).toBe(4_288 * MiB);
    expect(oldSpaceLimit(figures(448, '--max-old-space-size=448'))).toBe(448 * MiB);
    expect(oldSpaceLimit(figures(448, '--max-old-space-size=512'))).toBe(448 * MiB);
    expect(oldSpaceLimit({ heapSizeLimit: 448 * MiB, nodeOptions: undefined, execArgv: [] })).toBe(
      448 * MiB,
    );
  });

  it("reads this process's NODE_OPTIONS", () => {
    const before = process.env['NODE_OPTIONS'];
    process.env['NODE_OPTIONS'] = '--max-old-space-size=64';
    try {
      // 64 MiB is below any heap limit this process can have; the command line names no size.
      expect(process.execArgv.some((a) => /old[-_]space/.test(a))).toBe(false);
      expect(processOldSpaceLimit()).toBe(64 * MiB);
    } finally {
      if (before === undefined) delete process.env['NODE_OPTIONS'];
      else process.env['NODE_OPTIONS'] = before;
    }
  });
});
