/**
 * The lean gRPC server (`GRPC_SERVER=lean`, the default): gRPC over HTTP/2 written directly on
 * `node:http2`, serving RateLimitService/ShouldRateLimit, grpc.health.v1.Health (Check and Watch)
 * and server reflection on one port. It speaks exactly these methods, with the hand-written codec
 * of ./codec.ts, so a call costs one decode, the service call and one encode.
 *
 * This module is the shell: it listens, keeps the sessions, wires the connection policy
 * (./connection-policy.ts: connection bound, TLS, keepalive, age and idle, the two-step GOAWAY,
 * the client SAN check), checks each stream's method and content type, and closes with a grace
 * period. The rest is in parts:
 * - ./methods.ts: the method table by `:path` (as grpc-js registers handlers) and its handlers,
 *   so serving another RPC is one more entry; a path not in the table is answered UNIMPLEMENTED;
 * - ./assembly.ts: each call from DATA to messages: the 5-byte prefix, the receive size limit
 *   (RESOURCE_EXHAUSTED, checked from the prefix before the message is read), `grpc-encoding`
 *   identity, gzip and deflate, the byte budgets of unfinished requests, `grpc-timeout` and
 *   `GRPC_REQUEST_TIMEOUT`;
 * - ./answers.ts: statuses in trailers, or in a Trailers-Only response for failures;
 * - ./call.ts: the call record all of them share.
 */
import http2 from 'node:http2';
import { GRPC_ADDRESS_SETTINGS, listenOn } from '../listen.js';
import {
  DEFAULT_GRPC_LIMITS,
  DEFAULT_REQUEST_BUFFER_BYTES,
  NO_TRANSPORT_METRICS,
  createRequestBudget,
} from '../limits.js';
import type { ServiceServer, ServiceServerOptions } from '../rpc.js';
import { GrpcStatus } from '../status.js';
import { RESPOND_AND_END, trailersOnly } from './answers.js';
import { CallAssembler } from './assembly.js';
import { CONNECTION, type ConnectionSession } from './call.js';
import { createConnectionPolicy } from './connection-policy.js';
import { createMethodTable, type ReflectionHandler } from './methods.js';

/** Options for {@link createLeanServer}: those of either gRPC server, and reflection. */
export interface LeanServerOptions extends ServiceServerOptions {
  /** Server reflection; `undefined` answers UNIMPLEMENTED for the reflection methods. */
  readonly reflection?: ReflectionHandler | undefined;
}

const { NGHTTP2_CANCEL } = http2.constants;

/** Create the lean server (not yet listening). */
export function createLeanServer(options: LeanServerOptions): ServiceServer {
  const { logger, health } = options;
  const limits = options.limits ?? DEFAULT_GRPC_LIMITS;
  const metrics = options.metrics ?? NO_TRANSPORT_METRICS;

  let listening = false;
  let closing = false;
  const sessions = new Set<http2.ServerHttp2Session>();

  const assembler = new CallAssembler({
    maxReceiveMessageBytes: options.maxReceiveMessageBytes,
    limits,
    budget: options.budget ?? createRequestBudget(DEFAULT_REQUEST_BUFFER_BYTES),
    metrics,
    logger,
    traceHeaders: options.traceHeaders === true,
  });
  const methods = createMethodTable({
    service: options.service,
    logger,
    health,
    reflection: options.reflection,
    quota: options.quota,
    serving: () => listening && !closing && (health?.serving() ?? true),
    closing: () => closing,
  });
  const policy = createConnectionPolicy({
    logger,
    connections: options.connections,
    tls: options.tls,
    limits,
    metrics,
  });
  const server = policy.server;
  server.on('session', onSession);
  server.on('stream', onStream);
  // Errors of one connection or stream concern that peer only; the server keeps serving.
  server.on('sessionError', (err: Error) => logger.debug({ err }, 'HTTP/2 session error'));

  function onSession(session: http2.ServerHttp2Session): void {
    if (!policy.admit(session)) return;
    (session as ConnectionSession)[CONNECTION] = { held: 0 };
    sessions.add(session);
    if (closing) policy.goAway(session);
    policy.manage(session);
    session.once('close', () => sessions.delete(session));
  }

  function onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', ignoreStreamError);
    if (headers[':method'] !== 'POST') {
      stream.respond({ ':status': 405, allow: 'POST' }, RESPOND_AND_END);
      stream.resume();
      return;
    }
    const contentType = headers['content-type'];
    if (typeof contentType !== 'string' || !isGrpcContentType(contentType)) {
      stream.respond({ ':status': 415 }, RESPOND_AND_END);
      stream.resume();
      return;
    }
    const path = headers[':path'] ?? '';
    const method = methods.byPath.get(path);
    if (method === undefined) {
      trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${path}`);
      return;
    }
    assembler.open(stream, headers, path, method);
  }

  return {
    listen(host, port) {
      return listenOn(server, host, port, GRPC_ADDRESS_SETTINGS).then((bound) => {
        server.on('error', (err) => logger.error({ err }, 'gRPC server error'));
        listening = true;
        assembler.start();
        methods.recheckWatches();
        return bound;
      });
    },
    close(graceMs) {
      closing = true;
      policy.stop();
      assembler.stop();
      methods.recheckWatches();
      return new Promise<void>((resolve) => {
        if (!listening) {
          resolve();
          return;
        }
        let finished = false;
        const timer = setTimeout(() => {
          if (sessions.size > 0) {
            logger.warn({ graceMs }, 'in-flight calls did not finish in time; cancelling them');
          }
          for (const session of sessions) session.destroy(undefined, NGHTTP2_CANCEL);
        }, graceMs);
        timer.unref();
        server.close(() => {
          if (finished) return;
          finished = true;
          clearTimeout(timer);
          listening = false;
          resolve();
        });
        for (const session of sessions) policy.goAway(session);
      });
    },
  };
}

function isGrpcContentType(value: string): boolean {
  if (!value.startsWith('application/grpc')) return false;
  const rest = value.slice(16);
  return rest === '' || rest === '+proto' || rest.startsWith(';') || rest.startsWith('+proto;');
}

function ignoreStreamError(): void {
  // A peer's reset or a broken connection ends the call; nothing to answer any more.
}
