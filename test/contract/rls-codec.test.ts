/**
 * The lean server's hand-written codec (src/transport/h2/codec.ts) against protobufjs with
 * Envoy's own protos (the copy in @grpc/grpc-js-xds), on random messages: what Envoy's encoder
 * writes, ours decodes to the same values, unknown fields included; what ours writes, Envoy's
 * decoder reads back as the domain response said; every truncation of a request fails exactly
 * when protobufjs fails. The two fields that copy predates (per-descriptor hits_addend, WEEK) are
 * checked with our own proto/, which the rls-proto contract test holds to Envoy's numbering.
 */
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import {
  RATE_LIMIT_UNITS,
  type DescriptorStatus,
  type JsonValue,
  type RateLimitRequest,
  type RateLimitResponse,
} from '../../src/model.js';
import { decodeRateLimitRequest, encodeRateLimitResponse } from '../../src/transport/h2/codec.js';
import { PROTO_DIR, RLS_PROTO } from '../../src/transport/grpc/proto.js';
import { ENVOY_INCLUDE_DIRS } from '../helpers/envoy-rls-client.js';
import { loadProtoRoot } from '../helpers/proto-root.js';

const envoy = loadProtoRoot(RLS_PROTO, ENVOY_INCLUDE_DIRS);
const ours = loadProtoRoot(RLS_PROTO, [PROTO_DIR]);
const REQUEST = 'envoy.service.ratelimit.v3.RateLimitRequest';
const RESPONSE = 'envoy.service.ratelimit.v3.RateLimitResponse';
const envoyRequest = envoy.lookupType(REQUEST);
const envoyResponse = envoy.lookupType(RESPONSE);
const ourRequest = ours.lookupType(REQUEST);

const RUNS = 300;

// ---- random values ------------------------------------------------------------------------

/** Any string, including astral characters (4-byte UTF-8) and the empty string. */
const text = fc.string({ unit: 'binary', maxLength: 12 });
const uint32 = fc.integer({ min: 0, max: 0xffff_ffff });

const wireEntry = fc.record({ key: text, value: text });
/** A RateLimitOverride as Envoy's proto has it: units 0..6 (the copy predates WEEK). */
const wireOverride = fc.record({ requests_per_unit: uint32, unit: fc.integer({ min: 0, max: 6 }) });
const wireDescriptor = fc.record(
  { entries: fc.array(wireEntry, { maxLength: 4 }), limit: wireOverride },
  { requiredKeys: ['entries'] },
);
const wireRequest = fc.record(
  {
    domain: text,
    descriptors: fc.array(wireDescriptor, { maxLength: 4 }),
    hits_addend: uint32,
  },
  { requiredKeys: [] },
);

interface WireRequest {
  domain?: string;
  descriptors?: {
    entries?: { key?: string; value?: string }[];
    limit?: { requests_per_unit?: number; unit?: number };
    hits_addend?: { value: number };
  }[];
  hits_addend?: number;
}

/** What the domain request must be for a wire request (proto3 zero values for absent fields). */
function expectedRequest(wire: WireRequest): RateLimitRequest {
  return {
    domain: wire.domain ?? '',
    hitsAddend: wire.hits_addend ?? 0,
    descriptors: (wire.descriptors ?? []).map((d) => ({
      entries: (d.entries ?? []).map((e) => ({ key: e.key ?? '', value: e.value ?? '' })),
      limit:
        d.limit === undefined
          ? undefined
          : {
              requestsPerUnit: d.limit.requests_per_unit ?? 0,
              unit: d.limit.unit ? RATE_LIMIT_UNITS[d.limit.unit - 1] : undefined,
            },
      hitsAddend: d.hits_addend === undefined ? undefined : d.hits_addend.value,
    })),
  };
}

/** A field number none of the request's messages uses, with a valid payload of any wire type. */
const unknownField = fc.record({
  field: fc.integer({ min: 4, max: 2 ** 29 - 1 }),
  kind: fc.constantFrom('varint', 'fixed64', 'bytes', 'fixed32', 'group'),
  n: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
  bytes: fc.uint8Array({ maxLength: 20 }),
});

function encodeUnknown(u: UnknownField): Uint8Array {
  const w = protobuf.Writer.create();
  switch (u.kind) {
    case 'varint':
      w.uint32((u.field << 3) | 0).uint64(u.n);
      break;
    case 'fixed64':
      w.uint32((u.field << 3) | 1).fixed64(u.n);
      break;
    case 'bytes':
      w.uint32((u.field << 3) | 2).bytes(u.bytes);
      break;
    case 'fixed32':
      w.uint32((u.field << 3) | 5).fixed32(u.n);
      break;
    case 'group':
      // A group holding one varint field, closed by the matching end-group tag.
      w.uint32((u.field << 3) | 3)
        .uint32((1 << 3) | 0)
        .uint32(u.n)
        .uint32((u.field << 3) | 4);
      break;
  }
  return w.finish();
}

interface UnknownField {
  field: number;
  kind: 'varint' | 'fixed64' | 'bytes' | 'fixed32' | 'group';
  n: number;
  bytes: Uint8Array;
}

// ---- requests -----------------------------------------------------------------------------

describe("the lean codec decodes what Envoy's protos encode", () => {
  it('decodes random requests to the domain values protobufjs encoded', () => {
    fc.assert(
      fc.property(wireRequest, (wire) => {
        const bytes = envoyRequest.encode(envoyRequest.fromObject(wire)).finish();
        expect(decodeRateLimitRequest(bytes)).toEqual(expectedRequest(wire as WireRequest));
      }),
      { numRuns: RUNS },
    );
  });

  it('decodes per-descriptor hits_addend and WEEK overrides (our proto/, same numbers)', () => {
    const descriptor = fc.record(
      {
        entries: fc.array(wireEntry, { maxLength: 3 }),
        limit: fc.record({ requests_per_unit: uint32, unit: fc.integer({ min: 0, max: 7 }) }),
        hits_addend: fc.record({ value: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }) }),
      },
      { requiredKeys: ['entries'] },
    );
    fc.assert(
      fc.property(
        fc.record({ domain: text, descriptors: fc.array(descriptor, { maxLength: 3 }) }),
        (wire) => {
          const bytes = ourRequest.encode(ourRequest.fromObject(wire)).finish();
          expect(decodeRateLimitRequest(bytes)).toEqual(expectedRequest(wire as WireRequest));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('skips unknown fields of every wire type anywhere in the request', () => {
    fc.assert(
      fc.property(
        wireRequest,
        fc.array(unknownField, { minLength: 1, maxLength: 4 }),
        fc.nat(),
        (wire, unknowns, at) => {
          const known = envoyRequest.encode(envoyRequest.fromObject(wire)).finish();
          // Insert the unknown fields at a field boundary of the top-level message: the
          // boundaries are found by protobufjs's own reader.
          const reader = protobuf.Reader.create(known);
          const boundaries = [0];
          while (reader.pos < reader.len) {
            reader.skipType(reader.uint32() & 7);
            boundaries.push(reader.pos);
          }
          const cut = boundaries[at % boundaries.length]!;
          const extra = Buffer.concat(unknowns.map((u) => encodeUnknown(u as UnknownField)));
          const bytes = Buffer.concat([known.subarray(0, cut), extra, known.subarray(cut)]);
          expect(decodeRateLimitRequest(bytes)).toEqual(expectedRequest(wire as WireRequest));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('fails on every truncation exactly when protobufjs does, and never reads past the end', () => {
    const ascii = fc.string({ maxLength: 10 });
    const request = fc.record({
      domain: ascii,
      descriptors: fc.array(
        fc.record({
          entries: fc.array(fc.record({ key: ascii, value: ascii }), { maxLength: 3 }),
          limit: wireOverride,
        }),
        { minLength: 1, maxLength: 3 },
      ),
      hits_addend: uint32,
    });
    let failures = 0;
    fc.assert(
      fc.property(request, (wire) => {
        const bytes = envoyRequest.encode(envoyRequest.fromObject(wire)).finish();
        for (let n = 0; n < bytes.length; n++) {
          // A plain Uint8Array: protobufjs's reader for Node Buffers clamps a string that runs
          // past the end instead of failing (the lenient decode the lean codec must not copy).
          const prefix = new Uint8Array(bytes.subarray(0, n));
          let theirs: unknown;
          try {
            theirs = envoyRequest.toObject(envoyRequest.decode(prefix), { longs: Number });
          } catch {
            theirs = undefined;
          }
          if (theirs === undefined) {
            failures++;
            expect(() => decodeRateLimitRequest(prefix)).toThrow(
              expect.objectContaining({
                name: 'SluiceError',
                code: expect.stringMatching(/^(MALFORMED_MESSAGE|INVALID_UTF8)$/),
              }),
            );
          } else {
            expect(decodeRateLimitRequest(prefix)).toEqual(expectedRequest(theirs as WireRequest));
          }
        }
      }),
      { numRuns: 100 },
    );
    // Most cuts land inside a field: the property above is not vacuous.
    expect(failures).toBeGreaterThan(100);
  });
});

// ---- responses ----------------------------------------------------------------------------

const unit = fc.constantFrom(...RATE_LIMIT_UNITS.filter((u) => u !== 'week'));
const status: fc.Arbitrary<DescriptorStatus> = fc.record({
  code: fc.constantFrom('OK' as const, 'OVER_LIMIT' as const),
  currentLimit: fc.option(fc.record({ requestsPerUnit: uint32, unit, name: text }), {
    nil: undefined,
  }),
  limitRemaining: uint32,
  durationUntilResetMs: fc.option(fc.integer({ min: 0, max: 400 * 86_400_000 }), {
    nil: undefined,
  }),
  rule: fc.constant(undefined),
  hits: fc.constant(0),
  overLimit: fc.boolean(),
});
const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.double({ noNaN: true }),
    text,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(text, tie('value'), { maxKeys: 3 }),
  ),
})).value;
const response: fc.Arbitrary<RateLimitResponse> = fc.record(
  {
    overallCode: fc.constantFrom('OK' as const, 'OVER_LIMIT' as const),
    statuses: fc.array(status, { maxLength: 4 }),
    responseHeadersToAdd: fc.array(fc.record({ key: text, value: text }), { maxLength: 3 }),
    rawBody: fc.uint8Array({ maxLength: 40 }),
    dynamicMetadata: fc.dictionary(text, json, { maxKeys: 4 }),
  },
  { requiredKeys: ['overallCode', 'statuses', 'responseHeadersToAdd'] },
);

/** A decoded google.protobuf.Value (protobufjs, camelCase, oneofs named) as plain JSON. */
function fromValue(value: Record<string, unknown>): JsonValue {
  switch (value['kind']) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return value['numberValue'] as number;
    case 'stringValue':
      return value['stringValue'] as string;
    case 'boolValue':
      return value['boolValue'] as boolean;
    case 'structValue':
      return fromStruct(value['structValue'] as Record<string, unknown>);
    case 'listValue':
      return (((value['listValue'] as Record<string, unknown>)['values'] ?? []) as []).map(
        fromValue,
      );
    default:
      throw new Error(`Value without a kind: ${JSON.stringify(value)}`);
  }
}

function fromStruct(struct: Record<string, unknown>): Record<string, JsonValue> {
  const fields = (struct['fields'] ?? {}) as Record<string, Record<string, unknown>>;
  return Object.fromEntries(Object.entries(fields).map(([key, value]) => [key, fromValue(value)]));
}

describe("Envoy's protos decode what the lean codec encodes", () => {
  it('encodes random responses, every field the domain response carries', () => {
    fc.assert(
      fc.property(response, (res) => {
        const bytes = encodeRateLimitResponse(res);
        const decoded = envoyResponse.toObject(envoyResponse.decode(bytes), {
          longs: Number,
          enums: Number,
          bytes: Buffer,
          defaults: true,
          oneofs: true,
        });
        const code = (c: 'OK' | 'OVER_LIMIT'): number => (c === 'OK' ? 1 : 2);
        expect(decoded['overall_code']).toBe(code(res.overallCode));
        expect(decoded['statuses']).toEqual(
          res.statuses.map((s) => ({
            code: code(s.code),
            current_limit:
              s.currentLimit === undefined
                ? null
                : {
                    requests_per_unit: s.currentLimit.requestsPerUnit,
                    unit: RATE_LIMIT_UNITS.indexOf(s.currentLimit.unit) + 1,
                    name: s.currentLimit.name,
                  },
            limit_remaining: s.limitRemaining,
            duration_until_reset:
              s.durationUntilResetMs === undefined
                ? null
                : {
                    seconds: Math.floor(s.durationUntilResetMs / 1000),
                    nanos: (s.durationUntilResetMs % 1000) * 1_000_000,
                  },
            quota: null,
          })),
        );
        // Envoy's HeaderValue also has raw_value (bytes, empty here).
        const headers = decoded['response_headers_to_add'] as { key: string; value: string }[];
        expect(headers.map((h) => ({ key: h.key, value: h.value }))).toEqual(
          res.responseHeadersToAdd.map((h) => ({ key: h.key, value: h.value })),
        );
        expect([...(decoded['raw_body'] as Buffer)]).toEqual([...(res.rawBody ?? [])]);
        if (res.dynamicMetadata === undefined) {
          expect(decoded['dynamic_metadata']).toBeNull();
        } else {
          expect(fromStruct(decoded['dynamic_metadata'] as Record<string, unknown>)).toEqual(
            res.dynamicMetadata,
          );
        }
      }),
      { numRuns: RUNS },
    );
  });

  it('writes WEEK (7) for a weekly rule, as our proto/ numbers it', () => {
    const bytes = encodeRateLimitResponse({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: { requestsPerUnit: 5, unit: 'week', name: '' },
          limitRemaining: 4,
          durationUntilResetMs: 1500,
          rule: undefined,
          hits: 1,
          overLimit: false,
        },
      ],
      responseHeadersToAdd: [],
    });
    const type = ours.lookupType(RESPONSE);
    expect(type.toObject(type.decode(bytes), { enums: String, longs: Number })).toEqual({
      overall_code: 'OK',
      statuses: [
        {
          code: 'OK',
          current_limit: { requests_per_unit: 5, unit: 'WEEK' },
          limit_remaining: 4,
          duration_until_reset: { seconds: 1, nanos: 500_000_000 },
        },
      ],
    });
  });
});
