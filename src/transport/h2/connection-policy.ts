/**
 * The lean server's connection policy: what a client connection may hold and how long it lives.
 * It creates the `node:http2` server (plaintext or TLS with ALPN `h2`, the concurrent-stream
 * setting, the connection bound) and, per connection, checks the client certificate's SAN
 * (`GRPC_CLIENT_TLS_SAN`), sends keepalive PINGs, and closes with a graceful GOAWAY at the
 * maximum age or idle time (docs/grpc-server.md, docs/operations-tls.md). Calls, streams and
 * their byte budgets are the assembly's (./assembly.ts).
 */
import http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '../../logging/logger.js';
import type { TransportMetricsSink } from '../../metrics/metrics.js';
import type { GrpcConnectionSettings, GrpcLimits } from '../limits.js';
import type { ServerTls } from '../tls.js';

/** Options for {@link createConnectionPolicy}. */
export interface ConnectionPolicyOptions {
  /** Module logger. */
  readonly logger: Logger;
  /**
   * Keepalive PINGs, idle and age limits, ms, 0 = never; `undefined`: the defaults (a PING after
   * 2 h unanswered for 20 s closes the connection; no idle limit, as envoyproxy/ratelimit; GOAWAY
   * after 24 h, then whatever is open is cancelled after 1 h, as the reference).
   */
  readonly connections: GrpcConnectionSettings | undefined;
  /**
   * Serve TLS (ALPN `h2`) with this material, applying each reload to new connections, asking
   * for client certificates when it has a client CA and closing connections whose certificate
   * lacks the required SAN (docs/operations-tls.md); `undefined` serves plaintext HTTP/2.
   */
  readonly tls: ServerTls | undefined;
  /** The connection and concurrent-stream bounds. */
  readonly limits: GrpcLimits;
  /** Where connections refused by the bound are counted. */
  readonly metrics: TransportMetricsSink;
}

/** The HTTP/2 server and what is done to each of its connections. */
export interface ConnectionPolicy {
  /** The server, not yet listening; the caller adds its 'session' and 'stream' listeners. */
  readonly server: http2.Http2Server | http2.Http2SecureServer;
  /**
   * Whether a new connection may stay: false when its client certificate lacks the required SAN,
   * in which case the connection is already closed (GOAWAY INADEQUATE_SECURITY).
   */
  admit(session: http2.ServerHttp2Session): boolean;
  /** Arm an admitted connection's keepalive, age and idle timers (cleared when it closes). */
  manage(session: http2.ServerHttp2Session): void;
  /**
   * Graceful GOAWAY in two steps: first one promising every stream (so requests already on the
   * wire are not refused), then after a PING round trip the real one naming the last stream
   * taken; streams open then run to completion.
   */
  goAway(session: http2.ServerHttp2Session): void;
  /** Stop applying TLS reloads (at close). */
  stop(): void;
}

const { NGHTTP2_NO_ERROR, NGHTTP2_INADEQUATE_SECURITY } = http2.constants;
/** How long the first GOAWAY's PING may go unanswered before the final GOAWAY, ms. */
const GOAWAY_PING_TIMEOUT_MS = 1_000;
/** Largest stream id: the first GOAWAY of a graceful close promises to take every stream. */
const MAX_STREAM_ID = 2 ** 31 - 1;
/**
 * A session's buffered memory cap, MB. Node's default is 10; a full window of large messages on
 * many streams can need more, and the receive limit already bounds each message.
 */
const MAX_SESSION_MEMORY_MB = 64;

/** Create the server and the policy its connections follow. */
export function createConnectionPolicy(options: ConnectionPolicyOptions): ConnectionPolicy {
  const { logger, tls, limits, metrics, connections } = options;
  const keepaliveTimeMs = connections?.keepaliveTimeMs ?? 2 * 3_600_000;
  const keepaliveTimeoutMs = connections?.keepaliveTimeoutMs ?? 20_000;
  const idleTimeoutMs = connections?.maxConnectionIdleMs ?? 0;
  const maxConnectionAgeMs = connections?.maxConnectionAgeMs ?? 24 * 3_600_000;
  const maxConnectionAgeGraceMs = connections?.maxConnectionAgeGraceMs ?? 3_600_000;

  const maxSessionMemory = MAX_SESSION_MEMORY_MB;
  const settings: http2.Settings = { maxConcurrentStreams: limits.maxConcurrentStreams };
  const server: http2.Http2Server | http2.Http2SecureServer =
    tls === undefined
      ? http2.createServer({ maxSessionMemory, settings })
      : http2.createSecureServer({
          ...tls.contextOptions(),
          // ALPN h2 only: a client that cannot speak HTTP/2 over TLS is refused.
          allowHTTP1: false,
          requestCert: tls.requireClientCertificate,
          rejectUnauthorized: tls.requireClientCertificate,
          maxSessionMemory,
          settings,
        });
  // Connections past the bound are closed at accept, before any TLS or HTTP/2 work.
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => metrics.refused('connections'));
  let stopTlsReload: (() => void) | undefined;
  /** Fingerprints of client certificates whose refusal (missing SAN) was logged. */
  const refusalsLogged = new Set<string>();
  if (tls !== undefined) {
    const secure = server as http2.Http2SecureServer;
    // New connections get the new context; open ones keep the one they shook hands with.
    stopTlsReload = tls.onChange(() => secure.setSecureContext(tls.contextOptions()));
    secure.on('tlsClientError', (err: Error) =>
      logger.debug({ err }, 'TLS handshake failed (e.g. no or untrusted client certificate)'),
    );
  }

  /**
   * `GRPC_CLIENT_TLS_SAN`: a client whose certificate lacks the SAN is closed before any stream
   * (GOAWAY INADEQUATE_SECURITY), as the reference fails its handshake.
   */
  function admit(session: http2.ServerHttp2Session): boolean {
    if (tls === undefined || tls.settings.clientSan === undefined) return true;
    const socket = session.socket as TLSSocket;
    const certificate = socket.getPeerX509Certificate();
    if (tls.clientAllowed(certificate)) return true;
    session.destroy(undefined, NGHTTP2_INADEQUATE_SECURITY);
    // Once per certificate: a client that keeps reconnecting must not flood the log.
    const fingerprint = certificate?.fingerprint256 ?? '';
    if (refusalsLogged.has(fingerprint)) return false;
    if (refusalsLogged.size >= 1_000) refusalsLogged.clear();
    refusalsLogged.add(fingerprint);
    logger.warn(
      {
        remoteAddress: socket.remoteAddress,
        subject: certificate?.subject,
        subjectAltName: certificate?.subjectAltName,
        requiredSan: tls.settings.clientSan,
      },
      'client certificate lacks the SAN GRPC_CLIENT_TLS_SAN requires; its connections are closed',
    );
    return false;
  }

  function manage(session: http2.ServerHttp2Session): void {
    const timers: NodeJS.Timeout[] = [];
    if (keepaliveTimeMs > 0) {
      const keepalive = setInterval(() => {
        if (session.closed || session.destroyed) return;
        const unanswered = setTimeout(() => {
          logger.debug('keepalive PING not answered in time; closing the connection');
          session.destroy();
        }, keepaliveTimeoutMs);
        unanswered.unref();
        const sent = session.ping(() => clearTimeout(unanswered));
        if (!sent) clearTimeout(unanswered);
      }, keepaliveTimeMs);
      keepalive.unref();
      timers.push(keepalive);
    }
    if (maxConnectionAgeMs > 0) {
      const age = setTimeout(() => {
        goAway(session);
        const grace = setTimeout(() => session.destroy(), maxConnectionAgeGraceMs);
        grace.unref();
        timers.push(grace);
      }, maxConnectionAgeMs);
      age.unref();
      timers.push(age);
    }
    if (idleTimeoutMs > 0) session.setTimeout(idleTimeoutMs, () => goAway(session));
    session.on('error', (err) => logger.debug({ err }, 'HTTP/2 connection error'));
    session.once('close', () => {
      for (const timer of timers) clearTimeout(timer);
    });
  }

  function goAway(session: http2.ServerHttp2Session): void {
    if (session.closed || session.destroyed) return;
    session.goaway(NGHTTP2_NO_ERROR, MAX_STREAM_ID);
    let sentFinal = false;
    const final = (): void => {
      if (sentFinal) return;
      sentFinal = true;
      clearTimeout(timer);
      if (!session.closed && !session.destroyed) session.close();
    };
    // Some clients (grpc-js after a GOAWAY) never answer the PING: do not wait for it forever.
    const timer = setTimeout(final, GOAWAY_PING_TIMEOUT_MS);
    timer.unref();
    if (!session.ping(final)) final();
  }

  return { server, admit, manage, goAway, stop: () => stopTlsReload?.() };
}
