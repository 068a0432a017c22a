/**
 * RLQS across sluice replicas (issue 35): two sluice apps on one real Redis, one report stream
 * each on the same bucket. Their shares add up to the limit; when one stream goes idle the
 * other gets the whole limit and the idle one a standby share on top; when it ends, its replica drops out of the exchange
 * and the other gets the whole limit. Conditions are waited for; nothing asserts on time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { shareFloor } from '../../src/rlqs/shares.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import {
  createEnvoyRlqsClient,
  type EnvoyRlqsClient,
  type QuotaStream,
} from '../helpers/envoy-rls-client.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';

const redis = requireRedis('integration: RLQS shared across replicas through Redis');
const suite = (title: string): string =>
  redis.skip ? `${title} (SKIPPED: ${redis.reason})` : title;

const LIMIT = 600;
const RULES = `
domain: rlqs
descriptors:
  - key: name
    rate_limit: { unit: minute, requests_per_unit: ${LIMIT} }
`;

/** One Envoy's report stream to one replica. */
class ReportStream {
  readonly client: EnvoyRlqsClient;
  readonly call: QuotaStream['call'];
  constructor(port: number) {
    this.client = createEnvoyRlqsClient(`127.0.0.1:${port}`);
    this.call = this.client.openStream().call;
  }
  report(allowed: number): void {
    this.call.write({
      domain: 'rlqs',
      bucket_quota_usages: [
        {
          bucket_id: { bucket: { name: 'shared' } },
          time_elapsed: { seconds: 1, nanos: 0 },
          num_requests_allowed: allowed,
          num_requests_denied: 0,
        },
      ],
    });
  }
  close(): void {
    this.call.end();
    this.client.close();
  }
}

/** The share last sent to the one stream of `app` for the bucket, or undefined. */
function sentShare(app: RunningApp): number | undefined {
  for (const bucket of app.app.quota.describe()) return bucket.shares[0]?.sent;
  return undefined;
}

describe.skipIf(redis.skip)(suite('RLQS shares across two replicas on one Redis'), () => {
  const group = useProcessGroup();
  const apps: RunningApp[] = [];

  beforeAll(async () => {
    const server = await startRedis(group);
    const rules = await ruleDir({ 'rlqs.yaml': RULES });
    for (let i = 0; i < 2; i++) {
      apps.push(
        await startApp([rules], {
          BACKEND_TYPE: 'redis',
          REDIS_URL: `127.0.0.1:${server.port}`,
          CACHE_KEY_PREFIX: `rlqs-test-${process.pid}-`,
        }),
      );
    }
  });
  afterAll(async () => {
    for (const app of apps) await app.stop();
  });

  it('shares add up to the limit; an idle replica keeps a standby; a gone one drops out', async () => {
    const [a, b] = [new ReportStream(apps[0]!.port), new ReportStream(apps[1]!.port)];
    try {
      // Equal demand on both replicas: each is sent half, together the limit.
      await waitFor(
        'both replicas sent half the limit',
        () => {
          a.report(100);
          b.report(100);
          return sentShare(apps[0]!) === LIMIT / 2 && sentShare(apps[1]!) === LIMIT / 2;
        },
        { timeoutMs: 20_000, intervalMs: 200 },
      );

      // b goes idle: within a few reports and exchanges a gets the whole limit, b a standby
      // share of a tenth of it over the two instances, on top (docs/rlqs.md, "Fairness").
      const standby = shareFloor(LIMIT, 2);
      await waitFor(
        "the busy replica's share grown to the whole limit",
        () => {
          a.report(100);
          b.report(0);
          return sentShare(apps[0]!) === LIMIT && sentShare(apps[1]!) === standby;
        },
        { timeoutMs: 20_000, intervalMs: 200 },
      );
      expect(sentShare(apps[0]!)! + sentShare(apps[1]!)!).toBe(LIMIT + standby);

      // b's stream ends: its replica stops publishing the bucket; after the exchange TTL a is
      // alone again and is sent the whole limit.
      b.close();
      await waitFor(
        'the remaining replica sent the whole limit',
        () => {
          a.report(100);
          return sentShare(apps[0]!) === LIMIT;
        },
        { timeoutMs: 20_000, intervalMs: 200 },
      );
    } finally {
      a.close();
      b.close();
    }
  }, 60_000);
});
