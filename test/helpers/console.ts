/**
 * A sluice app with every listener on a free loopback port, for the debug console's tests
 * (JSON endpoints and the browser suite), plus the rules they share.
 */
import { createApp, type App } from '../../src/app.js';
import type { Clock } from '../../src/clock.js';
import { LOOPBACK_LISTENERS, capturingLogger, ruleDir } from './app.js';
import { serverUnderTest } from './processes.js';
import { createEnvoyRlsClient, rlsRequest, type EnvoyRlsClient } from './envoy-rls-client.js';
import { loadSettings } from '../../src/settings.js';

/** Rules with a limited key, a nested rule, a shadow wildcard and an unlimited key. */
const CONSOLE_RULES = `domain: shop
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: hour, requests_per_unit: 20, name: login}
  - key: api_key
    value: "partner-*"
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: health
    rate_limit: {unlimited: true}
`;

/** A running app with its ports, a gRPC client and the log lines it wrote. */
export interface ConsoleApp {
  readonly app: App;
  readonly grpcPort: number;
  readonly httpPort: number;
  readonly debugPort: number;
  /** `http://127.0.0.1:<debugPort>`. */
  readonly debugUrl: string;
  readonly client: EnvoyRlsClient;
  readonly logLines: Record<string, unknown>[];
  /** Send one ShouldRateLimit call for `domain` and descriptors given as objects. */
  call(domain: string, ...descriptors: Record<string, string>[]): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Start sluice on free loopback ports with {@link CONSOLE_RULES} (or `rules`) and `env`; `clock`
 * (default the system's) is the store's and the console's time.
 */
export async function startConsoleApp(
  env: Record<string, string> = {},
  rules: string = CONSOLE_RULES,
  sampleIntervalMs?: number,
  clock?: Clock,
): Promise<ConsoleApp> {
  const dir = await ruleDir({ 'shop.yaml': rules });
  const settings = loadSettings(
    { ...LOOPBACK_LISTENERS, ...serverUnderTest(), ...env },
    { config: [dir] },
  );
  const { logger, lines } = capturingLogger();
  const app = await createApp({
    settings,
    logger,
    consoleSampleIntervalMs: sampleIntervalMs,
    ...(clock === undefined ? {} : { clock }),
  });
  const { grpcPort, httpPort, debugPort } = await app.start();
  const client = createEnvoyRlsClient(`127.0.0.1:${grpcPort}`);
  return {
    app,
    grpcPort,
    httpPort,
    debugPort,
    debugUrl: `http://127.0.0.1:${debugPort}`,
    client,
    logLines: lines,
    async call(domain, ...descriptors) {
      const response = await client.shouldRateLimit(rlsRequest(domain, descriptors));
      return response.overall_code;
    },
    async stop() {
      client.close();
      await app.close();
    },
  };
}
