/**
 * The Rate Limit Quota Service's messages on the wire, for both gRPC servers: decode a
 * `RateLimitQuotaUsageReports`, encode a `RateLimitQuotaResponse` (docs/rlqs.md). Built with
 * protobufjs from sluice's own `proto/` files at first use; the stream carries one message per
 * Envoy report interval, far from the hot path, so a generic codec is enough here.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { SluiceError } from '../errors.js';
import type { BucketAction, BucketEntry, QuotaStrategy, UsageReports } from '../rlqs/model.js';
import type { QuotaRefusal } from '../rlqs/quota-stream.js';
import { GrpcStatus, type GrpcStatusCode } from './status.js';

/** sluice's `proto/` (as transport/grpc/proto.ts names it, without loading @grpc/grpc-js). */
const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

/** The RLQS file, relative to `proto/`. */
export const RLQS_PROTO = 'envoy/service/rate_limit_quota/v3/rlqs.proto';

interface Codec {
  readonly reports: protobuf.Type;
  readonly response: protobuf.Type;
}

let codec: Codec | undefined;

function load(): Codec {
  if (codec !== undefined) return codec;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) =>
    path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
  root.loadSync(path.join(PROTO_DIR, RLQS_PROTO), { keepCase: true });
  root.resolveAll();
  codec = {
    reports: root.lookupType('envoy.service.rate_limit_quota.v3.RateLimitQuotaUsageReports'),
    response: root.lookupType('envoy.service.rate_limit_quota.v3.RateLimitQuotaResponse'),
  };
  return codec;
}

/** The wire shape of a decoded Duration. */
interface WireDuration {
  readonly seconds?: number;
  readonly nanos?: number;
}

interface WireUsage {
  readonly bucket_id?: { readonly bucket?: Record<string, string> };
  readonly time_elapsed?: WireDuration;
  readonly num_requests_allowed?: number;
  readonly num_requests_denied?: number;
}

/**
 * Decode one report message. Throws `MALFORMED_MESSAGE` for bytes that are not one; the service
 * checks the content (docs/rlqs.md, "Limits").
 */
export function decodeUsageReports(bytes: Uint8Array): UsageReports {
  let wire: { domain?: string; bucket_quota_usages?: WireUsage[] };
  try {
    const { reports } = load();
    wire = reports.toObject(reports.decode(bytes), { longs: Number, defaults: false });
  } catch (err) {
    throw new SluiceError(
      'MALFORMED_MESSAGE',
      `malformed RateLimitQuotaUsageReports: ${String(err)}`,
    );
  }
  const usages = (wire.bucket_quota_usages ?? []).map((usage) => {
    const bucket = usage.bucket_id?.bucket ?? {};
    const bucketId: BucketEntry[] = Object.entries(bucket).map(([key, value]) => ({ key, value }));
    return {
      bucketId,
      elapsedMs: durationMs(usage.time_elapsed),
      allowed: count(usage.num_requests_allowed),
      denied: count(usage.num_requests_denied),
    };
  });
  return { domain: wire.domain ?? '', usages };
}

/** Encode one response holding `actions`. */
export function encodeQuotaResponse(actions: readonly BucketAction[]): Uint8Array {
  const { response } = load();
  const wire = {
    bucket_action: actions.map((action) => {
      const bucket_id = {
        bucket: Object.fromEntries(action.bucketId.map((e) => [e.key, e.value])),
      };
      if (action.kind === 'abandon') return { bucket_id, abandon_action: {} };
      return {
        bucket_id,
        quota_assignment_action: {
          assignment_time_to_live: duration(action.ttlMs),
          rate_limit_strategy: strategyToWire(action.strategy),
        },
      };
    }),
  };
  return response.encode(response.fromObject(wire)).finish();
}

function strategyToWire(strategy: QuotaStrategy): object {
  switch (strategy.kind) {
    case 'allow_all':
      return { blanket_rule: 0 };
    case 'deny_all':
      return { blanket_rule: 1 };
    case 'token_bucket':
      return {
        token_bucket: {
          max_tokens: strategy.maxTokens,
          tokens_per_fill: { value: strategy.tokensPerFill },
          fill_interval: duration(strategy.fillIntervalMs),
        },
      };
  }
}

function duration(ms: number): { seconds: number; nanos: number } {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: Math.round((ms - seconds * 1000) * 1e6) };
}

function durationMs(d: WireDuration | undefined): number {
  if (d === undefined) return 0;
  const ms = (d.seconds ?? 0) * 1000 + (d.nanos ?? 0) / 1e6;
  return Number.isFinite(ms) && ms > 0 ? ms : 0;
}

/** A reported count as a safe, non-negative integer (uint64 may exceed 2^53). */
function count(value: number | undefined): number {
  if (value === undefined || !Number.isFinite(value) || value < 0) return 0;
  return Math.min(value, Number.MAX_SAFE_INTEGER);
}

/** The gRPC status each refusal of the quota service ends its stream with. */
export const REFUSAL_STATUS: Readonly<Record<QuotaRefusal, GrpcStatusCode>> = {
  invalid: GrpcStatus.INVALID_ARGUMENT,
  exhausted: GrpcStatus.RESOURCE_EXHAUSTED,
  idle: GrpcStatus.DEADLINE_EXCEEDED,
};
