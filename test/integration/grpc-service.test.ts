import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/clock.js';
import { durationMs, rlsRequest } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const RULES = `
domain: edge
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 3, name: per-key}
  - key: plan
    value: free
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: plan
    value: enterprise
    rate_limit: {unlimited: true}
  - key: path
    value: /health
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 1, name: tenant-wide}
  - key: vip
    rate_limit: {unit: minute, requests_per_unit: 2, name: vip, replaces: [{name: tenant-wide}]}
  - key: trial
    rate_limit: {unit: minute, requests_per_unit: 1}
    shadow_mode: true
`;

describe("ShouldRateLimit over gRPC, called with a client built from Envoy's rls.proto", () => {
  const clock = createManualClock(1_700_000_000_000);
  let running: RunningApp;

  beforeAll(async () => {
    running = await startApp([await ruleDir({ 'edge.yaml': RULES })], {}, { clock: clock.now });
  });
  afterAll(async () => {
    await running.stop();
  });

  it('counts a limited key down, then answers OVER_LIMIT with a reset duration', async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await running.client.shouldRateLimit(rlsRequest('edge', [{ api_key: 'a' }]));
      expect(response.overall_code).toBe('OK');
      expect(response.statuses).toHaveLength(1);
      const status = response.statuses[0]!;
      expect(status.code).toBe('OK');
      expect(status.current_limit).toEqual({
        requests_per_unit: 3,
        unit: 'MINUTE',
        name: 'per-key',
      });
      remaining.push(status.limit_remaining);
      expect(durationMs(status.duration_until_reset)).toBeGreaterThan(0);
      clock.advance(1000);
    }
    expect(remaining).toEqual([2, 1, 0]);

    const over = await running.client.shouldRateLimit(rlsRequest('edge', [{ api_key: 'a' }]));
    expect(over.overall_code).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.code).toBe('OVER_LIMIT');
    expect(over.statuses[0]!.limit_remaining).toBe(0);
    const waitMs = durationMs(over.statuses[0]!.duration_until_reset);
    expect(waitMs).toBeGreaterThan(0);
    expect(waitMs).toBeLessThanOrEqual(60_000 + 3_000);

    // Other keys are independent.
    const other = await running.client.shouldRateLimit(rlsRequest('edge', [{ api_key: 'b' }]));
    expect(other.overall_code).toBe('OK');
    expect(other.statuses[0]!.limit_remaining).toBe(2);

    // After exactly the announced wait the same request is admitted again.
    clock.advance(waitMs);
    const again = await running.client.shouldRateLimit(rlsRequest('edge', [{ api_key: 'a' }]));
    expect(again.overall_code).toBe('OK');
  });

  it('answers one status per descriptor, in order, for mixed rule kinds', async () => {
    const response = await running.client.shouldRateLimit(
      rlsRequest('edge', [
        { plan: 'enterprise' },
        { path: '/health' },
        { plan: 'free' },
        { nope: 'x' },
      ]),
    );
    expect(response.overall_code).toBe('OK');
    const [unlimited, whitelisted, limited, unmatched] = response.statuses;
    expect(unlimited).toMatchObject({
      code: 'OK',
      current_limit: null,
      limit_remaining: 4294967295,
    });
    expect(whitelisted).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: 0 });
    expect(limited).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 1, unit: 'SECOND', name: '' },
      limit_remaining: 0,
    });
    expect(unmatched).toMatchObject({ code: 'OK', current_limit: null, limit_remaining: 0 });
  });

  it('drops a rule named in the replaces of another rule matched in the same request', async () => {
    // tenant-wide allows 1/minute, but a request that also matches vip (which replaces it) is
    // counted by vip alone: twice admitted, then refused by vip, tenant-wide never consulted.
    const both = rlsRequest('edge', [{ tenant: 't1' }, { vip: 'v1' }]);
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await running.client.shouldRateLimit(both));
    expect(answers.map((a) => a.overall_code)).toEqual(['OK', 'OK', 'OVER_LIMIT']);
    for (const answer of answers) {
      expect(answer.statuses[0]).toMatchObject({
        code: 'OK',
        current_limit: null,
        limit_remaining: 0,
      });
    }
    expect(answers.map((a) => a.statuses[1]!.current_limit?.name)).toEqual(['vip', 'vip', 'vip']);
    expect(answers.map((a) => a.statuses[1]!.limit_remaining)).toEqual([1, 0, 0]);

    // Alone, tenant-wide applies, and nothing was charged to it above.
    const alone = await running.client.shouldRateLimit(rlsRequest('edge', [{ tenant: 't1' }]));
    expect(alone.statuses[0]).toMatchObject({
      code: 'OK',
      current_limit: { requests_per_unit: 1, unit: 'MINUTE', name: 'tenant-wide' },
      limit_remaining: 0,
    });
  });

  it('reports a shadow_mode rule over its limit as OK, while still counting it', async () => {
    const request = rlsRequest('edge', [{ trial: 'x' }]);
    const first = await running.client.shouldRateLimit(request);
    const second = await running.client.shouldRateLimit(request);
    expect(first.overall_code).toBe('OK');
    expect(first.statuses[0]!.limit_remaining).toBe(0);
    // Over the limit of 1, but in shadow mode: the answer stays OK.
    expect(second.overall_code).toBe('OK');
    expect(second.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 0 });
  });

  it("applies a descriptor's RateLimitOverride instead of the configured rule", async () => {
    // api_key is configured at 3/minute named per-key; Envoy's override says 2/minute.
    const overridden = {
      domain: 'edge',
      descriptors: [
        {
          entries: [{ key: 'api_key', value: 'override' }],
          limit: { requests_per_unit: 2, unit: 'MINUTE' },
        },
      ],
    };
    const statuses = [];
    for (let i = 0; i < 3; i++) {
      const response = await running.client.shouldRateLimit(overridden);
      expect(response.statuses).toHaveLength(1);
      statuses.push({ overall: response.overall_code, ...response.statuses[0]! });
    }
    const overrideLimit = { requests_per_unit: 2, unit: 'MINUTE', name: '' };
    expect(statuses).toMatchObject([
      { overall: 'OK', code: 'OK', current_limit: overrideLimit, limit_remaining: 1 },
      { overall: 'OK', code: 'OK', current_limit: overrideLimit, limit_remaining: 0 },
      {
        overall: 'OVER_LIMIT',
        code: 'OVER_LIMIT',
        current_limit: overrideLimit,
        limit_remaining: 0,
      },
    ]);
    const waitMs = durationMs(statuses[2]!.duration_until_reset);
    // Counted for at least the override's window and at most one sub-bucket (W/20) longer.
    expect(waitMs).toBeGreaterThanOrEqual(60_000);
    expect(waitMs).toBeLessThanOrEqual(60_000 + 3_000);
  });

  it('answers OK with no limit for an override whose unit is UNKNOWN', async () => {
    const request = {
      domain: 'edge',
      descriptors: [
        {
          entries: [{ key: 'api_key', value: 'unknown-unit' }],
          limit: { requests_per_unit: 1, unit: 'UNKNOWN' },
        },
      ],
    };
    // Twice: a limit of 1 would refuse the second call if it were applied.
    for (let i = 0; i < 2; i++) {
      const response = await running.client.shouldRateLimit(request);
      expect(response.overall_code).toBe('OK');
      expect(response.statuses).toEqual([
        expect.objectContaining({ code: 'OK', current_limit: null, limit_remaining: 0 }),
      ]);
    }
  });

  it('answers OK with no limits for an unknown domain, never UNKNOWN', async () => {
    const response = await running.client.shouldRateLimit(
      rlsRequest('nowhere', [{ api_key: 'a' }]),
    );
    expect(response.overall_code).toBe('OK');
    expect(response.statuses).toEqual([
      expect.objectContaining({ code: 'OK', current_limit: null, limit_remaining: 0 }),
    ]);
  });

  it('rejects an empty domain and an empty descriptor list with the reference messages', async () => {
    await expect(
      running.client.shouldRateLimit({
        domain: '',
        descriptors: [{ entries: [{ key: 'a', value: 'b' }] }],
      }),
    ).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'rate limit domain must not be empty',
    });
    await expect(
      running.client.shouldRateLimit({ domain: 'edge', descriptors: [] }),
    ).rejects.toMatchObject({
      code: grpc.status.INVALID_ARGUMENT,
      details: 'rate limit descriptor list must not be empty',
    });
  });

  it('charges hits_addend: the request value, and a descriptor value that takes precedence', async () => {
    const first = await running.client.shouldRateLimit(
      rlsRequest('edge', [{ api_key: 'h' }], { hits_addend: 2 }),
    );
    expect(first.statuses[0]!.limit_remaining).toBe(1);
    // Envoy's published proto predates the per-descriptor hits_addend (field 3), so this part
    // is encoded with sluice's own proto, which carries it.
    const { loadRlsPackage } = await import('../../src/transport/grpc/proto.js');
    const ours = loadRlsPackage()[
      'envoy.service.ratelimit.v3.RateLimitService'
    ] as grpc.ServiceDefinition;
    const bytes = ours.ShouldRateLimit!.requestSerialize({
      domain: 'edge',
      hits_addend: 5,
      descriptors: [{ entries: [{ key: 'api_key', value: 'h' }], hits_addend: { value: 0 } }],
    });
    const checkOnly = await running.client.sendRaw(bytes);
    expect(checkOnly.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 1 });
  });

  it('serves grpc.health.v1 for the service and the server', async () => {
    const { loadSync } = await import('@grpc/proto-loader');
    const { protoPath } = await import('grpc-health-check');
    const healthPkg = grpc.loadPackageDefinition(loadSync(protoPath, { enums: String })) as any;
    const health = new healthPkg.grpc.health.v1.Health(
      `127.0.0.1:${running.port}`,
      grpc.credentials.createInsecure(),
    );
    const status = await new Promise<any>((resolve, reject) =>
      health.Check(
        { service: 'envoy.service.ratelimit.v3.RateLimitService' },
        (e: Error | null, r: any) => (e ? reject(e) : resolve(r)),
      ),
    );
    const overall = await new Promise<any>((resolve, reject) =>
      health.Check({ service: '' }, (e: Error | null, r: any) => (e ? reject(e) : resolve(r))),
    );
    health.close();
    expect(status.status).toBe('SERVING');
    expect(overall.status).toBe('SERVING');
  });

  it('answers server reflection (grpc.reflection.v1) with the RateLimitService', async () => {
    const { createRequire } = await import('node:module');
    const { loadSync } = await import('@grpc/proto-loader');
    const require = createRequire(import.meta.url);
    const protoFile =
      require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto');
    const pkg = grpc.loadPackageDefinition(loadSync(protoFile, { keepCase: true })) as any;
    const client = new pkg.grpc.reflection.v1.ServerReflection(
      `127.0.0.1:${running.port}`,
      grpc.credentials.createInsecure(),
    );
    const names = await new Promise<string[]>((resolve, reject) => {
      const call = client.ServerReflectionInfo({ deadline: Date.now() + 5000 });
      call.on('data', (response: any) => {
        resolve(
          (response.list_services_response?.service ?? []).map((s: { name: string }) => s.name),
        );
        call.end();
      });
      call.on('error', reject);
      call.write({ list_services: '' });
    });
    client.close();
    expect(names).toContain('envoy.service.ratelimit.v3.RateLimitService');
  });
});
