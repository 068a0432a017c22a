/**
 * What the gRPC port serves, by name, and the interface and options both of its servers share
 * (the lean one in transport/h2, the @grpc/grpc-js one in transport/grpc; `GRPC_SERVER` picks
 * one). This module imports nothing at run time (types only), so the lean server names its
 * methods without loading @grpc/grpc-js or @grpc/proto-loader (transport/grpc/proto.ts).
 */
import type { Logger } from '../logging/logger.js';
import type { TransportMetricsSink } from '../metrics/metrics.js';
import type { QuotaService } from '../rlqs/quota-service.js';
import type { HealthSignal } from '../service/health.js';
import type { RateLimitService } from '../service/rate-limit-service.js';
import type { GrpcConnectionSettings, GrpcLimits, RequestBudget } from './limits.js';
import type { ServerTls } from './tls.js';

/** Fully-qualified RateLimitService name, as Envoy calls it. */
export const RLS_SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';

/** Fully-qualified name of Envoy's Rate Limit Quota Service (docs/rlqs.md). */
export const RLQS_SERVICE_NAME = 'envoy.service.rate_limit_quota.v3.RateLimitQuotaService';

/** Fully-qualified name of the standard gRPC health service. */
const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

/**
 * The HTTP/2 `:path` of each method the port serves besides server reflection (whose paths come
 * from its own descriptors, transport/h2/reflection.ts).
 */
export const METHOD_PATHS = {
  /** RateLimitService/ShouldRateLimit: unary, the hot path. */
  shouldRateLimit: `/${RLS_SERVICE_NAME}/ShouldRateLimit`,
  /** RateLimitQuotaService/StreamRateLimitQuotas: bidirectional, long-lived (docs/rlqs.md). */
  streamRateLimitQuotas: `/${RLQS_SERVICE_NAME}/StreamRateLimitQuotas`,
  /** grpc.health.v1.Health/Check: unary. */
  healthCheck: `/${HEALTH_SERVICE_NAME}/Check`,
  /** grpc.health.v1.Health/Watch: server streaming. */
  healthWatch: `/${HEALTH_SERVICE_NAME}/Watch`,
} as const;

/** The gRPC service port (RateLimitService, health and reflection), whichever server serves it. */
export interface ServiceServer {
  /** Bind `host:port` (port 0 picks one) and start serving; resolves to the bound port. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stop accepting calls: health turns NOT_SERVING (Watch streams end), connections get GOAWAY,
   * calls in flight may finish for up to `graceMs`, then the rest are cancelled.
   */
  close(graceMs: number): Promise<void>;
}

/** Options of either gRPC server (`createServiceServer`, `createLeanServer`, `createGrpcServer`). */
export interface ServiceServerOptions {
  /** The service to expose. */
  readonly service: RateLimitService;
  /** Module logger. */
  readonly logger: Logger;
  /**
   * Largest accepted request message, bytes (`GRPC_MAX_RECEIVE_MESSAGE_LENGTH`); a compressed
   * message counts by its decompressed size.
   */
  readonly maxReceiveMessageBytes: number;
  /**
   * The instance's health (config loaded, store healthy, not draining), which
   * grpc.health.v1.Health follows once listening, as HTTP `/healthcheck` does; `undefined`:
   * SERVING from listen to close.
   */
  readonly health?: HealthSignal | undefined;
  /**
   * Serve TLS with this material, applying each reload to new connections; with a client CA,
   * clients must present a certificate it verifies, and a client whose certificate lacks the
   * `GRPC_CLIENT_TLS_SAN` is refused (docs/operations-tls.md). `undefined` serves plaintext.
   */
  readonly tls?: ServerTls | undefined;
  /** Keepalive, idle and age limits (docs/grpc-server.md); `undefined`: each server's defaults. */
  readonly connections?: GrpcConnectionSettings | undefined;
  /** Hand each call's metadata to the service (tracing reads the caller's trace from it). */
  readonly traceHeaders?: boolean;
  /** Connections, streams, bytes and time a client may hold; `undefined`: the defaults. */
  readonly limits?: GrpcLimits | undefined;
  /**
   * The process-wide budget of bytes unfinished requests hold (`MAX_REQUEST_BUFFER_BYTES`),
   * shared with the HTTP server; `undefined`: one of the server's own with the default bound.
   */
  readonly budget?: RequestBudget | undefined;
  /**
   * The Rate Limit Quota Service the port serves (docs/rlqs.md); `undefined`: its method is
   * answered UNIMPLEMENTED.
   */
  readonly quota?: QuotaService | undefined;
  /** Where refusals are counted; `undefined`: nowhere. */
  readonly metrics?: TransportMetricsSink | undefined;
}
