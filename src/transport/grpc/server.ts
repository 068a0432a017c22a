/**
 * The @grpc/grpc-js server (`GRPC_SERVER=grpc-js`): RateLimitService, grpc.health.v1.Health
 * (grpc-health-check) and server reflection (@grpc/reflection) on one port, with the port limits
 * applied by ./guard.ts. Failures become gRPC statuses in transport/status.ts, the one place
 * shared with the lean server (transport/h2).
 */
import { X509Certificate } from 'node:crypto';
import type http2 from 'node:http2';
import type { PeerCertificate, SecureContextOptions } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { ReflectionService } from '@grpc/reflection';
import { HealthImplementation } from 'grpc-health-check';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import { GRPC_STATUS_BY_CODE, toCallError, unmarshalErrorText } from '../status.js';
import type { ServerTls } from '../tls.js';
import {
  DEFAULT_GRPC_LIMITS,
  DEFAULT_REQUEST_BUFFER_BYTES,
  NO_TRANSPORT_METRICS,
  createRequestBudget,
  type GrpcConnectionSettings,
} from '../limits.js';
import { createGuard } from './guard.js';
import { findInvalidUtf8, requestFromWire, responseToWire } from './mapping.js';
import { loadRlsPackage, rlsServiceDefinition } from './proto.js';
import { RLS_SERVICE_NAME, type ServiceServer, type ServiceServerOptions } from '../rpc.js';
import { GRPC_ADDRESS_SETTINGS, listenFailure } from '../listen.js';
import { reflectionPackageDefinition } from './reflection.js';
import { addRlqsService } from './rlqs.js';

/**
 * grpc-js channel options for `connections`; a limit of 0 (never) is left out, since grpc-js
 * reads 0 as "at once" for some of them.
 */
export function connectionOptions(
  connections: GrpcConnectionSettings | undefined,
): grpc.ServerOptions {
  if (connections === undefined) return {};
  const options: grpc.ServerOptions = {};
  const put = (name: string, ms: number): void => {
    if (ms > 0) options[name] = ms;
  };
  put('grpc.max_connection_age_ms', connections.maxConnectionAgeMs);
  put('grpc.max_connection_age_grace_ms', connections.maxConnectionAgeGraceMs);
  put('grpc.keepalive_time_ms', connections.keepaliveTimeMs);
  put('grpc.keepalive_timeout_ms', connections.keepaliveTimeoutMs);
  put('grpc.max_connection_idle_ms', connections.maxConnectionIdleMs);
  return options;
}

/** Create the server (not yet listening). */
export function createGrpcServer(options: ServiceServerOptions): ServiceServer {
  const { service, logger, maxReceiveMessageBytes } = options;
  const traceHeaders = options.traceHeaders === true;
  const pkg = loadRlsPackage();
  const definition = rlsServiceDefinition(pkg);
  const method = definition.ShouldRateLimit!;

  // grpc-js answers INTERNAL when a deserializer throws; a malformed request is the caller's
  // fault, so a decode failure is returned (not thrown) as a SluiceError the handler answers
  // (INVALID_ARGUMENT, with the reference's text).
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
            : new SluiceError('INVALID_UTF8', unmarshalErrorText(true));
        } catch {
          return new SluiceError('MALFORMED_MESSAGE', unmarshalErrorText(false));
        }
      },
    },
  };

  const limits = options.limits ?? DEFAULT_GRPC_LIMITS;
  const server = new grpc.Server({
    ...connectionOptions(options.connections),
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
  });
  const guard = createGuard({
    limits,
    budget: options.budget ?? createRequestBudget(DEFAULT_REQUEST_BUFFER_BYTES),
    metrics: options.metrics ?? NO_TRANSPORT_METRICS,
    logger,
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
      if (wire instanceof SluiceError) {
        callback({ code: GRPC_STATUS_BY_CODE[wire.code], details: wire.message });
        return;
      }
      let request;
      try {
        request = requestFromWire(wire);
      } catch (err) {
        callback(toServiceError(err, logger));
        return;
      }
      service.shouldRateLimit(request, traceHeaders ? call.metadata.getMap() : undefined).then(
        (response) => callback(null, responseToWire(response)),
        (err: unknown) => callback(toServiceError(err, logger)),
      );
    },
  });

  const rlqs =
    options.quota === undefined ? undefined : addRlqsService(server, options.quota, logger);

  const credentials =
    options.tls === undefined
      ? { value: grpc.ServerCredentials.createInsecure(), close: () => undefined }
      : tlsCredentials(options.tls, logger);

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        server.bindAsync(formatAddress(host, port), credentials.value, (err, boundPort) => {
          if (err) {
            reject(listenFailure(host, port, err, GRPC_ADDRESS_SETTINGS));
            return;
          }
          try {
            for (const http2Server of http2ServersOf(server)) guard.protect(http2Server);
          } catch (error) {
            server.forceShutdown();
            reject(error instanceof Error ? error : new Error(String(error)));
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
        });
      });
    },
    close(graceMs) {
      guard.close();
      rlqs?.endAll();
      credentials.close();
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

/**
 * Server credentials whose secure context follows the TLS files: grpc-js re-applies
 * `updateSecureContextOptions` to its listening servers (`setSecureContext`, so new connections
 * get it). `ServerCredentials.createSsl` is fixed at creation, and the experimental certificate
 * provider credentials of grpc-js 1.14 swap their two provider arguments, hence this subclass of
 * the public abstract class.
 */
class ReloadableServerCredentials extends grpc.ServerCredentials {
  constructor(tls: ServerTls) {
    super(
      {
        requestCert: tls.requireClientCertificate,
        rejectUnauthorized: tls.requireClientCertificate,
      },
      tls.contextOptions(),
    );
  }

  /** Hand new context options to every server bound with these credentials. */
  update(options: SecureContextOptions): void {
    this.updateSecureContextOptions(options);
  }

  override _equals(other: grpc.ServerCredentials): boolean {
    return other === this;
  }
}

/**
 * TLS credentials for `bindAsync`, plus the SAN check: grpc-js gives no hook on a connection, so
 * `GRPC_CLIENT_TLS_SAN` is enforced on every call by an interceptor bound with the credentials
 * (UNAUTHENTICATED before the handler runs; the lean server closes the connection instead).
 */
function tlsCredentials(
  tls: ServerTls,
  logger: Logger,
): { value: grpc.ServerCredentials; close: () => void } {
  const reloadable = new ReloadableServerCredentials(tls);
  const stop = tls.onChange(() => reloadable.update(tls.contextOptions()));
  const san = tls.settings.clientSan;
  if (san === undefined) return { value: reloadable, close: stop };
  /** Verdicts per certificate fingerprint, so a connection's calls parse its certificate once. */
  const verdicts = new Map<string, boolean>();
  const allowed = (peer: PeerCertificate | undefined): boolean => {
    if (peer?.raw === undefined) return false;
    const known = verdicts.get(peer.fingerprint256);
    if (known !== undefined) return known;
    const verdict = tls.clientAllowed(new X509Certificate(peer.raw));
    if (verdicts.size >= 1_000) verdicts.clear();
    verdicts.set(peer.fingerprint256, verdict);
    if (!verdict) {
      logger.warn(
        { subject: peer.subject, subjectAltName: peer.subjectaltname, requiredSan: san },
        'client certificate lacks the SAN GRPC_CLIENT_TLS_SAN requires; its calls are refused',
      );
    }
    return verdict;
  };
  const interceptor: grpc.ServerInterceptor = (_method, call) =>
    new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({
          onReceiveMetadata(metadata, nextMetadata) {
            if (allowed(call.getAuthContext().sslPeerCertificate)) {
              nextMetadata(metadata);
            } else {
              call.sendStatus({
                code: grpc.status.UNAUTHENTICATED,
                details: `client certificate lacks the required SAN ${san}`,
              });
            }
          },
        });
      },
    });
  return {
    value: grpc.experimental.createServerCredentialsWithInterceptors(reloadable, [interceptor]),
    close: stop,
  };
}

/** `host:port`, bracketing IPv6 literals. */
function formatAddress(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}

/**
 * The `node:http2` servers grpc-js listens with. grpc-js keeps them in a private field; the
 * limits cannot be applied without them, so a grpc-js that no longer has it fails the start
 * (and the transport tests) rather than serving unguarded.
 */
function http2ServersOf(server: grpc.Server): (http2.Http2Server | http2.Http2SecureServer)[] {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map) || servers.size === 0) {
    throw new SluiceError(
      'INTERNAL',
      'cannot apply the gRPC port limits: this @grpc/grpc-js keeps its HTTP/2 servers elsewhere (use GRPC_SERVER=lean)',
    );
  }
  return [...(servers.keys() as IterableIterator<http2.Http2Server | http2.Http2SecureServer>)];
}

/** Failures become gRPC statuses in transport/status.ts, shared with the lean server. */
function toServiceError(err: unknown, logger: Logger): Partial<grpc.StatusObject> {
  return toCallError(err, logger);
}
