/**
 * The transport limits (transport/limits.ts) on the grpc-js server. grpc-js has options for
 * streams per connection and message size only, so the rest is applied on the `node:http2`
 * servers it listens with, ahead of its own listeners: connections past `GRPC_MAX_CONNECTIONS`
 * are closed at accept; a stream whose unfinished request passes a byte budget, or does not end
 * within `GRPC_REQUEST_TIMEOUT`, is reset (RST_STREAM ENHANCE_YOUR_CALM, which gRPC clients
 * report as RESOURCE_EXHAUSTED; CANCEL for the timeout); a `grpc-timeout` longer than a Node
 * timer holds is shortened to the longest one before grpc-js reads it (grpc-js would otherwise
 * fail the call at once).
 */
import http2 from 'node:http2';
import type { Logger } from '../../logging/logger.js';
import { parseGrpcTimeout } from '../h2/framing.js';
import { METHOD_PATHS } from '../rpc.js';
import {
  MAX_TIMER_MS,
  STREAM_OVERHEAD_BYTES,
  sweepIntervalMs,
  type GrpcLimits,
  type RequestBudget,
} from '../limits.js';
import type { RefusalReason, TransportMetricsSink } from '../../metrics/metrics.js';

/** `grpc-timeout` for the longest delay a Node timer holds (at most 8 digits, as the spec says). */
const MAX_GRPC_TIMEOUT = `${Math.floor(MAX_TIMER_MS / 1000)}S`;

const { NGHTTP2_ENHANCE_YOUR_CALM, NGHTTP2_CANCEL } = http2.constants;

/** Options for {@link createGuard}. */
export interface GuardOptions {
  readonly limits: GrpcLimits;
  readonly budget: RequestBudget;
  readonly metrics: TransportMetricsSink;
  readonly logger: Logger;
}

/** Applies the limits to the http2 servers it is given; `close` stops its sweep. */
export interface Guard {
  /** Apply the limits to `server` (once per server; later calls do nothing). */
  protect(server: http2.Http2Server | http2.Http2SecureServer): void;
  /** Stop the request-timeout sweep. */
  close(): void;
}

/** What one connection's unfinished requests hold. */
interface Connection {
  held: number;
}

/** One request not yet ended. */
interface Pending {
  readonly stream: http2.ServerHttp2Stream;
  readonly connection: Connection;
  readonly startedMs: number;
  held: number;
}

const CONNECTION = Symbol('sluice.connection');
type ConnectionSession = http2.ServerHttp2Session & { [CONNECTION]?: Connection };

/** Create a guard (its sweep starts with the first protected server). */
export function createGuard(options: GuardOptions): Guard {
  const { limits, budget, metrics, logger } = options;
  const { maxConnectionBufferBytes, requestTimeoutMs } = limits;
  const protectedServers = new WeakSet<object>();
  const unfinished = new Set<Pending>();
  let coarseNowMs = performance.now();
  let sweepTimer: NodeJS.Timeout | undefined;

  function release(pending: Pending): void {
    if (!unfinished.delete(pending)) return;
    pending.connection.held -= pending.held;
    budget.release(pending.held);
    pending.held = 0;
  }

  function refuse(pending: Pending, reason: RefusalReason, code: number): void {
    release(pending);
    metrics.refused(reason);
    logger.debug({ reason }, 'gRPC request refused by a limit');
    if (!pending.stream.destroyed && !pending.stream.closed) pending.stream.close(code);
  }

  /** Count `bytes` more; false after refusing the stream when a budget would be passed. */
  function hold(pending: Pending, bytes: number): boolean {
    if (pending.connection.held + bytes > maxConnectionBufferBytes) {
      refuse(pending, 'connection_buffer', NGHTTP2_ENHANCE_YOUR_CALM);
      return false;
    }
    if (!budget.take(bytes)) {
      refuse(pending, 'total_buffer', NGHTTP2_ENHANCE_YOUR_CALM);
      return false;
    }
    pending.connection.held += bytes;
    pending.held += bytes;
    return true;
  }

  function sweep(): void {
    coarseNowMs = performance.now();
    for (const pending of unfinished) {
      const stream = pending.stream;
      if (stream.destroyed || stream.closed) release(pending);
      else if (requestTimeoutMs > 0 && coarseNowMs - pending.startedMs >= requestTimeoutMs) {
        refuse(pending, 'request_timeout', NGHTTP2_CANCEL);
      }
    }
  }

  function onSession(session: http2.ServerHttp2Session): void {
    (session as ConnectionSession)[CONNECTION] = { held: 0 };
  }

  function onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const timeout = headers['grpc-timeout'];
    if (timeout !== undefined) {
      const ms = parseGrpcTimeout(timeout);
      if (ms !== undefined && ms > MAX_TIMER_MS) headers['grpc-timeout'] = MAX_GRPC_TIMEOUT;
    }
    // An RLQS stream's request never ends by design: its messages are bounded by the receive
    // limit one by one, and the quota service bounds what the stream holds (docs/rlqs.md).
    if (headers[':path'] === METHOD_PATHS.streamRateLimitQuotas) return;
    const session = stream.session as ConnectionSession;
    let connection = session[CONNECTION];
    if (connection === undefined) connection = session[CONNECTION] = { held: 0 };
    const pending: Pending = { stream, connection, startedMs: coarseNowMs, held: 0 };
    unfinished.add(pending);
    if (!hold(pending, STREAM_OVERHEAD_BYTES)) return;
    const onData = (chunk: Buffer): void => {
      if (unfinished.has(pending)) hold(pending, chunk.length);
    };
    const done = (): void => {
      stream.removeListener('data', onData);
      release(pending);
    };
    stream.on('data', onData);
    stream.once('end', done);
    stream.once('close', done);
  }

  return {
    protect(server) {
      if (protectedServers.has(server)) return;
      protectedServers.add(server);
      server.maxConnections = limits.maxConnections;
      server.on('drop', () => metrics.refused('connections'));
      server.prependListener('session', onSession);
      server.prependListener('stream', onStream);
      if (sweepTimer === undefined) {
        sweepTimer = setInterval(
          sweep,
          requestTimeoutMs > 0 ? sweepIntervalMs(requestTimeoutMs) : 1_000,
        );
        sweepTimer.unref();
      }
    },
    close() {
      if (sweepTimer !== undefined) clearInterval(sweepTimer);
      sweepTimer = undefined;
    },
  };
}
