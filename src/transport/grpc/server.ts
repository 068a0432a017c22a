/**
 * The gRPC server: RateLimitService, grpc.health.v1.Health and server reflection on one port.
 * Error-to-status mapping lives here and only here.
 */
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { HealthSignal } from '../../service/health.js';
import type { RateLimitService } from '../../service/rate-limit-service.js';
import { GRPC_STATUS_BY_CODE, toCallError } from '../status.js';
import { findInvalidUtf8, requestFromWire, responseToWire } from './mapping.js';
import { loadRlsPackage, rlsServiceDefinition, RLS_SERVICE_NAME } from './proto.js';
import { reflectionPackageDefinition } from './reflection.js';

/** gRPC status for each error code (defined once in transport/status.ts for both servers). */
export { GRPC_STATUS_BY_CODE };

/** Options for {@link createGrpcServer}. */
export interface GrpcServerOptions {
  /** The service to expose. */
  readonly service: RateLimitService;
  /** Module logger. */
  readonly logger: Logger;
  /** Largest accepted request message, bytes. */
  readonly maxReceiveMessageBytes: number;
  /**
   * The health `grpc.health.v1.Health` follows once listening (the same signal as HTTP
   * `/healthcheck`); `undefined`: SERVING from listen to close.
   */
  readonly health?: HealthSignal;
}

/** A gRPC server that can be started and stopped. */
export interface GrpcServer {
  /** Bind `host:port` (port 0 picks one) and start serving; resolves to the bound port. */
  listen(host: string, port: number): Promise<number>;
  /**
   * Stop accepting calls, let in-flight calls finish for up to `graceMs`, then cancel the rest.
   * Health turns NOT_SERVING first.
   */
  close(graceMs: number): Promise<void>;
}

/** Marks a request the decoder could not parse; the handler answers INVALID_ARGUMENT. */
class Malformed {
  constructor(readonly reason: string) {}
}

/** Create the server (not yet listening). */
export function createGrpcServer(options: GrpcServerOptions): GrpcServer {
  const { service, logger, maxReceiveMessageBytes } = options;
  const pkg = loadRlsPackage();
  const definition = rlsServiceDefinition(pkg);
  const method = definition.ShouldRateLimit!;

  // grpc-js answers INTERNAL when a deserializer throws; a malformed request is the caller's
  // fault, so decode failures are turned into a value and answered INVALID_ARGUMENT.
  const decode = method.requestDeserialize;
  const tolerant: grpc.ServiceDefinition = {
    ShouldRateLimit: {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          const decoded: unknown = decode(bytes);
          const invalid = findInvalidUtf8(bytes, decoded);
          // Proto3 strings must be UTF-8; the decoder would count replacement characters instead.
          return invalid === undefined
            ? decoded
            : new Malformed(`string field contains invalid UTF-8 (${invalid})`);
        } catch (err) {
          return new Malformed(err instanceof Error ? err.message : String(err));
        }
      },
    },
  };

  const server = new grpc.Server({
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
  });
  const health = new HealthImplementation({ '': 'NOT_SERVING', [RLS_SERVICE_NAME]: 'NOT_SERVING' });
  health.addToServer(server);
  let stopHealthWatch: (() => void) | undefined;
  // Complete descriptors (every file, its imports, health and reflection itself), so grpcurl and
  // similar tools list, describe and call every service with no .proto files at hand.
  new ReflectionService(reflectionPackageDefinition()).addToServer(server);

  server.addService(tolerant, {
    ShouldRateLimit(
      call: grpc.ServerUnaryCall<unknown, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ): void {
      const wire = call.request;
      if (wire instanceof Malformed) {
        callback({
          code: grpc.status.INVALID_ARGUMENT,
          details: `malformed RateLimitRequest: ${wire.reason}`,
        });
        return;
      }
      let request;
      try {
        request = requestFromWire(wire);
      } catch (err) {
        callback(toServiceError(err, logger));
        return;
      }
      service.shouldRateLimit(request).then(
        (response) => callback(null, responseToWire(response)),
        (err: unknown) => callback(toServiceError(err, logger)),
      );
    },
  });

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server.bindAsync(
          formatAddress(host, port),
          grpc.ServerCredentials.createInsecure(),
          (err, boundPort) => {
            if (err) {
              reject(
                new SluiceError(
                  'INVALID_SETTINGS',
                  `cannot listen on ${host}:${port} (set GRPC_HOST/GRPC_PORT or --grpc-host/--grpc-port): ${err.message}`,
                  {
                    cause: err,
                  },
                ),
              );
              return;
            }
            const setServing = (ok: boolean): void => {
              const status = ok ? 'SERVING' : 'NOT_SERVING';
              health.setStatus('', status);
              health.setStatus(RLS_SERVICE_NAME, status);
            };
            if (options.health === undefined) setServing(true);
            else stopHealthWatch ??= options.health.watch(setServing);
            resolve(boundPort);
          },
        );
      });
    },
    close(graceMs) {
      stopHealthWatch?.();
      health.setStatus('', 'NOT_SERVING');
      health.setStatus(RLS_SERVICE_NAME, 'NOT_SERVING');
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          logger.warn({ graceMs }, 'in-flight calls did not finish in time; cancelling them');
          server.forceShutdown();
          resolve();
        }, graceMs);
        timer.unref();
        server.tryShutdown(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    },
  };
}

/** `host:port`, bracketing IPv6 literals. */
function formatAddress(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Failures become gRPC statuses in transport/status.ts, shared with the lean server. */
function toServiceError(err: unknown, logger: Logger): Partial<grpc.StatusObject> {
  return toCallError(err, logger);
}
