/**
 * The Redis apply script is assembled from the algorithm modules' Lua fragments
 * (src/stores/redis/apply-script.ts, `assembleApplyScript`). These tests hold the assembler to
 * two things: the script it builds for the registry is the one kept in
 * test/fixtures/apply-script.lua (so a change to any fragment shows as a diff of the Lua that
 * Redis runs; refresh it with `npx vitest run test/contract/apply-script-assembly.test.ts -u`
 * and review the diff), and a script built for any subset of the algorithms answers, stores and
 * expires exactly as the full script does for those algorithms, on a real redis-server.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALGORITHM_DESCRIPTORS, type AlgorithmDescriptor } from '../../src/algorithms/index.js';
import {
  APPLY_SCRIPT,
  MODE_CODES,
  assembleApplyScript,
} from '../../src/stores/redis/apply-script.js';
import { useProcessGroup } from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';

/** A minute boundary, so fixed windows start there. */
const T0 = 1_699_999_980_000;
const WINDOW_MS = 60_000;
const LIMIT = 3;
/** Extra TTL past empty (ARGV[3]). */
const GRACE_MS = 1_000;

/** One counter of a call: its algorithm, hits and mode letter(s). */
interface Spec {
  readonly algorithm: AlgorithmDescriptor;
  readonly key: string;
  readonly hits: number;
  readonly mode: string;
}

/**
 * The ARGV of one call of one request (see the module header of apply-script.ts): a counter per
 * spec (a key may repeat), then the request: its size and a (counter, hits) pair per spec.
 */
function argv(nowMs: number, dry: boolean, specs: readonly Spec[]): string[] {
  const args = [String(nowMs), dry ? '1' : '0', String(GRACE_MS)];
  for (const spec of specs) {
    args.push(
      String(spec.algorithm.redisCode),
      String(LIMIT),
      String(WINDOW_MS),
      String(LIMIT + 1),
      spec.mode,
    );
  }
  args.push('1', String(specs.length));
  specs.forEach((spec, i) => args.push(String(i + 1), String(spec.hits)));
  return args;
}

/** Every non-empty subset of the registry, in registry order within each. */
function subsets(): AlgorithmDescriptor[][] {
  const all = [...ALGORITHM_DESCRIPTORS];
  const out: AlgorithmDescriptor[][] = [];
  for (let mask = 1; mask < 1 << all.length; mask++) {
    out.push(all.filter((_, i) => (mask & (1 << i)) !== 0));
  }
  return out;
}

/** One algorithm's calls alone: time offset, hits, dry run. */
const ALONE: readonly (readonly [number, number, boolean])[] = [
  [0, 1, false],
  [1_000, 2, false],
  [2_000, 1, true],
  [2_500, 1, false],
  [30_000, 1, false],
  [61_000, 3, false],
  [61_500, 4, false],
  [125_000, 1, false],
];

describe('the apply script assembled from the algorithm modules', () => {
  it('is, for the registry, the script kept in test/fixtures/apply-script.lua', async () => {
    const script = assembleApplyScript(ALGORITHM_DESCRIPTORS);
    expect(script).toBe(APPLY_SCRIPT);
    await expect(script).toMatchFileSnapshot('../fixtures/apply-script.lua');
  });
});

const requirement = requireRedis('apply script assembly');
const group = useProcessGroup();
let client: Redis | undefined;

beforeAll(async () => {
  if (requirement.skip) return;
  const server = await startRedis(group);
  client = new Redis({ port: server.port, host: '127.0.0.1' });
});

afterAll(async () => {
  client?.disconnect();
  await group.stopAll();
});

describe.skipIf(requirement.skip)('a script assembled for some of the algorithms', () => {
  /** Redis's clock, ms (the clock its key expiry times are on). */
  async function redisNowMs(): Promise<number> {
    const [seconds, micros] = await client!.time();
    return Number(seconds) * 1000 + Number(micros) / 1000;
  }

  /** What one call did: its reply, the keys' stored values and expiry times, when it ran. */
  interface Outcome {
    readonly reply: number[];
    readonly stored: (string | null)[];
    readonly expiresAt: number[];
    readonly startedMs: number;
    readonly endedMs: number;
  }

  async function call(
    script: string,
    nowMs: number,
    dry: boolean,
    specs: readonly Spec[],
  ): Promise<Outcome> {
    const keys = specs.map((spec) => spec.key);
    const startedMs = await redisNowMs();
    const reply = (await client!.eval(
      script,
      keys.length,
      ...keys,
      ...argv(nowMs, dry, specs),
    )) as number[];
    const endedMs = await redisNowMs();
    const stored: (string | null)[] = [];
    const expiresAt: number[] = [];
    for (const key of keys) {
      const dump = await client!.dumpBuffer(key);
      stored.push(dump === null ? null : dump.toString('base64'));
      expiresAt.push(await client!.pexpiretime(key));
    }
    return { reply, stored, expiresAt, startedMs, endedMs };
  }

  /**
   * The same reply and stored values; expiry times apart by no more than the real time between
   * the start of a full-script call and the end of its partner (a TTL set relative to Redis's
   * clock moves with it; one set from the call's `now` does not move at all). A key's TTL may
   * have been set by an earlier pair of calls, so the bound is the longest such span so far.
   */
  let longestSpanMs = 0;
  function expectSame(part: Outcome, full: Outcome, what: string): void {
    expect(part.reply, what).toEqual(full.reply);
    expect(part.stored, what).toEqual(full.stored);
    longestSpanMs = Math.max(longestSpanMs, part.endedMs - full.startedMs);
    const apart = Math.ceil(longestSpanMs);
    part.expiresAt.forEach((expiresAt, i) => {
      const other = full.expiresAt[i]!;
      // -1: no expiry, -2: no key; both sides must agree on those exactly.
      if (expiresAt < 0 || other < 0) expect(expiresAt, what).toBe(other);
      else
        expect(Math.abs(expiresAt - other), `${what}: expiry of key ${i}`).toBeLessThanOrEqual(
          apart,
        );
    });
  }

  it.each(subsets().map((subset) => [subset.map((a) => a.name).join(' + '), subset] as const))(
    '%s: answers, stores and expires as the full script does',
    async (label, subset) => {
      const script = assembleApplyScript(subset);
      // `counter` names the key within the call: specs with the same one share a key.
      const specsOf = (
        side: string,
        specs: readonly (Omit<Spec, 'key'> & { counter: string })[],
        id: string,
      ) => specs.map((spec) => ({ ...spec, key: `${side}|${label}|${id}|${spec.counter}` }));
      // Each algorithm alone, through a window and into the next ones.
      for (const algorithm of subset) {
        for (const [offset, hits, dry] of ALONE) {
          const specs = [{ algorithm, hits, mode: MODE_CODES.enforced, counter: 'a' }];
          const id = algorithm.name;
          const full = await call(APPLY_SCRIPT, T0 + offset, dry, specsOf('full', specs, id));
          const part = await call(script, T0 + offset, dry, specsOf('part', specs, id));
          expectSame(part, full, `${algorithm.name} at +${offset} ms`);
        }
      }
      // All of them in one batch, enforced, shadow and quota (one group), two specs on one key.
      const mixed = subset.flatMap((algorithm) => [
        { algorithm, hits: 1, mode: MODE_CODES.enforced, counter: algorithm.name },
        { algorithm, hits: 2, mode: MODE_CODES.shadow, counter: algorithm.name },
        { algorithm, hits: 2, mode: `${MODE_CODES.quota}1`, counter: `${algorithm.name}-quota` },
      ]);
      for (const [offset, dry] of [
        [0, false],
        [500, true],
        [1_000, false],
        [1_500, false],
        [90_000, false],
      ] as const) {
        const full = await call(APPLY_SCRIPT, T0 + offset, dry, specsOf('full', mixed, 'mixed'));
        const part = await call(script, T0 + offset, dry, specsOf('part', mixed, 'mixed'));
        expectSame(part, full, `mixed batch at +${offset} ms`);
      }
    },
  );
});
