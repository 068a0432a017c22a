/**
 * What the gRPC port serves, by name, and the interface both of its servers implement (the lean
 * one in transport/h2, the @grpc/grpc-js one in transport/grpc; `GRPC_SERVER` picks one). This
 * module imports nothing, so the lean server names its methods without loading @grpc/grpc-js or
 * @grpc/proto-loader (transport/grpc/proto.ts).
 */

/** Fully-qualified RateLimitService name, as Envoy calls it. */
export const RLS_SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';

/** Fully-qualified name of the standard gRPC health service. */
const HEALTH_SERVICE_NAME = 'grpc.health.v1.Health';

/**
 * The HTTP/2 `:path` of each method the port serves besides server reflection (whose paths come
 * from its own descriptors, transport/h2/reflection.ts).
 */
export const METHOD_PATHS = {
  /** RateLimitService/ShouldRateLimit: unary, the hot path. */
  shouldRateLimit: `/${RLS_SERVICE_NAME}/ShouldRateLimit`,
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
