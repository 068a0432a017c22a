/**
 * The real grpcurl (pinned, installed by scripts/install-grpcurl.sh) against a running sluice, with
 * no .proto files: everything grpcurl knows comes from server reflection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { grpcurl, installGrpcurl, requireGrpcurl } from '../helpers/grpcurl.js';

const requirement = requireGrpcurl('grpcurl');

const RULES = `
domain: grpcurl
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1, name: per-user}
`;

// Both implementations of the gRPC port (GRPC_SERVER) must serve the same reflection data.
describe.skipIf(requirement.skip).each(['lean', 'grpc-js'])(
  'grpcurl through server reflection, no proto files (GRPC_SERVER=%s)',
  (server) => {
    let binary: string;
    let running: RunningApp;
    let address: string;

    beforeAll(async () => {
      // Building grpcurl the first time takes a minute or two; later runs find it installed.
      binary = installGrpcurl(requirement);
      running = await startApp([await ruleDir({ 'grpcurl.yaml': RULES })], { GRPC_SERVER: server });
      address = `127.0.0.1:${running.port}`;
    }, 600_000);
    afterAll(async () => {
      await running?.stop();
    });

    /** grpcurl's stdout; fails the test with stderr when grpcurl fails. */
    async function ok(...args: string[]): Promise<string> {
      const result = await grpcurl(binary, args);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      return result.stdout;
    }

    it('lists RateLimitService, the RLQS, Health and the reflection service', async () => {
      const services = (await ok(address, 'list')).trim().split('\n').sort();
      expect(services).toEqual([
        'envoy.service.rate_limit_quota.v3.RateLimitQuotaService',
        'envoy.service.ratelimit.v3.RateLimitService',
        'grpc.health.v1.Health',
        'grpc.reflection.v1.ServerReflection',
        'grpc.reflection.v1alpha.ServerReflection',
      ]);
      expect((await ok(address, 'list', 'grpc.health.v1.Health')).trim().split('\n')).toContain(
        'grpc.health.v1.Health.Check',
      );
      expect(
        await ok(address, 'describe', 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService'),
      ).toMatch(
        /rpc StreamRateLimitQuotas \( stream \.envoy\.service\.rate_limit_quota\.v3\.RateLimitQuotaUsageReports \) returns \( stream \.envoy\.service\.rate_limit_quota\.v3\.RateLimitQuotaResponse \);/,
      );
    });

    it('describes the service and its request and response messages', async () => {
      const service = await ok(address, 'describe', 'envoy.service.ratelimit.v3.RateLimitService');
      expect(service).toMatch(
        /rpc ShouldRateLimit \( \.envoy\.service\.ratelimit\.v3\.RateLimitRequest \) returns \( \.envoy\.service\.ratelimit\.v3\.RateLimitResponse \);/,
      );

      const request = await ok(address, 'describe', 'envoy.service.ratelimit.v3.RateLimitRequest');
      expect(request).toMatch(
        /repeated \.envoy\.extensions\.common\.ratelimit\.v3\.RateLimitDescriptor descriptors = 2;/,
      );
      expect(request).toMatch(/uint32 hits_addend = 3;/);

      // Every import of rls.proto: Duration, Struct, Timestamp and Envoy's HeaderValue.
      const response = await ok(
        address,
        'describe',
        'envoy.service.ratelimit.v3.RateLimitResponse',
      );
      expect(response).toMatch(/\.google\.protobuf\.Duration duration_until_reset = 4;/);
      expect(response).toMatch(/\.google\.protobuf\.Struct dynamic_metadata = 6;/);
      expect(response).toMatch(/\.google\.protobuf\.Timestamp valid_until = 2;/);
      expect(response).toMatch(
        /repeated \.envoy\.config\.core\.v3\.HeaderValue response_headers_to_add = 3;/,
      );
    });

    it('describes RateLimitDescriptor, whose types come from other files', async () => {
      const text = await ok(
        address,
        'describe',
        'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor',
      );
      expect(text).toMatch(
        /repeated \.envoy\.extensions\.common\.ratelimit\.v3\.RateLimitDescriptor\.Entry entries = 1;/,
      );
      expect(text).toMatch(/\.envoy\.type\.v3\.RateLimitUnit unit = 2;/);
      expect(text).toMatch(/\.google\.protobuf\.UInt64Value hits_addend = 3;/);
      expect(await ok(address, 'describe', 'google.protobuf.UInt64Value')).toMatch(
        /uint64 value = 1;/,
      );
      // A map field, spelled out as a nested entry message the way protoc does.
      expect(await ok(address, 'describe', 'google.protobuf.Struct')).toMatch(
        /map<string, \.google\.protobuf\.Value> fields = 1;/,
      );
    });

    it('calls ShouldRateLimit with JSON built from reflection, per-descriptor hits_addend included', async () => {
      const call = (hits?: number): Promise<string> =>
        ok(
          '-d',
          JSON.stringify({
            domain: 'grpcurl',
            descriptors: [
              {
                entries: [{ key: 'user', value: 'alice' }],
                ...(hits === undefined ? {} : { hits_addend: hits }),
              },
            ],
          }),
          address,
          'envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit',
        );
      const check = JSON.parse(await call(0)) as Record<string, any>;
      expect(check['overallCode']).toBe('OK');
      expect(check['statuses'][0]['currentLimit']).toEqual({
        name: 'per-user',
        requestsPerUnit: 1,
        unit: 'MINUTE',
      });
      // hits_addend 0 counted nothing: one request still fits.
      expect(check['statuses'][0]['limitRemaining']).toBe(1);

      expect(JSON.parse(await call())['overallCode']).toBe('OK');
      const over = JSON.parse(await call()) as Record<string, any>;
      expect(over['overallCode']).toBe('OVER_LIMIT');
      expect(over['statuses'][0]['code']).toBe('OVER_LIMIT');
      expect(over['statuses'][0]['durationUntilReset']).toMatch(/^\d+(\.\d+)?s$/);
    });

    it('checks health: the server and the RateLimitService are SERVING', async () => {
      expect(JSON.parse(await ok(address, 'grpc.health.v1.Health/Check'))).toEqual({
        status: 'SERVING',
      });
      expect(
        JSON.parse(
          await ok(
            '-d',
            '{"service":"envoy.service.ratelimit.v3.RateLimitService"}',
            address,
            'grpc.health.v1.Health/Check',
          ),
        ),
      ).toEqual({ status: 'SERVING' });
    });
  },
);
