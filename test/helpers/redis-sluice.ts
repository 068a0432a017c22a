/**
 * A built sluice process (`dist/`) on a real Redis, with its HTTP port and a client on Envoy's
 * own rls.proto: what the tests of Redis outages and cached mode start once per replica or per
 * failure mode.
 */
import { createEnvoyRlsClient, type EnvoyRlsClient } from './envoy-rls-client.js';
import { freePort, startSluice, type ProcessGroup, type SluiceProcess } from './processes.js';
import { redisBackendEnv } from './redis.js';

/** A sluice process on Redis, its HTTP port (health check, metrics) and a gRPC client. */
export interface RedisSluice {
  readonly sluice: SluiceProcess;
  /** The HTTP port (`PORT`): `/healthcheck` and `/metrics`. */
  readonly httpPort: number;
  /** A client built from Envoy's protos on the process's gRPC port. */
  readonly client: EnvoyRlsClient;
  /** The `/metrics` page as text. */
  metricsText(): Promise<string>;
}

/**
 * Start sluice on the Redis at `redisUrl` (`host:port`, over TCP) with the rules in `configDir`,
 * as one process (`WORKERS=1`: its /metrics and store error counts are one process's and one
 * connection's, and cached mode's bound counts processes), HTTP on a free loopback port; `env` adds or overrides settings. The process and the
 * client end with `group`.
 */
export async function startRedisSluice(
  group: ProcessGroup,
  options: { configDir: string; redisUrl: string; env?: Record<string, string> },
): Promise<RedisSluice> {
  const httpPort = await freePort();
  const sluice = await startSluice(group, {
    configDir: options.configDir,
    grpcPort: await freePort(),
    env: {
      ...redisBackendEnv(options.redisUrl),
      WORKERS: '1',
      HOST: '127.0.0.1',
      PORT: String(httpPort),
      ...options.env,
    },
  });
  const client = createEnvoyRlsClient(`127.0.0.1:${sluice.grpcPort}`);
  group.onCleanup(() => client.close());
  return {
    sluice,
    httpPort,
    client,
    async metricsText() {
      return (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
    },
  };
}
