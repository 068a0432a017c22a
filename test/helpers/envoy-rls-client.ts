/**
 * RateLimitService and RateLimitQuotaService clients generated from Envoy's OWN published protos
 * (the copy shipped in @grpc/grpc-js-xds under deps/envoy-api), so tests prove wire compatibility
 * rather than agreement with ourselves.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { RLQS_SERVICE_NAME } from '../../src/transport/rpc.js';

const require = createRequire(import.meta.url);
/** The deps/ folder of @grpc/grpc-js-xds (Envoy's API and its imports). */
const XDS_DEPS = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

/** Include dirs that resolve every import of Envoy's API protos. */
export const ENVOY_INCLUDE_DIRS = ['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map(
  (d) => path.join(XDS_DEPS, d),
);

/** How the clients decode Envoy's messages: snake_case fields, enum names, longs as numbers. */
const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: ENVOY_INCLUDE_DIRS,
};

/** Envoy's RateLimitService package, decoded with snake_case fields and enum names. */
export function loadEnvoyRls(): protoLoader.PackageDefinition {
  return protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', LOADER_OPTIONS);
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

/** Envoy's RateLimitQuotaService from its own rlqs.proto, decoded as {@link loadEnvoyRls} does. */
export function loadEnvoyRlqs(): grpc.ServiceDefinition {
  const pkg = protoLoader.loadSync('envoy/service/rate_limit_quota/v3/rlqs.proto', LOADER_OPTIONS);
  return pkg[RLQS_SERVICE_NAME] as grpc.ServiceDefinition;
}

/** One report stream a test opened, as an Envoy holds it open to its quota service. */
export interface QuotaStream<Answer = unknown> {
  /** Write reports (`RateLimitQuotaUsageReports` objects); listen for `status`. */
  readonly call: grpc.ClientDuplexStream<object, Answer>;
  /** Every `RateLimitQuotaResponse` received on the stream so far, in order. */
  readonly answers: Answer[];
}

/** A RateLimitQuotaService client built from Envoy's own protos. */
export interface EnvoyRlqsClient {
  /**
   * Open a report stream. Its answers are collected in `answers`; its errors are ignored, so a
   * stream the server ends does not fail the test (read the call's `status` to check how it ended).
   */
  openStream<Answer = unknown>(): QuotaStream<Answer>;
  close(): void;
}

/** Connect to the quota service at `address` (host:port), plaintext. */
export function createEnvoyRlqsClient(address: string): EnvoyRlqsClient {
  const Client = grpc.makeGenericClientConstructor(loadEnvoyRlqs(), 'RateLimitQuotaService');
  const client = new Client(address, grpc.credentials.createInsecure()) as grpc.Client &
    Record<string, (...args: unknown[]) => unknown>;
  return {
    openStream<Answer>() {
      const call = client['StreamRateLimitQuotas']!() as grpc.ClientDuplexStream<object, Answer>;
      const answers: Answer[] = [];
      call.on('data', (message: Answer) => answers.push(message));
      call.on('error', () => {});
      return { call, answers };
    },
    close: () => client.close(),
  };
}
