/**
 * The one place failures become gRPC statuses, shared by both gRPC servers (the lean one in
 * transport/h2 and the grpc-js one in transport/grpc).
 */
import { SluiceError, type ErrorCode } from '../errors.js';
import type { Logger } from '../logging/logger.js';

/** gRPC status codes (the numbers of the gRPC status code table). */
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

/** One gRPC status code number. */
export type GrpcStatusCode = (typeof GrpcStatus)[keyof typeof GrpcStatus];

/** gRPC status for each error code. */
export const GRPC_STATUS_BY_CODE: Readonly<Record<ErrorCode, GrpcStatusCode>> = {
  INVALID_CONFIG: GrpcStatus.FAILED_PRECONDITION,
  INVALID_SETTINGS: GrpcStatus.FAILED_PRECONDITION,
  INVALID_REQUEST: GrpcStatus.INVALID_ARGUMENT,
  STORE_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  // The reference answers a plain Go error here, which grpc-go sends as UNKNOWN.
  NO_CONFIG: GrpcStatus.UNKNOWN,
  INTERNAL: GrpcStatus.INTERNAL,
};

/**
 * The reference's text (grpc-go's, with protobuf-go's reason) for a ShouldRateLimit request whose
 * bytes do not decode: `invalidUtf8` for a string field that is not UTF-8, else for bytes that
 * are no well-formed message. Both are answered INVALID_ARGUMENT (the reference: INTERNAL;
 * docs/compatibility.md).
 */
export function unmarshalErrorText(invalidUtf8: boolean): string {
  return invalidUtf8
    ? 'grpc: error unmarshalling request: string field contains invalid UTF-8'
    : 'grpc: error unmarshalling request: proto: cannot parse invalid wire-format data';
}

/** A failed call: status code and message (`grpc-message`). */
export interface CallError {
  readonly code: GrpcStatusCode;
  readonly details: string;
}

/**
 * Map anything a ShouldRateLimit handler threw to the status it answers. INTERNAL and
 * STORE_UNAVAILABLE failures are logged at error level; request errors are the caller's and are
 * not logged.
 */
export function toCallError(err: unknown, logger: Logger): CallError {
  const error = SluiceError.from(err);
  if (error.code === 'INTERNAL' || error.code === 'STORE_UNAVAILABLE') {
    logger.error({ err: error }, 'ShouldRateLimit failed');
  }
  return { code: GRPC_STATUS_BY_CODE[error.code], details: error.message };
}
