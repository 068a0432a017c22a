import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvoyRlsClient, rlsRequest } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

describe('concurrent callers on one key', () => {
  let running: RunningApp;

  beforeAll(async () => {
    const dir = await ruleDir({
      'c.yaml':
        'domain: conc\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 50}\n',
    });
    running = await startApp([dir]);
  });
  afterAll(async () => {
    await running.stop();
  });

  it('admits exactly the limit out of 200 simultaneous calls from several connections', async () => {
    const clients = Array.from({ length: 4 }, () =>
      createEnvoyRlsClient(`127.0.0.1:${running.port}`),
    );
    const calls = Array.from({ length: 200 }, (_, i) =>
      clients[i % clients.length]!.shouldRateLimit(rlsRequest('conc', [{ user: 'same' }]), 15_000),
    );
    const responses = await Promise.all(calls);
    for (const c of clients) c.close();

    const admitted = responses.filter((r) => r.overall_code === 'OK');
    const rejected = responses.filter((r) => r.overall_code === 'OVER_LIMIT');
    expect(admitted).toHaveLength(50);
    expect(rejected).toHaveLength(150);
    // Every admitted call saw a distinct remaining value: 49 down to 0.
    const remaining = admitted.map((r) => r.statuses[0]!.limit_remaining).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 50 }, (_, i) => i));
  });
});
