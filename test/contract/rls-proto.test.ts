/**
 * proto/ against Envoy's own published API (the copy in @grpc/grpc-js-xds): every message, field
 * and enum value we declare exists there under the same full name, number, type and label, except
 * the two additions that copy predates. And a response using every field we declare, encoded with
 * our protos, decodes with Envoy's to the same values.
 */
import { describe, expect, it } from 'vitest';
import { PROTO_DIR, RLS_PROTO } from '../../src/transport/grpc/proto.js';
import { ENVOY_INCLUDE_DIRS } from '../helpers/envoy-rls-client.js';
import { compareProtos, loadProtoRoot, protoDeclarations } from '../helpers/proto-root.js';

const ours = loadProtoRoot(RLS_PROTO, [PROTO_DIR]);
const envoys = loadProtoRoot(RLS_PROTO, ENVOY_INCLUDE_DIRS);

/**
 * What our protos add to the copy in @grpc/grpc-js-xds, which predates them (Envoy's current API
 * has both): the per-descriptor `hits_addend` and the WEEK unit.
 */
const NEWER_THAN_THE_COPY = new Set([
  'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.hits_addend',
  'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit.WEEK',
  'envoy.type.v3.RateLimitUnit.WEEK',
]);

describe("proto/ matches Envoy's published rls.proto", () => {
  const ourTypes = protoDeclarations(ours, ['envoy']);

  it('declares the service and messages the spec lists', () => {
    expect([...ourTypes.keys()]).toEqual(
      expect.arrayContaining([
        'envoy.service.ratelimit.v3.RateLimitRequest',
        'envoy.service.ratelimit.v3.RateLimitResponse',
        'envoy.service.ratelimit.v3.RateLimitResponse.Code',
        'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit',
        'envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit',
        'envoy.service.ratelimit.v3.RateLimitResponse.DescriptorStatus',
        'envoy.service.ratelimit.v3.RateLimitResponse.Quota',
        'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor',
        'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry',
        'envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.RateLimitOverride',
        'envoy.config.core.v3.HeaderValue',
        'envoy.type.v3.RateLimitUnit',
      ]),
    );
    const method = ours.lookupService('envoy.service.ratelimit.v3.RateLimitService').methods[
      'ShouldRateLimit'
    ];
    const theirs = envoys.lookupService('envoy.service.ratelimit.v3.RateLimitService').methods[
      'ShouldRateLimit'
    ];
    expect(method?.resolvedRequestType?.fullName).toBe(theirs?.resolvedRequestType?.fullName);
    expect(method?.resolvedResponseType?.fullName).toBe(theirs?.resolvedResponseType?.fullName);
  });

  it('gives every field the same number, type, label and oneof, and every enum value its number', () => {
    const { mismatches, compared } = compareProtos(ours, envoys, ['envoy'], NEWER_THAN_THE_COPY);
    expect(mismatches).toEqual([]);
    expect(compared).toBeGreaterThan(40);
  });

  it('encodes a response using every field with our protos that Envoy decodes to the same values', () => {
    const response = {
      overall_code: 2,
      statuses: [
        {
          code: 2,
          current_limit: { name: 'per-key', requests_per_unit: 3, unit: 2 },
          limit_remaining: 0,
          duration_until_reset: { seconds: 59, nanos: 250_000_000 },
          quota: { requests: 7, valid_until: { seconds: 1_700_000_000, nanos: 0 }, id: 'q1' },
        },
      ],
      response_headers_to_add: [{ key: 'x-ratelimit-limit', value: '3' }],
      request_headers_to_add: [{ key: 'x-seen', value: 'yes' }],
      raw_body: Buffer.from('slow down'),
      // protobufjs's built-in well-known types name their fields in camelCase.
      dynamic_metadata: { fields: { tier: { stringValue: 'free' } } },
      quota: { requests: 1, id: 'q2' },
    };
    const name = 'envoy.service.ratelimit.v3.RateLimitResponse';
    const ourType = ours.lookupType(name);
    expect(ourType.verify(response)).toBeNull();
    const bytes = ourType.encode(ourType.fromObject(response)).finish();
    const options = { longs: Number, bytes: Buffer, defaults: false };
    const decoded = envoys
      .lookupType(name)
      .toObject(envoys.lookupType(name).decode(bytes), options);
    expect(decoded).toEqual(ourType.toObject(ourType.decode(bytes), options));
    expect(decoded).toMatchObject({
      overall_code: 2,
      statuses: [{ code: 2, current_limit: { name: 'per-key', requests_per_unit: 3, unit: 2 } }],
      request_headers_to_add: [{ key: 'x-seen', value: 'yes' }],
      dynamic_metadata: { fields: { tier: { stringValue: 'free' } } },
      quota: { requests: 1, id: 'q2' },
    });
    expect(Buffer.from(decoded['raw_body'] as Uint8Array).toString()).toBe('slow down');
  });
});
