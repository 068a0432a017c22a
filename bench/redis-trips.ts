/**
 * Row 4: round trips to Redis per ShouldRateLimit decision with the Redis store, counted by the
 * Redis server itself (`INFO commandstats` after `CONFIG RESETSTAT`), for requests of 1, 4 and 8
 * descriptors on a redis-server the bench starts. A round trip is a command the client sent:
 * script calls (`EVALSHA`/`EVAL`) plus any other command that is not issued from inside a script
 * (commandstats also counts the commands a script runs, which cost no round trip).
 */
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Redis } from 'ioredis';
import type * as StoresModule from '../src/stores/index.js';
import type { CounterSpec } from '../src/stores/counter-store.js';
import { REPO_ROOT, type Sluice } from './dist.js';
import type { Row } from './report.js';
import { freePort } from './servers.js';

/** Requests per descriptor count. */
const REQUESTS = 200;

/** Calls of the script commands (`EVALSHA`, `EVAL`): each is one round trip. */
async function scriptCalls(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let calls = 0;
  for (const line of info.split('\n')) {
    const match = /^cmdstat_(evalsha|eval):calls=(\d+)/.exec(line.trim());
    if (match !== null) calls += Number(match[2]);
  }
  return calls;
}

/** Whether something accepts TCP connections on 127.0.0.1:`port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The row, or a row saying why it was skipped. */
export async function benchRedisTrips(sluice: Sluice): Promise<Row> {
  const what = 'Redis script calls (round trips) per decision, 1 / 4 / 8 descriptors';
  if (spawnSync('redis-server', ['--version']).status !== 0) {
    return { id: '4', what, sluice: 'skipped: no redis-server', baseline: 'n/a', ratio: 'n/a' };
  }
  const stores = (await import(
    pathToFileURL(path.join(REPO_ROOT, 'dist', 'stores', 'index.js')).href
  )) as typeof StoresModule;
  const port = await freePort();
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 1 });
  admin.on('error', () => undefined);
  try {
    // Wait until the server listens, then connect once.
    for (let attempt = 0; !(await listening(port)); attempt++) {
      if (attempt > 100) throw new Error(`redis-server did not listen on ${port}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await admin.connect();
    const settings = sluice.settings.loadSettings({
      BACKEND_TYPE: 'redis',
      REDIS_URL: `127.0.0.1:${port}`,
      REDIS_TIMEOUT: '2s',
      // Connected before the first call (by default sluice does not wait for Redis at start).
      REDIS_WAIT_AT_START: 'true',
    });
    const store = await stores.createStore(settings, {
      clock: sluice.clock.systemClock,
      logger: sluice.logger.silentLogger(),
    });
    const perRequest: string[] = [];
    try {
      for (const count of [1, 4, 8]) {
        const specs: CounterSpec[] = Array.from({ length: count }, (_, d) => ({
          key: `sw|60000|bench|d=${d}`,
          algorithm: 'sliding_window',
          limit: 1_000_000,
          windowMs: 60_000,
          burst: 1_000_000,
          hits: 1,
          mode: 'enforced',
        }));
        await store.apply(specs); // loads the script
        await admin.config('RESETSTAT');
        for (let k = 0; k < REQUESTS; k++) await store.apply(specs);
        perRequest.push(((await scriptCalls(admin)) / REQUESTS).toFixed(2));
      }
    } finally {
      await store.close();
    }
    return {
      id: '4',
      what,
      sluice: perRequest.join(' / '),
      baseline: 'n/a',
      ratio: 'n/a',
    };
  } finally {
    admin.disconnect();
    server.kill('SIGKILL');
  }
}
