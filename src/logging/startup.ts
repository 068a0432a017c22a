/**
 * The start-up line: one info line, written whatever `LOG_LEVEL` says, that tells an operator the
 * server is up and what it serves: version, every listening address, the counter store and a
 * summary of the rules.
 */
import type { Logger } from './logger.js';

/** The message of the start-up line (what to grep for). */
const STARTUP_MESSAGE = 'sluice listening';

/** What the start-up line reports. */
export interface StartupInfo {
  /** sluice's version. */
  readonly version: string;
  /**
   * Every bound listener, by name (`grpc`, `http`, `debug`), as `host:port` with the bound port
   * (so port 0 shows the port picked). A new listener is reported by adding an entry here; each
   * becomes a field of the line.
   */
  readonly listeners: Readonly<Record<string, string>>;
  /** Server processes sharing the ports (`WORKERS`); left out of the line when undefined. */
  readonly workers?: number | undefined;
  /** The counter store's backend type (`BACKEND_TYPE`), never its address or credentials. */
  readonly store: string;
  /**
   * TLS on the gRPC port (docs/operations-tls.md): `tls`, `mtls`, or `mtls, client SAN <name>`;
   * `undefined` (left out of the line) for plaintext.
   */
  readonly grpcTls?: string | undefined;
  /** Where the rules came from (`flags`, `runtime` or `bundled`, see settings.ts). */
  readonly configOrigin: string;
  /**
   * The rules serving (a ConfigSnapshot; only its domain names and rule lines are read, so this
   * module imports nothing of config/).
   */
  readonly snapshot: {
    readonly domains: ReadonlyMap<string, unknown>;
    dump(): readonly string[];
  };
}

/**
 * Write the start-up line through `logger` (same format, redaction and destination) at info,
 * even when the logger's level is higher: the default `LOG_LEVEL=warn` would otherwise hide the
 * only sign that the server is up.
 */
export function logStartup(logger: Logger, info: StartupInfo): void {
  const fields = {
    version: info.version,
    ...info.listeners,
    ...(info.grpcTls === undefined ? {} : { grpcTls: info.grpcTls }),
    store: info.store,
    ...(info.workers === undefined ? {} : { workers: info.workers }),
    config: info.configOrigin,
    domains: [...info.snapshot.domains.keys()].sort(),
    rules: info.snapshot.dump().length,
  };
  logger.child({}, { level: 'info' }).info(fields, STARTUP_MESSAGE);
}

/** `host:port`, bracketing IPv6 literals. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
}
