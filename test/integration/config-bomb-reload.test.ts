/**
 * Issue 22, item 4: a reload with a rule file of YAML aliases that expands to 100,000 rules (a
 * few kilobytes; the million-rule version stalled the server for 42 s and a slightly
 * larger one crashed it) is refused at once: /healthcheck and ShouldRateLimit keep answering
 * within a bound while it is read, the reload is counted as failed, and the old rules keep
 * serving.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { loadSettings } from '../../src/settings.js';
import { LOOPBACK_LISTENERS, capturingLogger, ruleDir } from '../helpers/app.js';
import {
  createEnvoyRlsClient,
  rlsRequest,
  type EnvoyRlsClient,
} from '../helpers/envoy-rls-client.js';
import { aliasBomb } from '../helpers/config-bombs.js';
import { waitFor } from '../helpers/processes.js';

const RULES =
  'domain: live\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n';

/** Longest wait for one health check or call while the reload is read. */
const ANSWER_WITHIN_MS = 2_000;

describe('a reload with an alias bomb never stalls serving', () => {
  let app: App;
  let dir: string;
  let base: string;
  let client: EnvoyRlsClient;
  const log = capturingLogger();

  beforeAll(async () => {
    dir = await ruleDir({ 'live.yaml': RULES });
    const settings = loadSettings(
      {
        ...LOOPBACK_LISTENERS,
      },
      { config: [dir] },
    );
    app = await createApp({ settings, logger: log.logger, watchPollIntervalMs: 200 });
    const addresses = await app.start();
    base = `http://127.0.0.1:${addresses.httpPort}`;
    client = createEnvoyRlsClient(`127.0.0.1:${addresses.grpcPort}`);
  });
  afterAll(async () => {
    client?.close();
    await app?.close();
    await fs.rm(dir, { recursive: true, force: true });
  });

  const loadErrors = async (): Promise<number> => {
    const text = await (await fetch(`${base}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith('ratelimit_service_config_load_error '));
    return Number(line?.split(' ')[1] ?? 0);
  };

  it('health and calls answer within the bound; the reload is refused; the old rules serve', async () => {
    const bomb = aliasBomb(5);
    expect(bomb.length).toBeLessThan(4_000);
    await fs.writeFile(path.join(dir, 'bomb.yaml'), bomb);

    // Until the reload is refused (at most 15 s), health and calls keep answering within their
    // deadlines; what each probe got is kept, since waitFor retries a probe that throws.
    let probes = 0;
    const answers: string[] = [];
    await waitFor(
      'the bomb reload to be refused',
      async () => {
        if ((await loadErrors()) > 0) return true;
        const health = await fetch(`${base}/healthcheck`, {
          signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
        }).then(
          (r) => `health ${r.status}`,
          (e: unknown) => `health failed: ${String(e)}`,
        );
        const call = await client
          .shouldRateLimit(rlsRequest('live', [{ user: `u${probes}` }]), ANSWER_WITHIN_MS)
          .then(
            (r) => `call ${r.overall_code}`,
            (e: unknown) => `call failed: ${String(e)}`,
          );
        answers.push(health, call);
        probes++;
        return false;
      },
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    expect(answers.filter((a) => a !== 'health 200' && a !== 'call OK')).toEqual([]);
    expect(await loadErrors()).toBe(1);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: expect.stringMatching(/reload failed/),
        problems: [
          expect.stringMatching(
            /bomb\.yaml: error loading config file: the file expands to more than 1000000 YAML nodes/,
          ),
        ],
      }),
    );
    // The old rules still decide.
    const after = await client.shouldRateLimit(
      rlsRequest('live', [{ user: 'x' }]),
      ANSWER_WITHIN_MS,
    );
    expect(after.statuses[0]!.current_limit?.requests_per_unit).toBe(1000);
    expect(process.memoryUsage().heapUsed).toBeLessThan(1_000_000_000);
  }, 30_000);
});
