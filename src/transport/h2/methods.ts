/**
 * The lean server's method table: every method it serves, by `:path`, with its kind and its
 * handler, as grpc-js registers handlers. Entries: RateLimitService/ShouldRateLimit, health
 * Check and Watch, and each server reflection path. A handler decodes its request with
 * ./codec.ts and answers through ./answers.ts.
 */
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { RateLimitResponse } from '../../model.js';
import type { HealthSignal } from '../../service/health.js';
import type { QuotaService } from '../../rlqs/quota-service.js';
import type { RateLimitService } from '../../service/rate-limit-service.js';
import { METHOD_PATHS, RLS_SERVICE_NAME } from '../rpc.js';
import { GrpcStatus, toCallError, unmarshalErrorText } from '../status.js';
import { fail, finishOk, respondOk, sendUnary } from './answers.js';
import { Kind, type Call, type Method } from './call.js';
import {
  SERVING_STATUS,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from './codec.js';
import { PREFIX_BYTES, frame, writePrefix } from './framing.js';
import { createRlqsMethod } from './rlqs-method.js';

/** Answers server reflection requests (one request message in, one response message out). */
export interface ReflectionHandler {
  /** The method paths it serves (`/grpc.reflection.v1.ServerReflection/ServerReflectionInfo`...). */
  readonly paths: readonly string[];
  /** The encoded ServerReflectionResponse to one encoded ServerReflectionRequest on `path`. */
  answer(path: string, request: Buffer): Uint8Array;
}

/** Options for {@link createMethodTable}. */
export interface MethodTableOptions {
  /** The service ShouldRateLimit calls. */
  readonly service: RateLimitService;
  /** Where failures the service did not expect are logged. */
  readonly logger: Logger;
  /** The instance's health, which Watch follows; `undefined`: no changes but the server's own. */
  readonly health: HealthSignal | undefined;
  /** Server reflection; `undefined`: its paths are not in the table (UNIMPLEMENTED). */
  readonly reflection: ReflectionHandler | undefined;
  /** The Rate Limit Quota Service; `undefined`: its path is not in the table (UNIMPLEMENTED). */
  readonly quota?: QuotaService | undefined;
  /** Whether health answers SERVING now (listening, not closing, the instance healthy). */
  readonly serving: () => boolean;
  /** Whether the server is closing: Watch streams say NOT_SERVING and end. */
  readonly closing: () => boolean;
}

/** The table and what the server tells its Watch streams. */
export interface MethodTable {
  /** Every method served, by `:path`; any other path is answered UNIMPLEMENTED. */
  readonly byPath: ReadonlyMap<string, Method>;
  /**
   * Re-check every open Watch stream (the server started listening, or is closing); when
   * closing, also end every RLQS stream, so Envoy reconnects elsewhere.
   */
  recheckWatches(): void;
}

/** Build the method table of one server. */
export function createMethodTable(options: MethodTableOptions): MethodTable {
  const { service, logger, health, reflection, serving, closing } = options;
  /** Re-check functions of the Watch calls open now. */
  const watchers = new Set<() => void>();

  function shouldRateLimit(call: Call, message: Buffer): void {
    let request;
    try {
      request = decodeRateLimitRequest(message);
    } catch (err) {
      if (SluiceError.is(err, 'MALFORMED_MESSAGE', 'INVALID_UTF8')) {
        fail(call, GrpcStatus.INVALID_ARGUMENT, unmarshalErrorText(err.code === 'INVALID_UTF8'));
      } else {
        failWith(call, err, logger);
      }
      return;
    }
    let answer: Promise<RateLimitResponse>;
    try {
      answer = service.shouldRateLimit(request, call.headers);
    } catch (err) {
      failWith(call, err, logger);
      return;
    }
    answer.then(
      (response) => answerRls(call, response, logger),
      (err: unknown) => failWith(call, err, logger),
    );
  }

  /** Health status of `name` now (SERVICE_UNKNOWN for services this server does not have). */
  function healthStatus(name: string): number {
    if (name !== '' && name !== RLS_SERVICE_NAME) return SERVING_STATUS.SERVICE_UNKNOWN;
    return serving() ? SERVING_STATUS.SERVING : SERVING_STATUS.NOT_SERVING;
  }

  function healthCheck(call: Call, message: Buffer): void {
    const name = healthName(call, message);
    if (name === undefined) return;
    const status = healthStatus(name);
    if (status === SERVING_STATUS.SERVICE_UNKNOWN) {
      fail(call, GrpcStatus.NOT_FOUND, `unknown service ${name}`);
      return;
    }
    sendUnary(call, frame(encodeHealthCheckResponse(status)));
  }

  function healthWatch(call: Call, message: Buffer): void {
    const name = healthName(call, message);
    if (name === undefined) return;
    const stream = call.stream;
    respondOk(stream);
    let last = -1;
    const check = (): void => {
      if (call.done) return;
      if (closing()) {
        // Tell the watcher, then end the stream so it does not hold the shutdown.
        stream.write(frame(encodeHealthCheckResponse(SERVING_STATUS.NOT_SERVING)));
        finishOk(call);
        return;
      }
      const status = healthStatus(name);
      if (status !== last) {
        last = status;
        stream.write(frame(encodeHealthCheckResponse(status)));
      }
    };
    watchers.add(check);
    const stopSignal = health?.watch(check);
    call.unwatch = () => {
      watchers.delete(check);
      stopSignal?.();
    };
    check();
  }

  /** One server reflection request message in, one response message out. */
  function reflectionMessage(call: Call, message: Buffer): void {
    const stream = call.stream;
    if (!stream.headersSent) respondOk(stream);
    let answer: Uint8Array;
    try {
      answer = reflection!.answer(call.path, message);
    } catch (err) {
      fail(call, GrpcStatus.INVALID_ARGUMENT, `malformed reflection request: ${String(err)}`);
      return;
    }
    stream.write(frame(answer));
  }

  const byPath = new Map<string, Method>([
    [METHOD_PATHS.shouldRateLimit, { kind: Kind.Unary, handle: shouldRateLimit }],
    [METHOD_PATHS.healthCheck, { kind: Kind.Unary, handle: healthCheck }],
    [METHOD_PATHS.healthWatch, { kind: Kind.ServerStream, handle: healthWatch }],
  ]);
  for (const path of reflection?.paths ?? []) {
    byPath.set(path, { kind: Kind.Bidi, handle: reflectionMessage });
  }
  const rlqs = options.quota === undefined ? undefined : createRlqsMethod(options.quota, logger);
  if (rlqs !== undefined) byPath.set(METHOD_PATHS.streamRateLimitQuotas, rlqs.method);
  return {
    byPath,
    recheckWatches() {
      if (closing()) rlqs?.endAll();
      // A copy: a check that ends its stream (closing) leaves the set.
      for (const check of [...watchers]) check();
    },
  };
}

/** Answer ShouldRateLimit with `response`, unless the call ended meanwhile (deadline, reset). */
function answerRls(call: Call, response: RateLimitResponse, logger: Logger): void {
  if (call.done) return;
  let buf: Buffer;
  try {
    buf = encodeRateLimitResponse(response, PREFIX_BYTES);
  } catch (err) {
    failWith(
      call,
      new SluiceError('INTERNAL', `cannot encode the response: ${(err as Error).message}`),
      logger,
    );
    return;
  }
  writePrefix(buf, buf.length - PREFIX_BYTES);
  sendUnary(call, buf);
}

/** Fail the call with the status `err` maps to (transport/status.ts). */
function failWith(call: Call, err: unknown, logger: Logger): void {
  const { code, details } = toCallError(err, logger);
  fail(call, code, details);
}

/** The service name a HealthCheckRequest asks about, or `undefined` after failing the call. */
function healthName(call: Call, message: Buffer): string | undefined {
  try {
    return decodeHealthCheckRequest(message);
  } catch (err) {
    fail(call, GrpcStatus.INVALID_ARGUMENT, malformedHealthText(err));
    return undefined;
  }
}

/**
 * The status message of a HealthCheckRequest that does not decode. It names the failure
 * `DecodeError: <reason>`, as it did when the codec had an error class of that name, so the
 * text on the wire stays what it was.
 */
function malformedHealthText(err: unknown): string {
  const reason = SluiceError.is(err) ? `DecodeError: ${err.message}` : String(err);
  return `malformed HealthCheckRequest: ${reason}`;
}
