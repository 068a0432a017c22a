/**
 * What the transports report (docs/operations.md, "Limits", issue 22): refusals by reason and the
 * bytes unfinished requests hold.
 */
import type { Registry } from 'prom-client';
import { labelledCounter, plainGauge } from './plain-metrics.js';

/** Why a connection, call or request was refused (`sluice_transport_refusals_total{reason}`). */
export type RefusalReason =
  /** `GRPC_MAX_CONNECTIONS` connections were open: a new one was closed at accept. */
  | 'connections'
  /** The connection's unfinished requests held `GRPC_MAX_CONNECTION_BUFFER_BYTES`. */
  | 'connection_buffer'
  /** Unfinished requests of both ports held `MAX_REQUEST_BUFFER_BYTES`. */
  | 'total_buffer'
  /** A gRPC request did not arrive whole within `GRPC_REQUEST_TIMEOUT`. */
  | 'request_timeout'
  /** A `/json` body was larger than `GRPC_MAX_RECEIVE_MESSAGE_LENGTH`. */
  | 'json_body_size'
  /** A request on the HTTP port did not arrive whole within `HTTP_REQUEST_TIMEOUT`. */
  | 'http_timeout';

/** Every {@link RefusalReason}, in the order `/metrics` lists them. */
const REFUSAL_REASONS: readonly RefusalReason[] = [
  'connections',
  'connection_buffer',
  'total_buffer',
  'request_timeout',
  'json_body_size',
  'http_timeout',
];

/** Where the transports report refusals and what they hold. None of the methods may throw. */
export interface TransportMetricsSink {
  /** One connection, call or request refused for `reason`. */
  refused(reason: RefusalReason): void;
}

/**
 * Register the transport metrics on `registry` and give the sink that feeds them;
 * `requestBufferBytes` reads the bytes unfinished requests hold at scrape time (0 without it).
 */
export function createTransportMetrics(
  registry: Registry,
  requestBufferBytes: (() => number) | undefined,
): TransportMetricsSink {
  const refusals = new Map<RefusalReason, number>(REFUSAL_REASONS.map((r) => [r, 0]));
  labelledCounter(
    registry,
    'sluice_transport_refusals_total',
    'Connections, calls and requests refused by a transport limit, by reason (docs/operations.md, Limits)',
    'reason',
    () => refusals,
  );
  plainGauge(
    registry,
    'sluice_request_buffer_bytes',
    'Bytes held by unfinished requests of the gRPC port and /json (bounded by MAX_REQUEST_BUFFER_BYTES)',
    requestBufferBytes,
  );
  return {
    refused(reason) {
      refusals.set(reason, (refusals.get(reason) ?? 0) + 1);
    },
  };
}
