/**
 * Builds the gRPC service port with the server `GRPC_SERVER` picks: the lean server on
 * `node:http2` (transport/h2, the default) or @grpc/grpc-js (transport/grpc). Both implement
 * {@link ServiceServer} (transport/rpc.ts).
 */
import { createGrpcServer } from './grpc/server.js';
import { reflectionPackageDefinition } from './grpc/reflection.js';
import { createReflectionHandler } from './h2/reflection.js';
import { createLeanServer } from './h2/server.js';
import type { ServiceServer, ServiceServerOptions } from './rpc.js';

/** Which implementation serves the gRPC port. */
export type GrpcServerKind = 'lean' | 'grpc-js';

/** Options for {@link createServiceServer}: those of either server, and which one. */
export interface ServiceServerChoice extends ServiceServerOptions {
  /** The implementation. */
  readonly kind: GrpcServerKind;
}

/** Create the server `options.kind` names (not yet listening). */
export function createServiceServer(options: ServiceServerChoice): ServiceServer {
  const { kind, ...shared } = options;
  switch (kind) {
    case 'lean':
      return createLeanServer({
        ...shared,
        reflection: createReflectionHandler(reflectionPackageDefinition()),
      });
    case 'grpc-js':
      return createGrpcServer(shared);
  }
}
