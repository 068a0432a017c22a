/**
 * The gRPC port's settings (`GRPC_SERVER`, `GRPC_SERVER_TLS_*` and `GRPC_CLIENT_TLS_*`, keepalive
 * and connection age, the transport's limits and byte budgets): read by `loadSettings`
 * (settings.ts), which reports every problem at once.
 */
import type { Reader } from './settings-reader.js';
import {
  DEFAULT_GRPC_LIMITS,
  DEFAULT_REQUEST_BUFFER_BYTES,
  type GrpcConnectionSettings,
  type GrpcLimits,
} from './transport/limits.js';
import type { GrpcTlsSettings } from './transport/tls.js';

/** `GRPC_SERVER`: `lean` (default) or `grpc-js`, case-insensitive. */
export function grpcServerKind(r: Reader): 'lean' | 'grpc-js' {
  const text = r.string('GRPC_SERVER', 'lean').toLowerCase();
  if (text === 'lean' || text === 'grpc-js') return text;
  r.problems.push(`GRPC_SERVER=${JSON.stringify(text)}: expected lean or grpc-js`);
  return 'lean';
}

/**
 * `GRPC_SERVER_USE_TLS` and its files. Only presence is checked here; the files are read (and
 * every unreadable or invalid one reported) when the app is built (transport/tls.ts). As in the
 * reference, the other variables are ignored while `GRPC_SERVER_USE_TLS` is false.
 */
export function grpcTlsSettings(r: Reader): GrpcTlsSettings | undefined {
  if (!r.bool('GRPC_SERVER_USE_TLS', false)) return undefined;
  const certFile = r.raw('GRPC_SERVER_TLS_CERT');
  const keyFile = r.raw('GRPC_SERVER_TLS_KEY');
  const clientCaFile = r.raw('GRPC_CLIENT_TLS_CACERT');
  const clientSan = r.raw('GRPC_CLIENT_TLS_SAN');
  if (certFile === undefined) {
    r.problems.push(
      'GRPC_SERVER_TLS_CERT must be set when GRPC_SERVER_USE_TLS=true (a PEM file with the server certificate chain)',
    );
  }
  if (keyFile === undefined) {
    r.problems.push(
      "GRPC_SERVER_TLS_KEY must be set when GRPC_SERVER_USE_TLS=true (a PEM file with the server certificate's private key)",
    );
  }
  // The reference would start and check nothing (it asks for no client certificate without a
  // CA); a SAN the operator asked for must not be silently unenforced.
  if (clientSan !== undefined && clientCaFile === undefined) {
    r.problems.push(
      `GRPC_CLIENT_TLS_SAN=${JSON.stringify(clientSan)} needs GRPC_CLIENT_TLS_CACERT: client certificates are asked for (and their SAN checked) only when a client CA is set`,
    );
  }
  return { certFile: certFile ?? '', keyFile: keyFile ?? '', clientCaFile, clientSan };
}

/** Keepalive and connection age of the gRPC port (`GRPC_MAX_CONNECTION_*`, `GRPC_KEEPALIVE_*`). */
export function grpcConnectionSettings(r: Reader): GrpcConnectionSettings {
  return {
    maxConnectionAgeMs: r.duration('GRPC_MAX_CONNECTION_AGE', 24 * 3_600_000),
    maxConnectionAgeGraceMs: r.duration('GRPC_MAX_CONNECTION_AGE_GRACE', 3_600_000),
    keepaliveTimeMs: r.duration('GRPC_KEEPALIVE_TIME', 2 * 3_600_000),
    keepaliveTimeoutMs: r.duration('GRPC_KEEPALIVE_TIMEOUT', 20_000),
    maxConnectionIdleMs: r.duration('GRPC_MAX_CONNECTION_IDLE', 0),
  };
}

/**
 * The transport's limits (`GRPC_MAX_CONNECTIONS`, streams, the byte budgets, request time-out);
 * the byte budgets' defaults grow with the largest message, so raising it alone never fails.
 */
export function grpcBudgets(
  r: Reader,
  maxMessageBytes: number,
): { grpcLimits: GrpcLimits; maxRequestBufferBytes: number } {
  return {
    grpcLimits: {
      maxConnections: r.int(
        'GRPC_MAX_CONNECTIONS',
        DEFAULT_GRPC_LIMITS.maxConnections,
        1,
        1_000_000,
      ),
      maxConcurrentStreams: r.int(
        'GRPC_MAX_CONCURRENT_STREAMS',
        DEFAULT_GRPC_LIMITS.maxConcurrentStreams,
        1,
        1_000_000,
      ),
      maxConnectionBufferBytes: r.int(
        'GRPC_MAX_CONNECTION_BUFFER_BYTES',
        Math.max(DEFAULT_GRPC_LIMITS.maxConnectionBufferBytes, 2 * maxMessageBytes),
        65_536,
        2 ** 40,
      ),
      requestTimeoutMs: r.duration('GRPC_REQUEST_TIMEOUT', DEFAULT_GRPC_LIMITS.requestTimeoutMs),
    },
    maxRequestBufferBytes: r.int(
      'MAX_REQUEST_BUFFER_BYTES',
      Math.max(DEFAULT_REQUEST_BUFFER_BYTES, 4 * maxMessageBytes),
      65_536,
      2 ** 40,
    ),
  };
}
