/**
 * Bounds on what clients can make the transports hold (docs/operations.md, "Limits and what each
 * protects against"): connections, streams per connection, bytes held by unfinished requests per
 * connection and in total, and the time a request may take to arrive. Shared by the lean server,
 * the grpc-js server and the HTTP server; each refusal is counted by reason.
 */

import type { TransportMetricsSink } from '../metrics/metrics.js';

/** A sink that counts nothing (for servers built without metrics, as in unit tests). */
export const NO_TRANSPORT_METRICS: TransportMetricsSink = { refused() {} };

/**
 * Bytes held by unfinished requests of every port together (`MAX_REQUEST_BUFFER_BYTES`): what
 * has arrived of a message or body not yet complete, plus {@link STREAM_OVERHEAD_BYTES} per open
 * gRPC request. One instance per process, shared by the gRPC and HTTP servers.
 */
export interface RequestBudget {
  /** The bound, bytes. */
  readonly limitBytes: number;
  /** Bytes held now. */
  readonly heldBytes: number;
  /** Hold `bytes` more; false (and nothing held) when that would pass the bound. */
  take(bytes: number): boolean;
  /** Give back `bytes` taken before. */
  release(bytes: number): void;
}

/** A {@link RequestBudget} of `limitBytes`. */
export function createRequestBudget(limitBytes: number): RequestBudget {
  let held = 0;
  return {
    limitBytes,
    get heldBytes() {
      return held;
    },
    take(bytes) {
      if (held + bytes > limitBytes) return false;
      held += bytes;
      return true;
    },
    release(bytes) {
      held -= bytes;
    },
  };
}

/**
 * What an open gRPC request is counted as holding before any of its message arrives: an
 * estimate of Node's per-stream state (headers, stream objects, nghttp2's stream), bytes. With
 * it, streams that send headers and nothing more are bounded by the same budgets as bodies.
 */
export const STREAM_OVERHEAD_BYTES = 4096;

/** The longest delay Node's timers hold (2^31 - 1 ms, about 24.8 days); longer ones fire at once. */
export const MAX_TIMER_MS = 2_147_483_647;

/** Limits of the gRPC port beyond the connection ages (both servers). */
export interface GrpcLimits {
  /** `GRPC_MAX_CONNECTIONS`: open connections; more are closed at accept. */
  readonly maxConnections: number;
  /** `GRPC_MAX_CONCURRENT_STREAMS`: SETTINGS_MAX_CONCURRENT_STREAMS of every connection. */
  readonly maxConcurrentStreams: number;
  /** `GRPC_MAX_CONNECTION_BUFFER_BYTES`: bytes one connection's unfinished requests may hold. */
  readonly maxConnectionBufferBytes: number;
  /** `GRPC_REQUEST_TIMEOUT`: time from a request's headers to its end, ms (0 = no bound). */
  readonly requestTimeoutMs: number;
}

/** Generous defaults (an Envoy fleet stays far inside them); settings.ts documents each. */
export const DEFAULT_GRPC_LIMITS: GrpcLimits = {
  maxConnections: 10_000,
  maxConcurrentStreams: 4096,
  maxConnectionBufferBytes: 64 * 1_048_576,
  requestTimeoutMs: 30_000,
};

/** Default of `MAX_REQUEST_BUFFER_BYTES`. */
export const DEFAULT_REQUEST_BUFFER_BYTES = 256 * 1_048_576;

/**
 * How often unfinished requests are checked against `timeoutMs`, ms: a quarter of it, between
 * 10 ms and 1 s, so a request is cut at most a quarter late and the check costs nothing idle.
 */
export function sweepIntervalMs(timeoutMs: number): number {
  return Math.min(1_000, Math.max(10, Math.floor(timeoutMs / 4)));
}

/**
 * Connection limits of the gRPC port, in ms, 0 = never. `GRPC_MAX_CONNECTION_AGE` and
 * `GRPC_MAX_CONNECTION_AGE_GRACE` are the reference's (same defaults); the keepalive and idle
 * ones are sluice's, named after grpc-go's server keepalive parameters.
 */
export interface GrpcConnectionSettings {
  /** `GRPC_MAX_CONNECTION_AGE` (default `24h`): GOAWAY a connection this long after it opened. */
  readonly maxConnectionAgeMs: number;
  /** `GRPC_MAX_CONNECTION_AGE_GRACE` (default `1h`): then cancel its calls after this. */
  readonly maxConnectionAgeGraceMs: number;
  /** `GRPC_KEEPALIVE_TIME` (default `2h`): PING a connection silent this long. */
  readonly keepaliveTimeMs: number;
  /** `GRPC_KEEPALIVE_TIMEOUT` (default `20s`): close it when the PING is not answered in this. */
  readonly keepaliveTimeoutMs: number;
  /** `GRPC_MAX_CONNECTION_IDLE` (default `0`, never): GOAWAY a connection idle this long. */
  readonly maxConnectionIdleMs: number;
}
