/**
 * The lean gRPC server (`GRPC_SERVER=lean`, the default): gRPC over HTTP/2 written directly on
 * `node:http2`, serving RateLimitService/ShouldRateLimit, grpc.health.v1.Health (Check and Watch)
 * and server reflection on one port. It speaks exactly these methods, with the hand-written codec
 * of ./codec.ts, so a call costs one decode, the service call and one encode.
 *
 * Each method registers its handler in one table by `:path` (as grpc-js registers handlers), so
 * serving another RPC is one more entry: ShouldRateLimit, health Check and Watch, and each
 * reflection path. A path not in the table is answered UNIMPLEMENTED.
 *
 * Protocol points handled here: the 5-byte message prefix; `grpc-encoding` identity, gzip and
 * deflate for requests (others: UNIMPLEMENTED with `grpc-accept-encoding`); the receive size limit
 * (RESOURCE_EXHAUSTED, checked from the prefix before the message is read); `grpc-timeout`
 * (DEADLINE_EXCEEDED when the answer is not ready in time); statuses in trailers, or in a
 * Trailers-Only response for failures; the byte budgets of unfinished requests; graceful shutdown
 * with a grace period. Keepalive, connection age and idle limits, the two-step GOAWAY and the
 * client SAN check are the connection policy's (./connection-policy.ts).
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { SluiceError } from '../../errors.js';
import type { Logger } from '../../logging/logger.js';
import type { RateLimitResponse } from '../../model.js';
import type { HealthSignal } from '../../service/health.js';
import type { RateLimitService } from '../../service/rate-limit-service.js';
import { METHOD_PATHS, RLS_SERVICE_NAME, type ServiceServer } from '../rpc.js';
import { GrpcStatus, toCallError, unmarshalErrorText, type GrpcStatusCode } from '../status.js';
import {
  SERVING_STATUS,
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
  encodeRateLimitResponse,
} from './codec.js';
import { createConnectionPolicy, type ConnectionLifetimeOptions } from './connection-policy.js';
import {
  DEFAULT_GRPC_LIMITS,
  DEFAULT_REQUEST_BUFFER_BYTES,
  MAX_TIMER_MS,
  NO_TRANSPORT_METRICS,
  STREAM_OVERHEAD_BYTES,
  createRequestBudget,
  sweepIntervalMs,
  type GrpcLimits,
  type RequestBudget,
} from '../limits.js';
import type { RefusalReason, TransportMetricsSink } from '../../metrics/metrics.js';
import {
  PREFIX_BYTES,
  encodeGrpcMessage,
  frame,
  parseGrpcTimeout,
  writePrefix,
} from './framing.js';

/** Answers server reflection requests (one request message in, one response message out). */
export interface ReflectionHandler {
  /** The method paths it serves (`/grpc.reflection.v1.ServerReflection/ServerReflectionInfo`...). */
  readonly paths: readonly string[];
  /** The encoded ServerReflectionResponse to one encoded ServerReflectionRequest on `path`. */
  answer(path: string, request: Buffer): Uint8Array;
}

/** Options for {@link createLeanServer}. */
export interface LeanServerOptions extends ConnectionLifetimeOptions {
  /** The service to expose. */
  readonly service: RateLimitService;
  /** Module logger. */
  readonly logger: Logger;
  /** Largest accepted request message (after decompression), bytes. */
  readonly maxReceiveMessageBytes: number;
  /**
   * The instance's health (config loaded, store healthy, not draining); when `undefined` the
   * server reports SERVING from listen until close.
   */
  readonly health?: HealthSignal | undefined;
  /** Server reflection; `undefined` answers UNIMPLEMENTED for the reflection methods. */
  readonly reflection?: ReflectionHandler | undefined;
  /** Hand each call's headers to the service (tracing reads the caller's trace from them). */
  readonly traceHeaders?: boolean;
  /** Connections, streams, bytes and time a client may hold (default {@link DEFAULT_GRPC_LIMITS}). */
  readonly limits?: GrpcLimits | undefined;
  /**
   * The process-wide budget of bytes unfinished requests hold (`MAX_REQUEST_BUFFER_BYTES`),
   * shared with the HTTP server; default: one of its own with the default bound.
   */
  readonly budget?: RequestBudget | undefined;
  /** Where refusals are counted (default: nowhere). */
  readonly metrics?: TransportMetricsSink | undefined;
}

/** Request compression the server accepts, in the form `grpc-accept-encoding` lists them. */
const ACCEPT_ENCODING = 'identity,deflate,gzip';

const { NGHTTP2_CANCEL } = http2.constants;

/** Headers of every successful response; Node copies them, so one object serves all calls. */
const RESPONSE_HEADERS: http2.OutgoingHttpHeaders = {
  ':status': 200,
  'content-type': 'application/grpc',
  'grpc-accept-encoding': ACCEPT_ENCODING,
};
const OK_TRAILERS: http2.OutgoingHttpHeaders = { 'grpc-status': '0' };
/**
 * Response options. `sendDate: false` (a Node option its types do not list) leaves out the `date`
 * header, which gRPC does not use and which costs a header per response.
 */
const RESPOND_WITH_TRAILERS = {
  waitForTrailers: true,
  sendDate: false,
} as http2.ServerStreamResponseOptions;
const RESPOND_AND_END = { endStream: true, sendDate: false } as http2.ServerStreamResponseOptions;

/** How a call's request messages are compressed (`grpc-encoding`). */
const enum Encoding {
  Identity,
  Gzip,
  Deflate,
  /** Named in `grpc-encoding` but not supported: fails the call if a message is compressed. */
  Unsupported,
}

/** What kind of method a call is, which decides when its handler runs. */
const enum Kind {
  /** One request, one response: the handler runs at the end of the request. */
  Unary,
  /** One request, a stream of responses: the handler runs at the end of the request. */
  ServerStream,
  /** Messages both ways: the handler runs for every request message. */
  Bidi,
}

/**
 * One method in the table: its kind and its handler. A unary or server-streaming handler gets
 * the one request message when the request ends; a bidi handler gets each message as it arrives.
 * A handler answers through the server's `sendUnary`, `finishOk` or `fail`.
 */
interface Method {
  readonly kind: Kind;
  readonly handle: (call: Call, message: Buffer) => void;
}

/** The state of one call; kept on its stream so the shared listeners need no closures. */
interface Call {
  readonly stream: http2.ServerHttp2Stream;
  readonly kind: Kind;
  /** The method's handler, from the table. */
  readonly handle: Method['handle'];
  readonly path: string;
  readonly encoding: Encoding;
  /** The connection's accounting. */
  readonly connection: Connection;
  /**
   * Bytes received that do not yet form a whole message, in `acc[0, accLength)`; the buffer
   * grows by doubling up to the message's size, so collecting a message costs time linear in
   * its size whatever the DATA frames' sizes.
   */
  acc: Buffer | undefined;
  /** Bytes used in `acc`. */
  accLength: number;
  /** Bytes `acc` must hold before parsing can make progress (the prefix, or the whole message). */
  need: number;
  /** Bytes this call holds in its connection's and the process's budgets. */
  held: number;
  /** When the request's headers arrived (the coarse clock), for `GRPC_REQUEST_TIMEOUT`. */
  readonly startedMs: number;
  /** A 'close' listener is attached. */
  closeHooked: boolean;
  /** Reading is paused until the client reads the answers (streaming calls). */
  paused: boolean;
  /** The request ended while paused; handled once the rest is read. */
  ended: boolean;
  /** The request message of a unary or server-streaming call. */
  message: Buffer | undefined;
  /** Request messages received. */
  messages: number;
  /** An answer (or failure) has been sent; nothing more is sent or handled. */
  done: boolean;
  /** The deadline timer, when `grpc-timeout` was sent. */
  timer: NodeJS.Timeout | undefined;
  /** Stops a Watch call's subscription. */
  unwatch: (() => void) | undefined;
  /** The request headers, kept only when tracing is on (`traceHeaders`). */
  readonly headers: http2.IncomingHttpHeaders | undefined;
}

const CALL = Symbol('sluice.call');
type CallStream = http2.ServerHttp2Stream & { [CALL]?: Call };

/** What one connection's unfinished requests hold. */
interface Connection {
  /** Bytes, at most `GRPC_MAX_CONNECTION_BUFFER_BYTES`. */
  held: number;
}

const CONNECTION = Symbol('sluice.connection');
type ConnectionSession = http2.ServerHttp2Session & { [CONNECTION]?: Connection };

/** Which setting each budget refusal names in the status message. */
const BUDGET_SETTING: Readonly<Record<'connection_buffer' | 'total_buffer', string>> = {
  connection_buffer: 'GRPC_MAX_CONNECTION_BUFFER_BYTES',
  total_buffer: 'MAX_REQUEST_BUFFER_BYTES',
};

/** Create the lean server (not yet listening). */
export function createLeanServer(options: LeanServerOptions): ServiceServer {
  const { service, logger, maxReceiveMessageBytes, health, reflection } = options;
  const traceHeaders = options.traceHeaders === true;
  const limits = options.limits ?? DEFAULT_GRPC_LIMITS;
  const budget = options.budget ?? createRequestBudget(DEFAULT_REQUEST_BUFFER_BYTES);
  const metrics = options.metrics ?? NO_TRANSPORT_METRICS;
  const { maxConnectionBufferBytes, requestTimeoutMs } = limits;

  let listening = false;
  let closing = false;
  const sessions = new Set<http2.ServerHttp2Session>();
  /** Re-check functions of the Watch calls open now. */
  const watchers = new Set<() => void>();
  /**
   * Calls whose request has not ended: checked by a sweep for `GRPC_REQUEST_TIMEOUT` and for
   * streams closed without a 'close' listener (their budget is given back).
   */
  const unfinished = new Set<Call>();
  /** A monotonic clock read by the sweep only, ms; calls start at its last value. */
  let coarseNowMs = performance.now();
  let sweepTimer: NodeJS.Timeout | undefined;

  const serving = (): boolean => listening && !closing && (health?.serving() ?? true);

  const policy = createConnectionPolicy({
    logger,
    keepaliveTimeMs: options.keepaliveTimeMs,
    keepaliveTimeoutMs: options.keepaliveTimeoutMs,
    idleTimeoutMs: options.idleTimeoutMs,
    maxConnectionAgeMs: options.maxConnectionAgeMs,
    maxConnectionAgeGraceMs: options.maxConnectionAgeGraceMs,
    tls: options.tls,
    limits,
    metrics,
  });
  const server = policy.server;
  server.on('session', onSession);
  server.on('stream', onStream);
  // Errors of one connection or stream concern that peer only; the server keeps serving.
  server.on('sessionError', (err: Error) => logger.debug({ err }, 'HTTP/2 session error'));

  // ---- the method table ------------------------------------------------------------------

  /** Every method this server serves, by `:path`; any other path is answered UNIMPLEMENTED. */
  const methods = new Map<string, Method>([
    [METHOD_PATHS.shouldRateLimit, { kind: Kind.Unary, handle: shouldRateLimit }],
    [METHOD_PATHS.healthCheck, { kind: Kind.Unary, handle: healthCheck }],
    [METHOD_PATHS.healthWatch, { kind: Kind.ServerStream, handle: healthWatch }],
  ]);
  for (const path of reflection?.paths ?? []) {
    methods.set(path, { kind: Kind.Bidi, handle: reflectionMessage });
  }

  // ---- connections -----------------------------------------------------------------------

  function onSession(session: http2.ServerHttp2Session): void {
    if (!policy.admit(session)) return;
    (session as ConnectionSession)[CONNECTION] = { held: 0 };
    sessions.add(session);
    if (closing) policy.goAway(session);
    policy.manage(session);
    session.once('close', () => sessions.delete(session));
  }

  // ---- calls -----------------------------------------------------------------------------

  function onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    stream.on('error', ignoreStreamError);
    if (headers[':method'] !== 'POST') {
      stream.respond({ ':status': 405, allow: 'POST' }, RESPOND_AND_END);
      stream.resume();
      return;
    }
    const contentType = headers['content-type'];
    if (typeof contentType !== 'string' || !isGrpcContentType(contentType)) {
      stream.respond({ ':status': 415 }, RESPOND_AND_END);
      stream.resume();
      return;
    }
    const path = headers[':path'] ?? '';
    const method = methods.get(path);
    if (method === undefined) {
      trailersOnly(stream, GrpcStatus.UNIMPLEMENTED, `unknown method ${path}`);
      return;
    }
    const kind = method.kind;

    const encodingHeader = headers['grpc-encoding'];
    let encoding = Encoding.Identity;
    if (encodingHeader !== undefined && encodingHeader !== 'identity') {
      if (encodingHeader === 'gzip') encoding = Encoding.Gzip;
      else if (encodingHeader === 'deflate') encoding = Encoding.Deflate;
      else encoding = Encoding.Unsupported;
    }

    const session = stream.session as ConnectionSession;
    let connection = session[CONNECTION];
    if (connection === undefined) connection = session[CONNECTION] = { held: 0 };
    const call: Call = {
      stream,
      kind,
      handle: method.handle,
      path,
      encoding,
      connection,
      acc: undefined,
      accLength: 0,
      need: PREFIX_BYTES,
      held: 0,
      startedMs: coarseNowMs,
      closeHooked: false,
      paused: false,
      ended: false,
      message: undefined,
      messages: 0,
      done: false,
      timer: undefined,
      unwatch: undefined,
      headers: traceHeaders ? headers : undefined,
    };
    if (!hold(call, STREAM_OVERHEAD_BYTES)) return;
    unfinished.add(call);
    const timeoutMs = parseGrpcTimeout(headers['grpc-timeout']);
    if (timeoutMs !== undefined) {
      if (Number.isNaN(timeoutMs)) {
        fail(
          call,
          GrpcStatus.INTERNAL,
          `malformed grpc-timeout ${String(headers['grpc-timeout'])}`,
        );
        return;
      }
      // A deadline longer than a timer holds (597 hours and up) would fire at once.
      call.timer = setTimeout(onDeadline, Math.min(timeoutMs, MAX_TIMER_MS), call);
    }
    (stream as CallStream)[CALL] = call;
    stream.on('data', onData);
    stream.on('end', onEnd);
    if (call.timer !== undefined || kind !== Kind.Unary) hookClose(call);
  }

  function hookClose(call: Call): void {
    if (call.closeHooked) return;
    call.closeHooked = true;
    call.stream.on('close', onClose);
  }

  // ---- budgets ---------------------------------------------------------------------------

  /**
   * Count `bytes` more against the call's connection and the process; when either bound would
   * be passed, fail the call RESOURCE_EXHAUSTED (counted) and return false.
   */
  function hold(call: Call, bytes: number): boolean {
    const connection = call.connection;
    let refusal: 'connection_buffer' | 'total_buffer' | undefined;
    if (connection.held + bytes > maxConnectionBufferBytes) refusal = 'connection_buffer';
    else if (!budget.take(bytes)) refusal = 'total_buffer';
    if (refusal === undefined) {
      connection.held += bytes;
      call.held += bytes;
      return true;
    }
    refuse(
      call,
      refusal,
      GrpcStatus.RESOURCE_EXHAUSTED,
      `server busy: unfinished requests hold ${BUDGET_SETTING[refusal]}; retry later`,
    );
    return false;
  }

  /** Give back `bytes` of what the call holds. */
  function unhold(call: Call, bytes: number): void {
    call.held -= bytes;
    call.connection.held -= bytes;
    budget.release(bytes);
  }

  /** The request is over (ended, failed or closed): give back all it holds. */
  function release(call: Call): void {
    unfinished.delete(call);
    call.acc = undefined;
    if (call.held !== 0) unhold(call, call.held);
  }

  function refuse(call: Call, reason: RefusalReason, code: GrpcStatusCode, details: string): void {
    metrics.refused(reason);
    logger.debug({ reason, path: call.path }, 'gRPC request refused by a limit');
    fail(call, code, details);
  }

  /** Fail requests older than GRPC_REQUEST_TIMEOUT; forget those whose stream is gone. */
  function sweep(): void {
    coarseNowMs = performance.now();
    for (const call of unfinished) {
      const stream = call.stream;
      if (stream.destroyed || stream.closed) {
        call.done = true;
        release(call);
      } else if (requestTimeoutMs > 0 && coarseNowMs - call.startedMs >= requestTimeoutMs) {
        refuse(
          call,
          'request_timeout',
          GrpcStatus.DEADLINE_EXCEEDED,
          `request not received whole within GRPC_REQUEST_TIMEOUT (${requestTimeoutMs} ms)`,
        );
      }
    }
  }

  function onDeadline(call: Call): void {
    call.timer = undefined;
    if (call.done) return;
    fail(call, GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded before the answer was ready');
  }

  function onClose(this: http2.ServerHttp2Stream): void {
    const call = (this as CallStream)[CALL];
    if (call === undefined) return;
    call.done = true;
    release(call);
    if (call.timer !== undefined) clearTimeout(call.timer);
    call.timer = undefined;
    call.unwatch?.();
    call.unwatch = undefined;
  }

  function onData(this: http2.ServerHttp2Stream, chunk: Buffer): void {
    const call = (this as CallStream)[CALL]!;
    if (call.done) return;
    let bytes = chunk;
    if (call.acc !== undefined) {
      const length = call.accLength + chunk.length;
      if (length > call.acc.length && !grow(call, length)) return;
      const acc = call.acc;
      chunk.copy(acc, call.accLength);
      call.accLength = length;
      if (length < call.need) return;
      bytes = acc.subarray(0, length);
      call.acc = undefined;
      // A streaming call's messages are handled and dropped; a unary call keeps its message
      // (a view of this buffer) until the request ends, so it stays counted until then.
      if (call.kind === Kind.Bidi) unhold(call, acc.length);
      parse(call, bytes, true);
      return;
    }
    parse(call, bytes, false);
  }

  /**
   * Handle every whole message in `bytes`; keep the rest for the next chunk. `counted`: `bytes`
   * is a former `acc`, already counted in the budgets.
   */
  function parse(call: Call, bytes: Buffer, counted: boolean): void {
    let offset = 0;
    while (bytes.length - offset >= PREFIX_BYTES) {
      const flag = bytes[offset]!;
      const length = bytes.readUInt32BE(offset + 1);
      if (length > maxReceiveMessageBytes) {
        fail(
          call,
          GrpcStatus.RESOURCE_EXHAUSTED,
          `received message larger than max (${length} vs. ${maxReceiveMessageBytes}; GRPC_MAX_RECEIVE_MESSAGE_LENGTH)`,
        );
        return;
      }
      const end = offset + PREFIX_BYTES + length;
      if (end > bytes.length) break;
      let message = bytes.subarray(offset + PREFIX_BYTES, end);
      offset = end;
      if (flag !== 0) {
        const inflated = inflate(call, flag, message);
        if (inflated === undefined) return;
        message = inflated;
      }
      call.messages++;
      if (call.kind === Kind.Bidi) {
        call.handle(call, message);
        if (call.done) return;
        if (call.stream.writableNeedDrain) {
          // The client is not reading the answers: read no more requests until it does, so
          // HTTP/2 flow control holds it back instead of answers piling up here.
          if (offset < bytes.length && !stash(call, bytes, offset)) return;
          call.paused = true;
          call.stream.pause();
          call.stream.once('drain', onDrain);
          return;
        }
      } else if (call.messages === 1) {
        if (!counted && !hold(call, message.length)) return;
        call.message = message;
      } else {
        fail(call, GrpcStatus.UNIMPLEMENTED, `${call.path} takes one request message`);
        return;
      }
    }
    if (offset < bytes.length) stash(call, bytes, offset);
  }

  /** Keep `bytes[offset..]` (an unfinished message) in a new `acc`; false if that failed the call. */
  function stash(call: Call, bytes: Buffer, offset: number): boolean {
    const n = bytes.length - offset;
    const need = n >= PREFIX_BYTES ? PREFIX_BYTES + bytes.readUInt32BE(offset + 1) : PREFIX_BYTES;
    const capacity = Math.max(n, Math.min(need, Math.max(2 * n, 1024)));
    if (!hold(call, capacity)) return false;
    const acc = Buffer.allocUnsafe(capacity);
    bytes.copy(acc, 0, offset);
    call.acc = acc;
    call.accLength = n;
    call.need = need;
    hookClose(call);
    return true;
  }

  /** Make `acc` hold at least `length` bytes (doubling, up to the message's size). */
  function grow(call: Call, length: number): boolean {
    const old = call.acc!;
    const capacity =
      length >= call.need ? length : Math.min(call.need, Math.max(length, 2 * old.length));
    if (!hold(call, capacity - old.length)) return false;
    const acc = Buffer.allocUnsafe(capacity);
    old.copy(acc, 0, 0, call.accLength);
    call.acc = acc;
    return true;
  }

  /** A paused streaming call's answers were sent: read its requests again. */
  function onDrain(this: http2.ServerHttp2Stream): void {
    const call = (this as CallStream)[CALL]!;
    if (call.done) return;
    call.paused = false;
    this.resume();
    const acc = call.acc;
    if (acc !== undefined && call.accLength >= call.need) {
      const bytes = acc.subarray(0, call.accLength);
      call.acc = undefined;
      unhold(call, acc.length);
      parse(call, bytes, false);
    }
    if (call.ended && !call.paused && !call.done) endRequest(call);
  }

  /** The decompressed message, or `undefined` after failing the call. */
  function inflate(call: Call, flag: number, message: Buffer): Buffer | undefined {
    if (flag !== 1) {
      fail(call, GrpcStatus.INTERNAL, `invalid compressed-flag ${flag} in message prefix`);
      return undefined;
    }
    if (call.encoding === Encoding.Identity) {
      fail(call, GrpcStatus.INTERNAL, 'compressed message without a grpc-encoding');
      return undefined;
    }
    if (call.encoding === Encoding.Unsupported) {
      fail(
        call,
        GrpcStatus.UNIMPLEMENTED,
        `message compressed with an unsupported grpc-encoding; use one of ${ACCEPT_ENCODING}`,
      );
      return undefined;
    }
    try {
      const zoptions = { maxOutputLength: maxReceiveMessageBytes };
      return call.encoding === Encoding.Gzip
        ? zlib.gunzipSync(message, zoptions)
        : zlib.inflateSync(message, zoptions);
    } catch (err) {
      const tooLarge = (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      if (tooLarge) {
        fail(
          call,
          GrpcStatus.RESOURCE_EXHAUSTED,
          `decompressed message larger than max (${maxReceiveMessageBytes}; GRPC_MAX_RECEIVE_MESSAGE_LENGTH)`,
        );
      } else {
        fail(call, GrpcStatus.INTERNAL, `cannot decompress message: ${(err as Error).message}`);
      }
      return undefined;
    }
  }

  function onEnd(this: http2.ServerHttp2Stream): void {
    const call = (this as CallStream)[CALL]!;
    if (call.done) return;
    if (call.paused) {
      // Requests are still stashed: the end counts once they are handled (onDrain).
      call.ended = true;
      return;
    }
    endRequest(call);
  }

  function endRequest(call: Call): void {
    if (call.acc !== undefined) {
      fail(call, GrpcStatus.INTERNAL, 'request ended inside a message');
      return;
    }
    release(call);
    if (call.kind === Kind.Bidi) {
      finishOk(call);
      return;
    }
    const message = call.message;
    if (message === undefined) {
      fail(call, GrpcStatus.UNIMPLEMENTED, `${call.path} needs one request message, got none`);
      return;
    }
    call.message = undefined;
    call.handle(call, message);
  }

  // ---- methods ---------------------------------------------------------------------------

  function shouldRateLimit(call: Call, message: Buffer): void {
    let request;
    try {
      request = decodeRateLimitRequest(message);
    } catch (err) {
      if (SluiceError.is(err, 'MALFORMED_MESSAGE', 'INVALID_UTF8')) {
        fail(call, GrpcStatus.INVALID_ARGUMENT, unmarshalErrorText(err.code === 'INVALID_UTF8'));
      } else {
        const { code, details } = toCallError(err, logger);
        fail(call, code, details);
      }
      return;
    }
    let answer: Promise<RateLimitResponse>;
    try {
      answer = service.shouldRateLimit(request, call.headers);
    } catch (err) {
      const { code, details } = toCallError(err, logger);
      fail(call, code, details);
      return;
    }
    answer.then(
      (response) => answerRls(call, response),
      (err: unknown) => {
        const { code, details } = toCallError(err, logger);
        fail(call, code, details);
      },
    );
  }

  function answerRls(call: Call, response: RateLimitResponse): void {
    if (call.done) return;
    let buf: Buffer;
    try {
      buf = encodeRateLimitResponse(response, PREFIX_BYTES);
    } catch (err) {
      const { code, details } = toCallError(
        new SluiceError('INTERNAL', `cannot encode the response: ${(err as Error).message}`),
        logger,
      );
      fail(call, code, details);
      return;
    }
    writePrefix(buf, buf.length - PREFIX_BYTES);
    sendUnary(call, buf);
  }

  /** Health status of `service` now (SERVICE_UNKNOWN for services this server does not have). */
  function healthStatus(name: string): number {
    if (name !== '' && name !== RLS_SERVICE_NAME) return SERVING_STATUS.SERVICE_UNKNOWN;
    return serving() ? SERVING_STATUS.SERVING : SERVING_STATUS.NOT_SERVING;
  }

  function healthCheck(call: Call, message: Buffer): void {
    let name: string;
    try {
      name = decodeHealthCheckRequest(message);
    } catch (err) {
      fail(call, GrpcStatus.INVALID_ARGUMENT, malformedHealthText(err));
      return;
    }
    const status = healthStatus(name);
    if (status === SERVING_STATUS.SERVICE_UNKNOWN) {
      fail(call, GrpcStatus.NOT_FOUND, `unknown service ${name}`);
      return;
    }
    sendUnary(call, frame(encodeHealthCheckResponse(status)));
  }

  function healthWatch(call: Call, message: Buffer): void {
    let name: string;
    try {
      name = decodeHealthCheckRequest(message);
    } catch (err) {
      fail(call, GrpcStatus.INVALID_ARGUMENT, malformedHealthText(err));
      return;
    }
    const stream = call.stream;
    stream.respond(RESPONSE_HEADERS, RESPOND_WITH_TRAILERS);
    stream.on('wantTrailers', sendOkTrailers);
    let last = -1;
    const check = (): void => {
      if (call.done) return;
      if (closing) {
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
    if (!stream.headersSent) {
      stream.respond(RESPONSE_HEADERS, RESPOND_WITH_TRAILERS);
      stream.on('wantTrailers', sendOkTrailers);
    }
    let answer: Uint8Array;
    try {
      answer = reflection!.answer(call.path, message);
    } catch (err) {
      fail(call, GrpcStatus.INVALID_ARGUMENT, `malformed reflection request: ${String(err)}`);
      return;
    }
    stream.write(frame(answer));
  }

  // ---- answers ---------------------------------------------------------------------------

  function sendUnary(call: Call, buf: Buffer): void {
    call.done = true;
    if (call.timer !== undefined) {
      clearTimeout(call.timer);
      call.timer = undefined;
    }
    const stream = call.stream;
    if (stream.destroyed || stream.closed) return;
    stream.respond(RESPONSE_HEADERS, RESPOND_WITH_TRAILERS);
    stream.on('wantTrailers', sendOkTrailers);
    stream.end(buf);
  }

  /** End a streaming call whose headers are sent, with status OK. */
  function finishOk(call: Call): void {
    call.done = true;
    call.unwatch?.();
    call.unwatch = undefined;
    const stream = call.stream;
    if (stream.destroyed || stream.closed) return;
    if (!stream.headersSent) {
      stream.respond(RESPONSE_HEADERS, RESPOND_WITH_TRAILERS);
      stream.on('wantTrailers', sendOkTrailers);
    }
    stream.end();
  }

  /** End a call with a failure status. */
  function fail(call: Call, code: GrpcStatusCode, details: string): void {
    call.done = true;
    release(call);
    if (call.timer !== undefined) {
      clearTimeout(call.timer);
      call.timer = undefined;
    }
    call.unwatch?.();
    call.unwatch = undefined;
    const stream = call.stream;
    if (stream.destroyed || stream.closed) return;
    if (stream.headersSent) {
      // A streaming call already answering: the status goes in the trailers.
      stream.removeListener('wantTrailers', sendOkTrailers);
      stream.once('wantTrailers', function (this: http2.ServerHttp2Stream) {
        this.sendTrailers({
          'grpc-status': String(code),
          'grpc-message': encodeGrpcMessage(details),
        });
      });
      stream.end();
      // A call paused for its client to read answers: what it still sends is dropped.
      stream.resume();
      return;
    }
    trailersOnly(stream, code, details);
  }

  // ---- lifecycle -------------------------------------------------------------------------

  return {
    listen(host, port) {
      return new Promise((resolve, reject) => {
        const onError = (err: Error): void => {
          reject(
            new SluiceError(
              'INVALID_SETTINGS',
              `cannot listen on ${host}:${port} (set GRPC_HOST/GRPC_PORT or --grpc-host/--grpc-port): ${err.message}`,
              { cause: err },
            ),
          );
        };
        server.once('error', onError);
        server.listen(port, host, () => {
          server.removeListener('error', onError);
          server.on('error', (err) => logger.error({ err }, 'gRPC server error'));
          listening = true;
          sweepTimer = setInterval(
            sweep,
            requestTimeoutMs > 0 ? sweepIntervalMs(requestTimeoutMs) : 1_000,
          );
          sweepTimer.unref();
          for (const check of watchers) check();
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    close(graceMs) {
      closing = true;
      policy.stop();
      if (sweepTimer !== undefined) clearInterval(sweepTimer);
      for (const check of [...watchers]) check();
      return new Promise<void>((resolve) => {
        if (!listening) {
          resolve();
          return;
        }
        let finished = false;
        const timer = setTimeout(() => {
          if (sessions.size > 0) {
            logger.warn({ graceMs }, 'in-flight calls did not finish in time; cancelling them');
          }
          for (const session of sessions) session.destroy(undefined, NGHTTP2_CANCEL);
        }, graceMs);
        timer.unref();
        server.close(() => {
          if (finished) return;
          finished = true;
          clearTimeout(timer);
          listening = false;
          resolve();
        });
        for (const session of sessions) policy.goAway(session);
      });
    },
  };
}

function isGrpcContentType(value: string): boolean {
  if (!value.startsWith('application/grpc')) return false;
  const rest = value.slice(16);
  return rest === '' || rest === '+proto' || rest.startsWith(';') || rest.startsWith('+proto;');
}

function ignoreStreamError(): void {
  // A peer's reset or a broken connection ends the call; nothing to answer any more.
}

function sendOkTrailers(this: http2.ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}

/** A response that is only headers: the status of a call that failed before any message. */
function trailersOnly(stream: http2.ServerHttp2Stream, code: number, details: string): void {
  if (stream.destroyed || stream.closed) return;
  stream.respond(
    {
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-accept-encoding': ACCEPT_ENCODING,
      'grpc-status': String(code),
      'grpc-message': encodeGrpcMessage(details),
    },
    RESPOND_AND_END,
  );
  // A body the client still sends is read and dropped, not left in the stream's buffer (a
  // call that had started reading keeps its 'data' listener, which drops it the same way).
  stream.resume();
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
