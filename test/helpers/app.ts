/**
 * Starts a real sluice app in-process on 127.0.0.1:0 for integration tests.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createApp, type App } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { createLogger, silentLogger, type Logger } from '../../src/logging/logger.js';
import { loadSettings } from '../../src/settings.js';
import { createEnvoyRlsClient, type EnvoyRlsClient } from './envoy-rls-client.js';
import { serverUnderTest } from './processes.js';

/**
 * Every listener of an app under test on 127.0.0.1, each on a port the system picks (never the
 * defaults 8081, 8080 and 6070 another sluice on the machine may hold): gRPC, HTTP and debug.
 */
export const LOOPBACK_LISTENERS = {
  GRPC_HOST: '127.0.0.1',
  GRPC_PORT: '0',
  HOST: '127.0.0.1',
  PORT: '0',
  DEBUG_HOST: '127.0.0.1',
  DEBUG_PORT: '0',
} as const;

/** A running app plus a client generated from Envoy's protos. */
export interface RunningApp {
  readonly app: App;
  readonly port: number;
  /** The bound HTTP port (`/healthcheck`, `/json`, `/metrics`). */
  readonly httpPort: number;
  readonly client: EnvoyRlsClient;
  stop(): Promise<void>;
}

/** Start sluice with the given rule paths and extra environment variables. */
export async function startApp(
  configPaths: string[],
  env: Record<string, string> = {},
  options: { clock?: Clock; logger?: Logger; watchPollIntervalMs?: number } = {},
): Promise<RunningApp> {
  const settings = loadSettings(
    { ...LOOPBACK_LISTENERS, ...serverUnderTest(), ...env },
    {
      config: configPaths,
    },
  );
  const app = await createApp({
    settings,
    logger: options.logger ?? silentLogger(),
    clock: options.clock,
    watchPollIntervalMs: options.watchPollIntervalMs,
  });
  const { grpcPort, httpPort } = await app.start();
  const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
  return {
    app,
    port: grpcPort,
    httpPort,
    client,
    async stop() {
      client.close();
      await app.close();
    },
  };
}

/** A fresh temp directory holding `files` (name -> YAML text). */
export async function ruleDir(files: Record<string, string>): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-rules-'));
  for (const [name, text] of Object.entries(files)) {
    await fs.writeFile(path.join(dir, name), text);
  }
  return dir;
}

/** A logger that keeps every JSON line it writes, parsed, in `lines`. */
export function capturingLogger(): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: 'info',
    format: 'json',
    destination: {
      write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>),
    },
  });
  return { logger, lines };
}
