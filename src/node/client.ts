/**
 * `sluice/client`: a typed ShouldRateLimit client over @grpc/grpc-js and sluice's own proto/, for
 * Node services that want the limits their Envoy edge has without Envoy (docs/node.md). It speaks
 * to sluice and to envoyproxy/ratelimit alike: the wire contract is Envoy's.
 */
import * as grpc from '@grpc/grpc-js';
import { rlsClientConstructor } from '../transport/grpc/proto.js';
import {
  failureDecision,
  type CallEntry,
  type CallUnit,
  type DescriptorResult,
  type FailureMode,
  type RateLimitBackend,
  type RateLimitCall,
  type RateLimitDecision,
} from './decision.js';

export type {
  CallDescriptor,
  CallEntry,
  CallUnit,
  DescriptorResult,
  FailureMode,
  RateLimitBackend,
  RateLimitCall,
  RateLimitDecision,
  RateLimitFailure,
  ReportedLimit,
} from './decision.js';

/** TLS towards the server; PEM contents, not file names. */
export interface ClientTlsOptions {
  /** CA bundle that verifies the server; `undefined`: the system's CAs. */
  readonly ca?: string | Buffer | undefined;
  /** Client certificate chain for mTLS (with `key`). */
  readonly cert?: string | Buffer | undefined;
  /** Private key of `cert`. */
  readonly key?: string | Buffer | undefined;
  /**
   * The name the server certificate must carry (also sent as SNI and `:authority`);
   * `undefined`: the host of `address`.
   */
  readonly serverName?: string | undefined;
}

/** Options of {@link createRateLimitClient}. */
export interface RateLimitClientOptions {
  /** `host:port` of the server, or any grpc-js target (`dns:///rls:8081`, `unix:/run/rls.sock`). */
  readonly address: string;
  /** TLS (mTLS with `cert` and `key`); `undefined`: plaintext. */
  readonly tls?: ClientTlsOptions | undefined;
  /**
   * Deadline of each call, ms (default 100). Envoy's filter defaults to 20 ms; a Node event loop
   * under load needs more room, and a deadline that passes is answered by `failureMode`.
   */
  readonly timeoutMs?: number | undefined;
  /**
   * What a failed call answers (default `open`, as Envoy's filter without `failure_mode_deny`):
   * `open` lets the request through, `closed` rejects it. The decision says why either way.
   */
  readonly failureMode?: FailureMode | undefined;
  /**
   * Send an HTTP/2 PING after this long without traffic, ms (default 300000, the least gap the
   * reference's Go server accepts without answering `too_many_pings`); 0: never.
   */
  readonly keepaliveTimeMs?: number | undefined;
  /** Drop the connection when a PING is not answered within this, ms (default 20000). */
  readonly keepaliveTimeoutMs?: number | undefined;
  /** First wait before reconnecting a lost connection, ms (default 1000, grpc-js's own). */
  readonly reconnectInitialBackoffMs?: number | undefined;
  /** Longest wait between reconnect attempts, ms (default 10000). */
  readonly reconnectMaxBackoffMs?: number | undefined;
  /** More grpc-js channel options; they win over the ones above. */
  readonly channelOptions?: grpc.ChannelOptions | undefined;
}

/** Options of one call. */
export interface CallOptions {
  /** This call's deadline, ms; default the client's `timeoutMs`. */
  readonly timeoutMs?: number | undefined;
}

/** A ShouldRateLimit client. */
export interface RateLimitClient extends RateLimitBackend {
  /**
   * Decide one call. Never rejects: a failed call (no connection, deadline, an error status)
   * resolves to the failure policy's decision, with `failure.reason` to log. Throws a TypeError
   * at once for an invalid `options.timeoutMs` (a mistake in the caller, not a failed call).
   */
  shouldRateLimit(call: RateLimitCall, options?: CallOptions): Promise<RateLimitDecision>;
  /**
   * Resolve once the channel is connected; rejects after `timeoutMs` (default the call
   * deadline x 10) without one. Calls need not wait for this: the channel connects on the first.
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Close the channel; later calls get the failure policy's answer. */
  close(): void;
}

const DEFAULT_TIMEOUT_MS = 100;
const DEFAULT_KEEPALIVE_TIME_MS = 300_000;
const DEFAULT_KEEPALIVE_TIMEOUT_MS = 20_000;

/** The wire units by name (the enum is decoded as its name). */
const UNITS: Readonly<Record<string, CallUnit>> = {
  SECOND: 'second',
  MINUTE: 'minute',
  HOUR: 'hour',
  DAY: 'day',
  WEEK: 'week',
  MONTH: 'month',
  YEAR: 'year',
};

/** A decoded RateLimitResponse, as proto-loader hands it over (keepCase, enums as names). */
interface WireResponse {
  readonly overall_code?: string;
  readonly statuses?: readonly WireStatus[];
  readonly response_headers_to_add?: readonly { key?: string; value?: string }[];
}

interface WireStatus {
  readonly code?: string;
  readonly current_limit?: { requests_per_unit?: number; unit?: string; name?: string } | null;
  readonly limit_remaining?: number;
  readonly duration_until_reset?: { seconds?: number; nanos?: number } | null;
}

/** The generic client's one method, typed. */
type ShouldRateLimitMethod = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: WireResponse) => void,
) => grpc.ClientUnaryCall;

/** A call in the wire shape proto-loader encodes. */
function callToWire(call: RateLimitCall): unknown {
  return {
    domain: call.domain,
    hits_addend: call.hitsAddend ?? 0,
    descriptors: call.descriptors.map((d) => ({
      entries: d.entries.map((e) => ({ key: e.key, value: e.value })),
      limit:
        d.limit === undefined
          ? undefined
          : { requests_per_unit: d.limit.requestsPerUnit, unit: d.limit.unit.toUpperCase() },
      hits_addend: d.hitsAddend === undefined ? undefined : { value: d.hitsAddend },
    })),
  };
}

function statusFromWire(wire: WireStatus): DescriptorResult {
  const current = wire.current_limit;
  const unit = current == null ? undefined : UNITS[current.unit ?? ''];
  const reset = wire.duration_until_reset;
  return {
    code: wire.code === 'OVER_LIMIT' ? 'OVER_LIMIT' : 'OK',
    limit:
      current == null || unit === undefined
        ? undefined
        : { requestsPerUnit: current.requests_per_unit ?? 0, unit, name: current.name ?? '' },
    remaining: wire.limit_remaining ?? 0,
    resetMs:
      reset == null
        ? undefined
        : (reset.seconds ?? 0) * 1000 + Math.round((reset.nanos ?? 0) / 1e6),
  };
}

/**
 * The decision for a decoded answer. UNKNOWN (which sluice never sends) is treated as a failure,
 * as Envoy's filter treats it as an error.
 */
function decisionFromWire(
  wire: WireResponse,
  mode: FailureMode,
  address: string,
): RateLimitDecision {
  const code = wire.overall_code;
  if (code !== 'OK' && code !== 'OVER_LIMIT') {
    return failureDecision(
      mode,
      'UNKNOWN',
      `ShouldRateLimit to ${address}`,
      new Error(`the server answered overall_code ${code ?? 'UNKNOWN'}`),
    );
  }
  const headers: CallEntry[] = [];
  for (const h of wire.response_headers_to_add ?? []) {
    headers.push({ key: h.key ?? '', value: h.value ?? '' });
  }
  return {
    allowed: code === 'OK',
    overallCode: code,
    statuses: (wire.statuses ?? []).map(statusFromWire),
    responseHeaders: headers,
  };
}

function channelCredentials(tls: ClientTlsOptions | undefined): grpc.ChannelCredentials {
  if (tls === undefined) return grpc.credentials.createInsecure();
  const buf = (pem: string | Buffer | undefined): Buffer | null =>
    pem === undefined ? null : Buffer.isBuffer(pem) ? pem : Buffer.from(pem);
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    throw new TypeError('sluice client: tls.cert and tls.key go together (mTLS); give both');
  }
  return grpc.credentials.createSsl(buf(tls.ca), buf(tls.key), buf(tls.cert));
}

/** A positive whole number of ms, or `fallback` when `undefined`; throws naming the option. */
function ms(name: string, value: number | undefined, fallback: number, zeroOk = false): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < (zeroOk ? 0 : 1)) {
    throw new TypeError(
      `sluice client: ${name} must be a whole number of milliseconds ${zeroOk ? '>= 0' : '>= 1'}, not ${String(value)}`,
    );
  }
  return value;
}

/**
 * Create a client. Nothing connects until the first call (or `ready()`); a lost connection is
 * re-established in the background with backoff while calls get the failure policy's answer.
 * Throws a TypeError naming the option for an invalid option.
 */
export function createRateLimitClient(options: RateLimitClientOptions): RateLimitClient {
  if (typeof options.address !== 'string' || options.address === '') {
    throw new TypeError('sluice client: address must be host:port of a rate limit service');
  }
  const address = options.address;
  const timeoutMs = ms('timeoutMs', options.timeoutMs, DEFAULT_TIMEOUT_MS);
  const mode: FailureMode = options.failureMode ?? 'open';
  if (mode !== 'open' && mode !== 'closed') {
    throw new TypeError(
      `sluice client: failureMode must be 'open' or 'closed', not ${String(mode)}`,
    );
  }
  const keepaliveTimeMs = ms(
    'keepaliveTimeMs',
    options.keepaliveTimeMs,
    DEFAULT_KEEPALIVE_TIME_MS,
    true,
  );
  const channel: grpc.ChannelOptions = {
    'grpc.keepalive_timeout_ms': ms(
      'keepaliveTimeoutMs',
      options.keepaliveTimeoutMs,
      DEFAULT_KEEPALIVE_TIMEOUT_MS,
    ),
    'grpc.initial_reconnect_backoff_ms': ms(
      'reconnectInitialBackoffMs',
      options.reconnectInitialBackoffMs,
      1_000,
    ),
    'grpc.max_reconnect_backoff_ms': ms(
      'reconnectMaxBackoffMs',
      options.reconnectMaxBackoffMs,
      10_000,
    ),
    ...(keepaliveTimeMs > 0 ? { 'grpc.keepalive_time_ms': keepaliveTimeMs } : {}),
    ...(options.tls?.serverName === undefined
      ? {}
      : {
          'grpc.ssl_target_name_override': options.tls.serverName,
          'grpc.default_authority': options.tls.serverName,
        }),
    ...options.channelOptions,
  };
  const Client = rlsClientConstructor();
  const client = new Client(address, channelCredentials(options.tls), channel);
  const method = (client as unknown as Record<string, ShouldRateLimitMethod>)['ShouldRateLimit']!;
  const what = `ShouldRateLimit to ${address}`;
  let closed = false;

  return {
    shouldRateLimit(call, callOptions) {
      if (closed) {
        return Promise.resolve(
          failureDecision(mode, 'CANCELLED', what, new Error('the client is closed')),
        );
      }
      const deadlineMs = ms('timeoutMs', callOptions?.timeoutMs, timeoutMs);
      return new Promise<RateLimitDecision>((resolve) => {
        method.call(
          client,
          callToWire(call),
          new grpc.Metadata(),
          { deadline: Date.now() + deadlineMs },
          (error, response) => {
            if (error !== null) {
              const code = grpc.status[error.code] ?? String(error.code);
              resolve(failureDecision(mode, code, what, error));
            } else {
              resolve(decisionFromWire(response ?? {}, mode, address));
            }
          },
        );
      });
    },
    ready(waitMs) {
      const limit = ms('ready timeout', waitMs, timeoutMs * 10);
      return new Promise<void>((resolve, reject) => {
        client.waitForReady(Date.now() + limit, (error) => {
          if (error === undefined || error === null) resolve();
          else reject(new Error(`${address}: not connected within ${limit} ms: ${error.message}`));
        });
      });
    },
    close() {
      closed = true;
      client.close();
    },
  };
}
