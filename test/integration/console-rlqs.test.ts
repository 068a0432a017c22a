/**
 * The console's `/api/rlqs` (docs/operations-console.md): a real app, one RLQS stream from a
 * client built on Envoy's own proto; the endpoint lists the bucket with its rule and limit and the
 * stream's last report, demand, computed share, and the share, strategy and TTL last sent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsoleApp, type ConsoleApp } from '../helpers/console.js';
import { createEnvoyRlqsClient, type EnvoyRlqsClient } from '../helpers/envoy-rls-client.js';
import { waitFor } from '../helpers/processes.js';

describe('console /api/rlqs', () => {
  let app: ConsoleApp;
  let client: EnvoyRlqsClient;

  beforeAll(async () => {
    app = await startConsoleApp();
    client = createEnvoyRlqsClient(`127.0.0.1:${app.grpcPort}`);
  });
  afterAll(async () => {
    client?.close();
    await app?.stop();
  });

  it('lists each bucket with its rule and each stream usage, demand, share and assignment', async () => {
    const { call, answers } = client.openStream();
    call.write({
      domain: 'shop',
      bucket_quota_usages: [
        {
          bucket_id: { bucket: { user: 'ann' } },
          time_elapsed: { seconds: 60 },
          num_requests_allowed: 2,
          num_requests_denied: 1,
        },
      ],
    });
    await waitFor('the assignment', () => answers.length === 1, { timeoutMs: 5_000 });
    const body = (await (await fetch(`${app.debugUrl}/api/rlqs`)).json()) as Record<string, any>;
    expect(body).toEqual({
      streams: 1,
      buckets: 1,
      list: [
        {
          domain: 'shop',
          bucketId: [{ key: 'user', value: 'ann' }],
          limit: 3,
          rule: { key: 'shop.user', windowMs: 60_000, algorithm: 'window' },
          demand: 3,
          streams: [
            {
              allowed: 2,
              denied: 1,
              elapsedMs: 60_000,
              demand: 3,
              share: 3,
              sent: 3,
              strategy: {
                kind: 'token_bucket',
                maxTokens: 3,
                tokensPerFill: 3,
                fillIntervalMs: 60_000,
              },
              ttlMs: 240_000,
            },
          ],
        },
      ],
    });
    call.end();
    await waitFor('closed', () => app.app.quota.streamCount === 0, { timeoutMs: 5_000 });
    const after = (await (await fetch(`${app.debugUrl}/api/rlqs`)).json()) as Record<string, any>;
    expect(after).toEqual({ streams: 0, buckets: 0, list: [] });
  });
});
