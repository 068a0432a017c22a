/**
 * The old-space limit of the process the memory store runs in: what `--max-old-space-size` sets,
 * and what the default of `MEMORY_MAX_BYTES` is half of (docs/operations.md, "Capacity
 * planning").
 *
 * V8 reports only `heap_size_limit`, the old space plus the young generation, and the young
 * generation is no fixed share of it: V8 sizes it from the machine's (or the container's)
 * memory, independently of `--max-old-space-size`. On a 24 GB host with
 * `--max-old-space-size=256` it is 48 MiB on Node 22 and 192 MiB on Node 24 (heap limits 304
 * and 448 MiB); in a 512 MiB container, 3 MiB on Node 24. Half the heap limit therefore
 * let a store fill 224 of Node 24's 256 MiB of old space. The flag itself is exact: with it,
 * `heap_size_limit` minus its value is the same young generation whatever the value (measured
 * with 16, 100, 256, 257 and 384 MiB on both). V8 does not expose the young generation's size,
 * so without the flag the old space is not known, and the heap limit stands in for it: V8 then
 * sizes both generations from the same memory figure, the young one under a tenth of the old
 * (Node 24: 3 of 256 MiB in a 512 MiB container, 96 of 1,024 in 2 GiB, 192 of 4,096 on the host).
 */
import { getHeapStatistics } from 'node:v8';

const MiB = 1_048_576;

/** `--max-old-space-size=N` or V8's spelling `--max_old_space_size=N`: N in MiB. */
const OLD_SPACE_FLAG = /^--max[-_]old[-_]space[-_]size=(\d+)$/;

/**
 * Node's `--max-old-space-size-percentage`, which takes precedence over `--max-old-space-size`
 * and whose result (a share of the memory Node sees) is not reported back.
 */
const OLD_SPACE_PERCENTAGE_FLAG = /^--max[-_]old[-_]space[-_]size[-_]percentage(=|$)/;

/** What {@link oldSpaceLimit} works from, as the process reports it. */
export interface HeapFigures {
  /** `v8.getHeapStatistics().heap_size_limit`, bytes: the old space plus the young generation. */
  readonly heapSizeLimit: number;
  /** The `NODE_OPTIONS` the process started with (`''` or `undefined` when unset). */
  readonly nodeOptions: string | undefined;
  /** `process.execArgv`: the Node and V8 options given on the command line. */
  readonly execArgv: readonly string[];
}

/**
 * The old-space limit in bytes: the value of the `--max-old-space-size` in effect (the command
 * line's over `NODE_OPTIONS`', the last of each, as Node applies them), or `heapSizeLimit` when
 * the flag is absent, zero, overridden by `--max-old-space-size-percentage`, or not below the
 * heap limit (which always includes a young generation).
 */
export function oldSpaceLimit(figures: HeapFigures): number {
  // NODE_OPTIONS are applied first and the command line after, so the last flag wins.
  const flags = [...(figures.nodeOptions ?? '').split(/\s+/), ...figures.execArgv];
  let megabytes: number | undefined;
  for (const flag of flags) {
    if (OLD_SPACE_PERCENTAGE_FLAG.test(flag)) return figures.heapSizeLimit;
    const value = OLD_SPACE_FLAG.exec(flag)?.[1];
    if (value !== undefined) megabytes = Number(value);
  }
  if (megabytes === undefined || megabytes === 0) return figures.heapSizeLimit;
  const bytes = megabytes * MiB;
  return bytes < figures.heapSizeLimit ? bytes : figures.heapSizeLimit;
}

/** {@link oldSpaceLimit} of this process. */
export function processOldSpaceLimit(): number {
  return oldSpaceLimit({
    heapSizeLimit: getHeapStatistics().heap_size_limit,
    nodeOptions: process.env['NODE_OPTIONS'],
    execArgv: process.execArgv,
  });
}
