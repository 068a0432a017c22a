/**
 * proto/'s RLQS files against Envoy's own published API (the copy in @grpc/grpc-js-xds): every
 * message, field and enum value sluice declares for `envoy.service.rate_limit_quota.v3` exists
 * there under the same full name, number, type and label; and sluice's codec
 * (src/transport/rlqs-wire.ts) reads what Envoy's protos encode and writes what they decode.
 */
import { describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../src/transport/grpc/proto.js';
import {
  RLQS_PROTO,
  decodeUsageReports,
  encodeQuotaResponse,
} from '../../src/transport/rlqs-wire.js';
import { ENVOY_INCLUDE_DIRS } from '../helpers/envoy-rls-client.js';
import { compareProtos, loadProtoRoot } from '../helpers/proto-root.js';

const ours = loadProtoRoot(RLQS_PROTO, [PROTO_DIR]);
const envoys = loadProtoRoot(RLQS_PROTO, ENVOY_INCLUDE_DIRS);

/** The WEEK unit is newer than the copy (as for rls.proto). */
const NEWER_THAN_THE_COPY = new Set(['envoy.type.v3.RateLimitUnit.WEEK']);

describe("proto/ matches Envoy's published rlqs.proto", () => {
  it('gives every field the same number, type, label and oneof, and every enum value its number', () => {
    const { mismatches, compared } = compareProtos(ours, envoys, ['envoy'], NEWER_THAN_THE_COPY);
    expect(mismatches).toEqual([]);
    expect(compared).toBeGreaterThan(20);
    const method = ours.lookupService('envoy.service.rate_limit_quota.v3.RateLimitQuotaService')
      .methods['StreamRateLimitQuotas']!;
    expect(method.requestStream && method.responseStream).toBe(true);
  });

  it("reads a report Envoy's protos encode", () => {
    const type = envoys.lookupType('envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports');
    const bytes = type
      .encode(
        type.fromObject({
          domain: 'rlqs',
          bucket_quota_usages: [
            {
              bucket_id: { bucket: { name: 'quota', api_key: 'k' } },
              time_elapsed: { seconds: 2, nanos: 500_000_000 },
              num_requests_allowed: 7,
              num_requests_denied: 3,
            },
          ],
        }),
      )
      .finish();
    const report = decodeUsageReports(bytes);
    expect(report.domain).toBe('rlqs');
    expect(report.usages).toHaveLength(1);
    const usage = report.usages[0]!;
    expect([...usage.bucketId].sort((a, b) => a.key.localeCompare(b.key))).toEqual([
      { key: 'api_key', value: 'k' },
      { key: 'name', value: 'quota' },
    ]);
    expect(usage).toMatchObject({ elapsedMs: 2_500, allowed: 7, denied: 3 });
  });

  it("writes assignments and abandons Envoy's protos decode", () => {
    const bucketId = [{ key: 'name', value: 'quota' }];
    const bytes = encodeQuotaResponse([
      {
        kind: 'assign',
        bucketId,
        ttlMs: 10_500,
        strategy: { kind: 'token_bucket', maxTokens: 40, tokensPerFill: 10, fillIntervalMs: 1_000 },
      },
      { kind: 'assign', bucketId, ttlMs: 10_000, strategy: { kind: 'deny_all' } },
      { kind: 'assign', bucketId, ttlMs: 10_000, strategy: { kind: 'allow_all' } },
      { kind: 'abandon', bucketId },
    ]);
    const type = envoys.lookupType('envoy.service.rate_limit_quota.v3.RateLimitQuotaResponse');
    const decoded = type.toObject(type.decode(bytes), {
      longs: Number,
      enums: String,
      oneofs: true,
    }) as { bucket_action: Record<string, any>[] };
    const [tb, deny, allow, abandon] = decoded.bucket_action;
    expect(tb!.bucket_id).toEqual({ bucket: { name: 'quota' } });
    expect(tb!.quota_assignment_action).toEqual({
      assignment_time_to_live: { seconds: 10, nanos: 500_000_000 },
      rate_limit_strategy: {
        token_bucket: {
          max_tokens: 40,
          tokens_per_fill: { value: 10 },
          fill_interval: { seconds: 1, nanos: 0 },
        },
        strategy: 'token_bucket',
      },
    });
    expect(deny!.quota_assignment_action.rate_limit_strategy.blanket_rule).toBe('DENY_ALL');
    // ALLOW_ALL is the enum's zero: written explicitly inside the oneof, so Envoy sees it set.
    expect(allow!.quota_assignment_action.rate_limit_strategy.strategy).toBe('blanket_rule');
    expect(allow!.quota_assignment_action.rate_limit_strategy.blanket_rule).toBe('ALLOW_ALL');
    expect(abandon!.bucket_action).toBe('abandon_action');
  });
});
