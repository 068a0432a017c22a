/**
 * Builds the gRPC service port with the server `GRPC_SERVER` picks: the lean server on
 * `node:http2` (transport/h2, the default) or @grpc/grpc-js (transport/grpc). Both implement
 * {@link ServiceServer} (transport/rpc.ts).
 */
import type { Logger } from '../logging/logger.js';
import type { HealthSignal } from '../service/health.js';
import type { RateLimitService } from '../service/rate-limit-service.js';
import { createGrpcServer } from './grpc/server.js';
import { reflectionPackageDefinition } from './grpc/reflection.js';
import { createReflectionHandler } from './h2/reflection.js';
import { createLeanServer } from './h2/server.js';
import type { ServiceServer } from './rpc.js';
import type { ServerTls } from './tls.js';
import type { GrpcConnectionSettings, GrpcLimits, RequestBudget } from './limits.js';
import type { TransportMetricsSink } from '../metrics/metrics.js';

/** Which implementation serves the gRPC port. */
export type GrpcServerKind = 'lean' | 'grpc-js';

/** Options for {@link createServiceServer}. */
export interface ServiceServerOptions {
  /** The implementation. */
  readonly kind: GrpcServerKind;
  /** The service to expose. */
  readonly service: RateLimitService;
  /** Module logger. */
  readonly logger: Logger;
  /** Largest accepted request message, bytes (`GRPC_MAX_RECEIVE_MESSAGE_LENGTH`). */
  readonly maxReceiveMessageBytes: number;
  /**
   * The instance's health for grpc.health.v1.Health; `undefined`: SERVING from listen to close.
   */
  readonly health?: HealthSignal | undefined;
  /** TLS on the port (`GRPC_SERVER_USE_TLS`, docs/operations-tls.md); `undefined`: plaintext. */
  readonly tls?: ServerTls | undefined;
  /** Keepalive, idle and age limits (docs/grpc-server.md); `undefined`: the defaults. */
  readonly connections?: GrpcConnectionSettings | undefined;
  /** Hand each call's metadata to the service, for tracing (default false). */
  readonly traceHeaders?: boolean;
  /** Connections, streams, bytes and time clients may hold; `undefined`: the defaults. */
  readonly limits?: GrpcLimits | undefined;
  /** The process-wide budget of unfinished requests' bytes, shared with the HTTP server. */
  readonly budget?: RequestBudget | undefined;
  /** Where refusals are counted; `undefined`: nowhere. */
  readonly metrics?: TransportMetricsSink | undefined;
}

/** Create the server `options.kind` names (not yet listening). */
export function createServiceServer(options: ServiceServerOptions): ServiceServer {
  const { kind, service, logger, maxReceiveMessageBytes, health, tls, connections } = options;
  const traceHeaders = options.traceHeaders === true;
  const { limits, budget, metrics } = options;
  switch (kind) {
    case 'lean':
      return createLeanServer({
        service,
        logger,
        maxReceiveMessageBytes,
        health,
        reflection: createReflectionHandler(reflectionPackageDefinition()),
        tls,
        keepaliveTimeMs: connections?.keepaliveTimeMs,
        keepaliveTimeoutMs: connections?.keepaliveTimeoutMs,
        idleTimeoutMs: connections?.maxConnectionIdleMs,
        maxConnectionAgeMs: connections?.maxConnectionAgeMs,
        maxConnectionAgeGraceMs: connections?.maxConnectionAgeGraceMs,
        traceHeaders,
        limits,
        budget,
        metrics,
      });
    case 'grpc-js':
      return createGrpcServer({
        service,
        logger,
        maxReceiveMessageBytes,
        health,
        tls,
        connections,
        traceHeaders,
        limits,
        budget,
        metrics,
      });
  }
}
