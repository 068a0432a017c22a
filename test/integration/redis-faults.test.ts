/**
 * Redis faults under traffic, one sluice process per failure mode (`STORE_FAILURE_MODE` error,
 * allow, memory) on one real `redis-server`: Redis killed (SIGKILL) while calls run, Redis back on
 * the same port, and Redis hung (SIGSTOP). Every call must answer within REDIS_TIMEOUT plus a
 * margin (the calls carry that as their gRPC deadline, as Envoy's filter timeout would, so a late
 * answer is a DEADLINE_EXCEEDED result), with the mode's answer; no process may crash or log an
 * unhandled rejection, and answers must be correct again within 2 s of Redis coming back.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { ServiceError } from '@grpc/grpc-js';
import { ruleDir } from '../helpers/app.js';
import { rlsRequest, type EnvoyRlsClient } from '../helpers/envoy-rls-client.js';
import { ensureBuilt, freePort, useProcessGroup, waitFor } from '../helpers/processes.js';
import { requireRedis, startRedis, type RedisServer } from '../helpers/redis.js';
import { startRedisSluice, type RedisSluice } from '../helpers/redis-sluice.js';

const requirement = requireRedis('redis faults');

/** REDIS_TIMEOUT of the processes under test, and the slack allowed on top of it. */
const TIMEOUT_MS = 300;
const MARGIN_MS = 700;
/** The deadline of every call under fault: an answer later than this is DEADLINE_EXCEEDED. */
const DEADLINE_MS = TIMEOUT_MS + MARGIN_MS;

type Mode = 'error' | 'allow' | 'memory';
const MODES: readonly Mode[] = ['error', 'allow', 'memory'];

/** One call's outcome: the overall code, or the gRPC status name of the error. */
interface Outcome {
  readonly result: string;
}

const GRPC_NAMES: Record<number, string> = {
  4: 'DEADLINE_EXCEEDED',
  13: 'INTERNAL',
  14: 'UNAVAILABLE',
};

async function call(client: EnvoyRlsClient, user: string): Promise<Outcome> {
  try {
    const response = await client.shouldRateLimit(rlsRequest('faults', [{ user }]), DEADLINE_MS);
    return { result: response.overall_code };
  } catch (error) {
    const code = (error as ServiceError).code;
    return { result: GRPC_NAMES[code] ?? `grpc-${code}` };
  }
}

/** Calls running in the background: what they answered so far, and how to end them. */
interface Traffic {
  /** Outcomes in the order they arrived (all loops together). */
  readonly outcomes: Outcome[];
  /** Stop the loops; resolves with every outcome once the calls in flight have answered. */
  stop(): Promise<Outcome[]>;
}

/**
 * Sequential calls from `loops` parallel loops until stopped. The 20 ms between two calls of a
 * loop only paces the load (2 cores are shared); no assertion waits on it.
 */
function traffic(client: EnvoyRlsClient, user: string, loops: number): Traffic {
  const outcomes: Outcome[] = [];
  let stopped = false;
  const done = Promise.all(
    Array.from({ length: loops }, async () => {
      // Bounded in count as well as by `stop`.
      for (let k = 0; k < 1_000 && !stopped; k++) {
        outcomes.push(await call(client, user));
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }),
  );
  return {
    outcomes,
    async stop() {
      stopped = true;
      await done;
      return outcomes;
    },
  };
}

/** The value of one `sluice_store_errors_total` series in `/metrics` text (0 when absent). */
function storeErrors(metrics: string, kind: string): number {
  const line = new RegExp(`^sluice_store_errors_total\\{kind="${kind}"\\} (\\d+)$`, 'm');
  return Number(line.exec(metrics)?.[1] ?? 0);
}

describe.skipIf(requirement.skip)('redis faults under traffic', () => {
  const group = useProcessGroup();
  let redis: RedisServer;
  let redisPort: number;
  const sluices = new Map<Mode, RedisSluice>();
  const clients = new Map<Mode, EnvoyRlsClient>();

  function metricsText(mode: Mode): Promise<string> {
    return sluices.get(mode)!.metricsText();
  }

  beforeAll(async () => {
    ensureBuilt();
    redisPort = await freePort();
    redis = await startRedis(group, { port: redisPort });
    const dir = await ruleDir({
      'f.yaml':
        'domain: faults\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
    });
    for (const mode of MODES) {
      const sluice = await startRedisSluice(group, {
        configDir: dir,
        redisUrl: `127.0.0.1:${redisPort}`,
        env: {
          REDIS_TIMEOUT: `${TIMEOUT_MS}ms`,
          STORE_FAILURE_MODE: mode,
          CACHE_KEY_PREFIX: `${mode}:`,
        },
      });
      sluices.set(mode, sluice);
      clients.set(mode, sluice.client);
    }
  }, 60_000);

  it('Redis killed during traffic: each mode answers as specified, within the timeout, and recovers within 2 s', async () => {
    // Fill each process's counter for user "full" to its limit while Redis is up.
    for (const mode of MODES) {
      for (let k = 0; k < 5; k++)
        expect((await call(clients.get(mode)!, 'full')).result).toBe('OK');
      expect((await call(clients.get(mode)!, 'full')).result).toBe('OVER_LIMIT');
    }

    const runs = new Map(MODES.map((mode) => [mode, traffic(clients.get(mode)!, 'full', 2)]));
    await waitFor(
      'traffic answered by Redis in every mode',
      () => MODES.every((mode) => runs.get(mode)!.outcomes.length >= 4),
      { timeoutMs: 10_000, intervalMs: 10 },
    );
    await redis.stop(true);
    const atKill = new Map(MODES.map((mode) => [mode, runs.get(mode)!.outcomes.length]));
    // The outage lasts until every mode has answered 60 calls without Redis (about 0.6 s of
    // traffic at least) and has shown its outage answer.
    const outageAnswer: Record<Mode, string> = {
      error: 'UNAVAILABLE',
      allow: 'OK',
      memory: 'OVER_LIMIT',
    };
    await waitFor(
      '60 answers per mode during the outage',
      () =>
        MODES.every((mode) => {
          const during = runs.get(mode)!.outcomes.slice(atKill.get(mode));
          return during.length >= 60 && during.some((o) => o.result === outageAnswer[mode]);
        }),
      { timeoutMs: 30_000, intervalMs: 10 },
    );
    const outcomes = new Map(MODES.map((mode) => [mode, runs.get(mode)!.stop()] as const));

    for (const mode of MODES) {
      const list = await outcomes.get(mode)!;
      expect(list.length - atKill.get(mode)!, mode).toBeGreaterThanOrEqual(60);
      // Every call answered within its deadline: no DEADLINE_EXCEEDED (the sets below say so).
      expect(
        list.map((o) => o.result),
        mode,
      ).not.toContain('DEADLINE_EXCEEDED');
    }
    const results = (mode: Mode) => outcomes.get(mode)!.then((list) => list.map((o) => o.result));
    // error: over limit while Redis answered, then UNAVAILABLE, nothing else.
    const errorResults = await results('error');
    expect(errorResults).toContain('UNAVAILABLE');
    expect(new Set(errorResults)).toEqual(new Set(['OVER_LIMIT', 'UNAVAILABLE']));
    // allow: the same key Redis rejected is allowed while Redis is away; never an error.
    const allowResults = await results('allow');
    expect(allowResults).toContain('OK');
    expect(allowResults.every((r) => r === 'OK' || r === 'OVER_LIMIT')).toBe(true);
    // memory: decided in memory with the same rule: at most 5 admitted, then over limit.
    const memoryResults = await results('memory');
    expect(memoryResults.every((r) => r === 'OK' || r === 'OVER_LIMIT')).toBe(true);
    expect(memoryResults.filter((r) => r === 'OK').length).toBeGreaterThan(0);
    expect(memoryResults.filter((r) => r === 'OK').length).toBeLessThanOrEqual(5);
    expect(memoryResults.at(-1)).toBe('OVER_LIMIT');

    // Redis back on the same port (empty: no persistence): correct answers within 2 s, the three
    // modes waited for together so that 2 s bounds the whole recovery.
    redis = await startRedis(group, { port: redisPort });
    await Promise.all(
      MODES.map((mode) =>
        waitFor(
          `${mode}: answers from Redis again`,
          async () => (await call(clients.get(mode)!, `fresh-${mode}`)).result === 'OK',
          { timeoutMs: 2_000, intervalMs: 20 },
        ),
      ),
    );
    // Counting in Redis again: a new user gets exactly 5 from the error-mode process.
    const fresh: string[] = [];
    for (let k = 0; k < 7; k++) fresh.push((await call(clients.get('error')!, 'after')).result);
    expect(fresh).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT', 'OVER_LIMIT']);

    for (const [mode, { sluice }] of sluices) {
      expect(sluice.proc.hasExited(), mode).toBe(false);
      expect(sluice.proc.output(), mode).not.toMatch(/unhandled|uncaught/i);
    }
    // Each state change counted once per outage (not once per call), and the policy's answers
    // counted by policy.
    for (const mode of MODES) {
      const metrics = await metricsText(mode);
      expect(metrics, mode).toMatch(/^sluice_store_errors_total\{kind="disconnect"\} 1$/m);
      const fallback = new RegExp(
        `^sluice_store_fallback_total\\{policy="${mode}"\\} (\\d+)$`,
        'm',
      );
      expect(Number(fallback.exec(metrics)?.[1] ?? 0), mode).toBeGreaterThan(0);
    }
  });

  it('Redis hung (SIGSTOP): calls answer within the timeout, then recover after SIGCONT', async () => {
    const client = clients.get('error')!;
    expect((await call(client, 'hung')).result).toBe('OK');
    const before = await metricsText('error');
    redis.proc.child.kill('SIGSTOP');
    try {
      const run = traffic(client, 'hung', 3);
      await waitFor('30 answers while Redis is hung', () => run.outcomes.length >= 30, {
        timeoutMs: 30_000,
        intervalMs: 10,
      });
      const list = await run.stop();
      // Every call answered within its deadline, each with UNAVAILABLE.
      expect(new Set(list.map((o) => o.result))).toEqual(new Set(['UNAVAILABLE']));
      // Fail fast: only the calls in flight when Redis stopped answering (one per loop at most)
      // waited for REDIS_TIMEOUT; the store then stalled once and refused the rest at once.
      const after = await metricsText('error');
      const delta = (kind: string) => storeErrors(after, kind) - storeErrors(before, kind);
      expect(delta('timeout')).toBeGreaterThanOrEqual(1);
      expect(delta('timeout')).toBeLessThanOrEqual(3);
      expect(delta('stalled')).toBe(1);
      expect(delta('unavailable')).toBe(list.length - delta('timeout'));
    } finally {
      redis.proc.child.kill('SIGCONT');
    }
    await waitFor(
      'answers after SIGCONT',
      async () => (await call(client, 'hung')).result === 'OK',
      {
        timeoutMs: 2_000,
        intervalMs: 20,
      },
    );
    expect(sluices.get('error')!.sluice.proc.output()).not.toMatch(/unhandled|uncaught/i);
  });
});
