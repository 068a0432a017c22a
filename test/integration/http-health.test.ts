/**
 * One health signal for HTTP /healthcheck and grpc.health.v1: it fails while the store is down and
 * once the process drains after SIGTERM, and both transports say so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { createLimiter } from '../../src/limiter/limiter.js';
import { silentLogger } from '../../src/logging/logger.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { createHealthSignal } from '../../src/service/health.js';
import { createRateLimitService } from '../../src/service/rate-limit-service.js';
import type { CounterStore } from '../../src/stores/counter-store.js';
import { createMemoryStore } from '../../src/stores/memory/memory-store.js';
import { createGrpcServer } from '../../src/transport/grpc/server.js';
import type { ServiceServer } from '../../src/transport/rpc.js';
import { createHttpServer, type HttpServer } from '../../src/transport/http/server.js';
import { buildSnapshot } from '../../src/config/snapshot.js';
import {
  ensureBuilt,
  freePort,
  grpcHealthStatus,
  startSluice,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { ruleDir } from '../helpers/app.js';

/**
 * A memory store that can be taken down: while `down`, `healthy()` is false and `apply()` fails
 * as a remote store does. It stands in for the Redis store's reachability, which is what
 * /healthcheck reads; the Redis tier shows the same with a stopped redis-server.
 */
function stoppableStore(): CounterStore & { down: boolean } {
  const inner = createMemoryStore({ clock: createManualClock().now, sweepIntervalMs: 0 });
  const store = {
    down: false,
    apply: (specs: Parameters<CounterStore['apply']>[0]) => inner.apply(specs),
    size: () => inner.size(),
    healthy: () => !store.down,
    close: () => inner.close(),
  };
  return store;
}

describe('/healthcheck and gRPC health follow the store', () => {
  const store = stoppableStore();
  const health = createHealthSignal({
    configLoaded: () => true,
    storeHealthy: () => store.healthy(),
  });
  let http: HttpServer;
  let grpcServer: ServiceServer;
  let base: string;
  let grpcAddress: string;

  beforeAll(async () => {
    const snapshot = buildSnapshot([
      {
        name: 'edge.yaml',
        content:
          'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
      },
    ]);
    const service = createRateLimitService({
      limiter: createLimiter({ store, shadowMode: false }),
      config: () => snapshot,
      bounds: { maxDescriptors: 8, maxEntries: 8, maxEntryLength: 256 },
      logger: silentLogger(),
    });
    http = createHttpServer({
      service,
      health,
      metrics: createMetrics({ nearLimitRatio: 0.8, processMetrics: false }),
      maxBodyBytes: 65_536,
      logger: silentLogger(),
    });
    base = `http://127.0.0.1:${await http.listen('127.0.0.1', 0)}`;
    grpcServer = createGrpcServer({
      service,
      logger: silentLogger(),
      maxReceiveMessageBytes: 65_536,
      health,
    });
    grpcAddress = `127.0.0.1:${await grpcServer.listen('127.0.0.1', 0)}`;
  });
  afterAll(async () => {
    await http.close(1000);
    await grpcServer.close(1000);
  });

  it('200 OK while the store is up, 500 while it is down, 200 again when it is back', async () => {
    const probe = async (): Promise<[number, string]> => {
      const res = await fetch(`${base}/healthcheck`);
      return [res.status, await res.text()];
    };
    expect(await probe()).toEqual([200, 'OK']);
    expect(await grpcHealthStatus(grpcAddress)).toBe('SERVING');

    store.down = true;
    expect(await probe()).toEqual([500, '']);
    // gRPC health polls the signal (every second) and pushes the change.
    await waitFor(
      'gRPC health NOT_SERVING',
      async () => (await grpcHealthStatus(grpcAddress)) === 'NOT_SERVING',
      {
        timeoutMs: 5_000,
        intervalMs: 100,
      },
    );

    store.down = false;
    expect(await probe()).toEqual([200, 'OK']);
    await waitFor(
      'gRPC health SERVING',
      async () => (await grpcHealthStatus(grpcAddress)) === 'SERVING',
      {
        timeoutMs: 5_000,
        intervalMs: 100,
      },
    );
  });
});

describe('after SIGTERM', () => {
  const group = useProcessGroup();
  beforeAll(() => ensureBuilt(), 180_000);

  it('/healthcheck answers 500 and gRPC health NOT_SERVING while draining, then sluice exits 0', async () => {
    const dir = await ruleDir({
      'edge.yaml':
        'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
    });
    const httpPort = await freePort();
    const grpcPort = await freePort();
    const sluice = await startSluice(group, {
      configDir: dir,
      grpcPort,
      env: { HOST: '127.0.0.1', PORT: String(httpPort), SHUTDOWN_DELAY_MS: '3000' },
    });
    const url = `http://127.0.0.1:${httpPort}/healthcheck`;
    expect((await fetch(url)).status).toBe(200);

    sluice.proc.child.kill('SIGTERM');
    await waitFor('/healthcheck 500 after SIGTERM', async () => (await fetch(url)).status === 500, {
      timeoutMs: 2_500,
      intervalMs: 50,
    });
    expect(await grpcHealthStatus(`127.0.0.1:${grpcPort}`)).toBe('NOT_SERVING');
    expect(await sluice.proc.exited).toBe(0);
  });
});
