/**
 * `WORKERS=2` as a new user sees it (issue 32): worker 1 alone writes the start-up lines at info
 * (rules loaded, store created and connected), and a worker that hears the primary's shutdown
 * before its own copy of the signal (Ctrl-C reaches every process of the group) still drains and
 * exits 0 instead of taking its signal for a second one.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ensureBuilt,
  freePort,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { adminClient, requireRedis, startRedis } from '../helpers/redis.js';

const requirement = requireRedis('workers start-up');

/** The pids of the processes whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
  return text === '' ? [] : text.split(/\s+/).map(Number);
}

/** The JSON log lines of `output` whose message is `msg`. */
function linesWith(output: string, msg: string): Record<string, unknown>[] {
  return output
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['msg'] === msg);
}

describe.skipIf(requirement.skip)('WORKERS=2: one start-up, one drain', () => {
  const group = useProcessGroup();

  it('logs the start-up lines once, and drains when the primary speaks before the signal', async () => {
    ensureBuilt();
    const redis = await startRedis(group);
    const httpPort = await freePort();
    const sluice = await startSluice(group, {
      grpcPort: await freePort(),
      env: {
        PORT: String(httpPort),
        BACKEND_TYPE: 'redis',
        REDIS_URL: redis.address,
        WORKERS: '2',
        LOG_LEVEL: 'info',
        USE_STATSD: 'false',
        // Draining takes this long, so each worker is still there when its own signal comes.
        SHUTDOWN_DELAY_MS: '3000',
      },
    });
    const primary = sluice.proc.child.pid!;
    await waitFor('two workers', () => childrenOf(primary).length === 2, { timeoutMs: 15_000 });
    // Each worker has loaded its rules and created its store once it holds a Redis connection.
    const admin = adminClient(redis.port);
    try {
      await waitFor(
        'both workers connected to Redis',
        async () => {
          const clients = String(await admin.call('CLIENT', 'LIST'))
            .trim()
            .split('\n');
          return clients.length >= 3; // the two workers and this client
        },
        { timeoutMs: 15_000 },
      );
    } finally {
      admin.disconnect();
    }
    // Connected is not started: a worker installs its signal handlers once it listens, and one
    // signalled before that dies of the signal (exit 1). The primary sums the reports of the
    // workers that said they listen, so two rule loads in /metrics means both do.
    await waitFor(
      'both workers listening (two rule loads in /metrics)',
      async () => {
        const res = await fetch(`http://127.0.0.1:${httpPort}/metrics`, {
          signal: AbortSignal.timeout(5_000),
        });
        return /^ratelimit_service_config_load_success 2$/m.test(await res.text());
      },
      { timeoutMs: 15_000, intervalMs: 200, onTimeout: () => sluice.proc.output() },
    );
    const workers = childrenOf(primary);

    // The primary first (SIGTERM to it alone), then each worker's own copy of the signal.
    sluice.proc.child.kill('SIGTERM');
    await waitFor(
      "worker 1 to start draining on the primary's word",
      () =>
        linesWith(sluice.proc.output(), 'shutting down: finishing in-flight calls').some(
          (line) => line['signal'] === 'primary',
        ),
      { timeoutMs: 10_000, onTimeout: () => sluice.proc.output() },
    );
    for (const pid of workers) process.kill(pid, 'SIGTERM');
    await waitFor('sluice to exit', () => sluice.proc.hasExited(), { timeoutMs: 20_000 });
    const output = sluice.proc.output();
    expect(await sluice.proc.exited, output).toBe(0);
    expect(output).not.toMatch(/second signal/);

    for (const msg of [
      'sluice listening',
      'rate limit config loaded from bundled source',
      'redis store created',
      'redis store available (connected)',
    ]) {
      expect(linesWith(output, msg), msg).toHaveLength(1);
    }
    expect(linesWith(output, 'sluice listening')[0]).toMatchObject({ worker: 1, workers: 2 });
  });
});
