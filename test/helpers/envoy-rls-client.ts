/**
 * A RateLimitService client generated from Envoy's OWN published protos (the copy shipped in
 * @grpc/grpc-js-xds under deps/envoy-api), so tests prove wire compatibility rather than
 * agreement with ourselves.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

const require = createRequire(import.meta.url);
/** The deps/ folder of @grpc/grpc-js-xds (Envoy's API and its imports). */
const XDS_DEPS = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include dirs that resolve every import of Envoy's API protos. */
export const ENVOY_INCLUDE_DIRS = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map(
  (d) => path.join(XDS_DEPS, d),
);

/** Envoy's RateLimitService package, decoded with snake_case fields and enum names. */
export function loadEnvoyRls(): protoLoader.PackageDefinition {
  return protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
    includeDirs: ENVOY_INCLUDE_DIRS,
  });
}

/** The decoded response, as Envoy's proto sees it (defaults filled in). */
export interface EnvoyResponse {
  overall_code: string;
  statuses: {
    code: string;
    current_limit: { requests_per_unit: number; unit: string; name: string } | null;
    limit_remaining: number;
    duration_until_reset: { seconds: number; nanos: number } | null;
  }[];
  response_headers_to_add: { key: string; value: string }[];
}

/** A promise-returning client for ShouldRateLimit. */
export interface EnvoyRlsClient {
  /** Call ShouldRateLimit with a raw wire request. */
  shouldRateLimit(request: unknown, timeoutMs?: number): Promise<EnvoyResponse>;
  /** Send raw bytes as the request message (for malformed-input tests). */
  sendRaw(bytes: Buffer, timeoutMs?: number): Promise<EnvoyResponse>;
  /** The underlying grpc-js client. */
  readonly raw: grpc.Client;
  close(): void;
}

const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/**
 * Connect to `address` (host:port) with a client built from Envoy's protos; plaintext unless
 * `credentials` are given (TLS tests), with `channelOptions` passed to grpc-js.
 */
export function createEnvoyRlsClient(
  address: string,
  credentials: grpc.ChannelCredentials = grpc.credentials.createInsecure(),
  channelOptions: grpc.ChannelOptions = {},
): EnvoyRlsClient {
  const pkg = loadEnvoyRls();
  const def = pkg['envoy.service.ratelimit.v3.RateLimitService'] as grpc.ServiceDefinition;
  const method = def.ShouldRateLimit!;
  const client = new grpc.Client(address, credentials, channelOptions);
  const call = (
    serialize: (value: any) => Buffer,
    request: unknown,
    timeoutMs: number,
  ): Promise<EnvoyResponse> =>
    new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        METHOD,
        serialize,
        (bytes: Buffer) => method.responseDeserialize(bytes) as EnvoyResponse,
        request,
        { deadline: Date.now() + timeoutMs },
        (err, response) => (err ? reject(err) : resolve(response!)),
      );
    });
  return {
    raw: client,
    shouldRateLimit: (request, timeoutMs = 5000) =>
      call((v) => method.requestSerialize(v), request, timeoutMs),
    sendRaw: (bytes, timeoutMs = 5000) => call((b: Buffer) => b, bytes, timeoutMs),
    close: () => client.close(),
  };
}

/** Build a wire request from `domain` and descriptors given as `{key: value}` objects. */
export function rlsRequest(
  domain: string,
  descriptors: Record<string, string>[],
  extra: { hits_addend?: number } = {},
): unknown {
  return {
    domain,
    descriptors: descriptors.map((d) => ({
      entries: Object.entries(d).map(([key, value]) => ({ key, value })),
    })),
    ...extra,
  };
}

/** Milliseconds of a decoded google.protobuf.Duration (0 when absent). */
export function durationMs(d: { seconds: number; nanos: number } | null | undefined): number {
  return d ? Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6) : 0;
}
