/**
 * What the xDS client needs (`CONFIG_TYPE=GRPC_XDS_SOTW`): the reference's `CONFIG_GRPC_XDS_*`
 * and `XDS_CLIENT_*` settings, validated by settings.ts (docs/xds.md).
 */

/** TLS to the management server (`CONFIG_GRPC_XDS_SERVER_USE_TLS=true`). */
export interface XdsTlsOptions {
  /**
   * `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`: PEM file of the CA(s) the server's certificate must chain
   * to, trusted in addition to the system's roots (as the reference does); `undefined`: the
   * system's roots only.
   */
  readonly caFile: string | undefined;
  /** `CONFIG_GRPC_XDS_CLIENT_TLS_CERT`: client certificate chain (PEM) for mTLS; `undefined`: none. */
  readonly certFile: string | undefined;
  /** `CONFIG_GRPC_XDS_CLIENT_TLS_KEY`: the client certificate's private key (PEM). */
  readonly keyFile: string | undefined;
  /**
   * `CONFIG_GRPC_XDS_SERVER_TLS_SAN`: the name the server's certificate must carry (also sent as
   * SNI); `undefined`: the host of the server URL.
   */
  readonly serverSan: string | undefined;
}

/** The xDS client's settings. */
export interface XdsOptions {
  /** `CONFIG_GRPC_XDS_SERVER_URL` (default `localhost:18000`): `host:port` of the server. */
  readonly serverUrl: string;
  /** `CONFIG_GRPC_XDS_NODE_ID` (default `default`): the node the server keys snapshots by. */
  readonly nodeId: string;
  /** `CONFIG_GRPC_XDS_NODE_METADATA` (`k1=v1,k2=v2`): the node's metadata, string values. */
  readonly nodeMetadata: Readonly<Record<string, string>>;
  /** `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS` (`k1:v1,k2:v2`): gRPC metadata on the stream. */
  readonly headers: Readonly<Record<string, string>>;
  /**
   * `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` (default 3s), ms: the wait between attempts
   * while the server cannot be reached.
   */
  readonly connectRetryIntervalMs: number;
  /**
   * `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL` (default 10s), ms: the shortest wait after a working
   * stream breaks.
   */
  readonly backoffInitialMs: number;
  /** `XDS_CLIENT_BACKOFF_MAX_INTERVAL` (default 60s), ms: the longest wait after breaks in a row. */
  readonly backoffMaxMs: number;
  /**
   * `XDS_CLIENT_BACKOFF_RANDOM_FACTOR` (default 0.5): despite its name, what the wait is multiplied
   * by per break in a row, as in the reference (whose backoff library takes it as its factor; 0
   * means 2). Waits never go below the initial interval, so the default keeps them there.
   */
  readonly backoffFactor: number;
  /** `XDS_CLIENT_BACKOFF_JITTER` (default true): pick each wait at random between the initial one and it. */
  readonly backoffJitter: boolean;
  /**
   * `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES`: largest DiscoveryResponse accepted; `undefined`: grpc-js's
   * default (4 MiB), as the reference leaves grpc-go's (4 MiB).
   */
  readonly maxMessageBytes: number | undefined;
  /** TLS to the server; `undefined`: plaintext (the reference's default). */
  readonly tls: XdsTlsOptions | undefined;
}
