/**
 * The xDS rule source's settings (`CONFIG_TYPE`, `CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*`), with the
 * reference's names and defaults: read by `loadSettings` (settings.ts), which reports every
 * problem at once.
 */
import { atLeast, type Reader } from './settings-reader.js';
import type { XdsOptions } from './transport/xds/options.js';

/** `CONFIG_TYPE`: `FILE` (default) or `GRPC_XDS_SOTW`, the reference's two values (any case). */
export function configTypeSetting(r: Reader): 'FILE' | 'GRPC_XDS_SOTW' {
  const text = r.string('CONFIG_TYPE', 'FILE');
  const upper = text.trim().toUpperCase();
  if (upper === 'FILE' || upper === 'GRPC_XDS_SOTW') return upper;
  r.problems.push(
    `CONFIG_TYPE=${JSON.stringify(text)}: expected FILE (rules from files, the default) or GRPC_XDS_SOTW (rules from an xDS management server)`,
  );
  return 'FILE';
}

/**
 * The xDS client's settings when `CONFIG_TYPE=GRPC_XDS_SOTW`, else `undefined`; they are read and
 * checked either way, so a bad one stops the start whatever the rule source.
 */
export function xdsSettingsChecked(
  r: Reader,
  configType: 'FILE' | 'GRPC_XDS_SOTW',
  flagPaths: readonly string[] | undefined,
): XdsOptions | undefined {
  if (configType === 'GRPC_XDS_SOTW') return xdsSettings(r, flagPaths);
  xdsSettings(r, undefined);
  return undefined;
}

/**
 * The xDS client's settings (`CONFIG_GRPC_XDS_*`, `XDS_CLIENT_*`), with the reference's names and
 * defaults. TLS files are only checked for presence here; the client reads them at start.
 */
function xdsSettings(r: Reader, flagPaths: readonly string[] | undefined): XdsOptions {
  if (flagPaths !== undefined && flagPaths.length > 0) {
    r.problems.push(
      '--config reads rule files, but CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from the xDS server; drop --config or set CONFIG_TYPE=FILE',
    );
  }
  const serverUrl = r.string('CONFIG_GRPC_XDS_SERVER_URL', 'localhost:18000').trim();
  // host:port as the reference documents it, or a gRPC target name (dns:///host:port, unix:path).
  const hostPort = /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):\d{1,5}$/;
  if (!hostPort.test(serverUrl) && !/^(dns|unix|ipv4|ipv6):\S+$/.test(serverUrl)) {
    r.problems.push(
      `CONFIG_GRPC_XDS_SERVER_URL=${JSON.stringify(serverUrl)}: expected host:port of the xDS management server (for example envoy-gateway:18001) or a gRPC target such as dns:///host:port`,
    );
  }
  const backoffInitialMs = r.duration('XDS_CLIENT_BACKOFF_INITIAL_INTERVAL', 10_000);
  const backoffMaxMs = r.duration('XDS_CLIENT_BACKOFF_MAX_INTERVAL', 60_000);
  if (backoffMaxMs < backoffInitialMs) {
    r.problems.push(
      `XDS_CLIENT_BACKOFF_MAX_INTERVAL (${backoffMaxMs} ms) must be at least XDS_CLIENT_BACKOFF_INITIAL_INTERVAL (${backoffInitialMs} ms)`,
    );
  }
  const maxMessage = r.int('XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES', 0, 0, 2_147_483_647);
  const useTls = r.bool('CONFIG_GRPC_XDS_SERVER_USE_TLS', false);
  const certFile = r.raw('CONFIG_GRPC_XDS_CLIENT_TLS_CERT');
  const keyFile = r.raw('CONFIG_GRPC_XDS_CLIENT_TLS_KEY');
  if (useTls && (certFile === undefined) !== (keyFile === undefined)) {
    r.problems.push(
      'CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY go together: set both for a client certificate (mTLS), or neither',
    );
  }
  return {
    serverUrl,
    nodeId: r.string('CONFIG_GRPC_XDS_NODE_ID', 'default'),
    nodeMetadata: keyValueList(r, 'CONFIG_GRPC_XDS_NODE_METADATA', '=', false),
    headers: keyValueList(r, 'CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS', ':', true),
    connectRetryIntervalMs: atLeast(r, 'CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL', 3_000),
    backoffInitialMs,
    backoffMaxMs,
    backoffFactor: backoffFactor(r),
    backoffJitter: r.bool('XDS_CLIENT_BACKOFF_JITTER', true),
    maxMessageBytes: maxMessage === 0 ? undefined : maxMessage,
    tls: useTls
      ? {
          caFile: r.raw('CONFIG_GRPC_XDS_SERVER_TLS_CACERT'),
          certFile,
          keyFile,
          serverSan: r.raw('CONFIG_GRPC_XDS_SERVER_TLS_SAN'),
        }
      : undefined,
  };
}

/** `XDS_CLIENT_BACKOFF_RANDOM_FACTOR`: a number of at least 0 (default 0.5; see XdsOptions). */
function backoffFactor(r: Reader): number {
  const text = r.raw('XDS_CLIENT_BACKOFF_RANDOM_FACTOR');
  if (text === undefined) return 0.5;
  const value = Number(text.trim());
  if (text.trim() === '' || !Number.isFinite(value) || value < 0 || value > 1000) {
    r.problems.push(
      `XDS_CLIENT_BACKOFF_RANDOM_FACTOR=${JSON.stringify(text)}: expected a number from 0 to 1000 (what the wait is multiplied by per failed attempt)`,
    );
    return 0.5;
  }
  return value;
}

/**
 * A `k1<sep>v1,k2<sep>v2` list (the reference's format for node metadata, `=`, and for the extra
 * headers, `:`). An item without the separator is refused: the reference drops it silently (node
 * metadata) or refuses to start (headers), and either way it is a typo worth naming. Header names
 * are gRPC metadata keys, so they are lower-cased and checked.
 */
function keyValueList(
  r: Reader,
  name: string,
  separator: string,
  headerNames: boolean,
): Record<string, string> {
  const text = r.raw(name);
  const out: Record<string, string> = {};
  if (text === undefined) return out;
  for (const item of text.split(',')) {
    if (item.trim() === '') continue;
    const at = item.indexOf(separator);
    const key = (at < 0 ? '' : item.slice(0, at)).trim();
    if (at < 0 || key === '') {
      r.problems.push(
        `${name}: ${JSON.stringify(item)} is not key${separator}value; write ${name}=k1${separator}v1,k2${separator}v2`,
      );
      continue;
    }
    const value = item.slice(at + 1).trim();
    if (headerNames) {
      const lower = key.toLowerCase();
      if (!/^[0-9a-z_.-]+$/.test(lower) || lower.startsWith('grpc-')) {
        r.problems.push(
          `${name}: ${JSON.stringify(key)} is not a usable gRPC metadata key (letters, digits, '-', '_' and '.', not starting with grpc-)`,
        );
        continue;
      }
      out[lower] = value;
    } else {
      out[key] = value;
    }
  }
  return out;
}
