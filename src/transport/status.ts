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
  // The reference answers undecodable bytes INTERNAL (docs/compatibility.md); sluice says it is
  // the caller's: INVALID_ARGUMENT, with the reference's text (unmarshalErrorText).
  MALFORMED_MESSAGE: GrpcStatus.INVALID_ARGUMENT,
  INVALID_UTF8: GrpcStatus.INVALID_ARGUMENT,
  INVALID_JSON: GrpcStatus.INVALID_ARGUMENT,
  STORE_UNAVAILABLE: GrpcStatus.UNAVAILABLE,
  STORE_TIMEOUT: GrpcStatus.UNAVAILABLE,
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

/** How often a cause that keeps failing logs how many calls failed since its last line. */
const FAILURE_SUMMARY_INTERVAL_MS = 60_000;

/** What one logger remembers of the failures it logged: per error code, calls not yet logged. */
interface FailureState {
  /** Failed calls per code since the last line about that code; a code present is failing. */
  readonly pending: Map<ErrorCode, number>;
  /** The summary timer; `undefined` when no code is failing. */
  timer: NodeJS.Timeout | undefined;
}

const failureStates = new WeakMap<Logger, FailureState>();

/**
 * Log a failed call at most once per cause and state change, plus one count per interval
 * (docs/operations.md, "Logs"): the first failure of a code logs it with its cause; later ones
 * only add to a count that a timer logs every {@link FAILURE_SUMMARY_INTERVAL_MS} as long as
 * calls keep failing. An interval without failures of that code ends its failing state (logged),
 * so the next failure logs in full again. Under a store outage at any call rate this writes a few
 * lines a minute instead of one line with a stack trace per call.
 */
export function logCallFailure(
  logger: Logger,
  error: SluiceError,
  message: string,
  intervalMs: number = FAILURE_SUMMARY_INTERVAL_MS,
): void {
  let state = failureStates.get(logger);
  if (state === undefined) {
    state = { pending: new Map(), timer: undefined };
    failureStates.set(logger, state);
  }
  const code = error.code;
  const pending = state.pending.get(code);
  if (pending !== undefined) {
    state.pending.set(code, pending + 1);
    return;
  }
  state.pending.set(code, 0);
  logger.error(
    { err: error, code },
    `${message}; further failures of this kind are counted and logged once per ${intervalMs / 1000} s`,
  );
  if (state.timer !== undefined) return;
  const owned = state;
  const timer = setInterval(() => {
    for (const [failing, count] of owned.pending) {
      if (count > 0) {
        logger.error({ code: failing, failedCalls: count, intervalMs }, `${message} (repeated)`);
        owned.pending.set(failing, 0);
      } else {
        logger.info({ code: failing }, `${message}: no more failures of this kind`);
        owned.pending.delete(failing);
      }
    }
    if (owned.pending.size === 0) {
      clearInterval(timer);
      owned.timer = undefined;
    }
  }, intervalMs);
  timer.unref();
  state.timer = timer;
}

/**
 * Map anything a ShouldRateLimit handler threw to the status it answers. INTERNAL and store
 * failures (STORE_UNAVAILABLE, STORE_TIMEOUT) are logged at error level through {@link logCallFailure} (bounded
 * per cause, never one line per call); request errors are the caller's and are not logged.
 */
export function toCallError(err: unknown, logger: Logger): CallError {
  const error = SluiceError.from(err);
  const code = error.code;
  if (code === 'INTERNAL' || code === 'STORE_UNAVAILABLE' || code === 'STORE_TIMEOUT') {
    logCallFailure(logger, error, 'ShouldRateLimit failed');
  }
  return { code: GRPC_STATUS_BY_CODE[code], details: error.message };
}
