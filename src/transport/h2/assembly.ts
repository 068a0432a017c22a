/**
 * The assembly of the lean server's calls: from a stream's DATA to the handler's messages. It
 * opens a call (its budget entry, its `grpc-timeout` deadline), reads the 5-byte prefixes, checks
 * the receive size limit from the prefix before the message is read, collects messages split
 * across DATA frames, inflates compressed ones, holds what unfinished requests buffer in the
 * connection's and the process's budgets, pauses a streaming call whose client does not read its
 * answers, and sweeps unfinished calls for `GRPC_REQUEST_TIMEOUT`.
 *
 * One per server. The listeners it attaches are created once, with the assembler, and find their
 * call on the stream: nothing is allocated per call but the call record, or per message but the
 * buffer of a message split across frames.
 */
import type http2 from 'node:http2';
import zlib from 'node:zlib';
import type { Logger } from '../../logging/logger.js';
import type { RefusalReason, TransportMetricsSink } from '../../metrics/metrics.js';
import {
  MAX_TIMER_MS,
  STREAM_OVERHEAD_BYTES,
  sweepIntervalMs,
  type GrpcLimits,
  type RequestBudget,
} from '../limits.js';
import { GrpcStatus, type GrpcStatusCode } from '../status.js';
import { ACCEPT_ENCODING, fail, finishOk } from './answers.js';
import {
  CALL,
  CONNECTION,
  CallLedger,
  Encoding,
  Kind,
  type BudgetRefusal,
  type Call,
  type CallStream,
  type ConnectionSession,
  type Method,
} from './call.js';
import { PREFIX_BYTES, parseGrpcTimeout } from './framing.js';

/** Options for {@link CallAssembler}. */
export interface CallAssemblerOptions {
  /** Largest accepted request message (after decompression), bytes. */
  readonly maxReceiveMessageBytes: number;
  /** `maxConnectionBufferBytes` and `requestTimeoutMs` are read. */
  readonly limits: GrpcLimits;
  /** The process-wide budget of unfinished requests' bytes. */
  readonly budget: RequestBudget;
  /** Where refusals are counted. */
  readonly metrics: TransportMetricsSink;
  /** Where refusals are logged (debug). */
  readonly logger: Logger;
  /** Keep each call's request headers for the service (tracing). */
  readonly traceHeaders: boolean;
}

/** The listeners of a call's stream (`this` is the stream). */
interface StreamListeners {
  readonly onData: (this: http2.ServerHttp2Stream, chunk: Buffer) => void;
  readonly onEnd: (this: http2.ServerHttp2Stream) => void;
  readonly onDrain: (this: http2.ServerHttp2Stream) => void;
}

/** Which setting each budget refusal names in the status message. */
const BUDGET_SETTING: Readonly<Record<BudgetRefusal, string>> = {
  connection_buffer: 'GRPC_MAX_CONNECTION_BUFFER_BYTES',
  total_buffer: 'MAX_REQUEST_BUFFER_BYTES',
};

/** Turns each call's DATA into request messages for its handler, within the budgets. */
export class CallAssembler {
  private readonly maxReceiveMessageBytes: number;
  private readonly requestTimeoutMs: number;
  private readonly metrics: TransportMetricsSink;
  private readonly logger: Logger;
  private readonly traceHeaders: boolean;
  private readonly ledger: CallLedger;
  /** Options of `zlib`'s inflate: the receive limit bounds the decompressed size. */
  private readonly inflateOptions: zlib.ZlibOptions;
  /** A monotonic clock read by the sweep only, ms; calls start at its last value. */
  private coarseNowMs = performance.now();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** The stream listeners every call shares. */
  private readonly listeners: StreamListeners;

  constructor(options: CallAssemblerOptions) {
    this.maxReceiveMessageBytes = options.maxReceiveMessageBytes;
    this.requestTimeoutMs = options.limits.requestTimeoutMs;
    this.metrics = options.metrics;
    this.logger = options.logger;
    this.traceHeaders = options.traceHeaders;
    this.ledger = new CallLedger(options.budget, options.limits.maxConnectionBufferBytes);
    this.inflateOptions = { maxOutputLength: options.maxReceiveMessageBytes };
    this.listeners = CallAssembler.listenersOf(this);
  }

  /**
   * The stream listeners the calls of `assembler` share, made once with it: `this` is the stream,
   * whose call is under {@link CALL}.
   */
  private static listenersOf(assembler: CallAssembler): StreamListeners {
    return {
      onData(this: http2.ServerHttp2Stream, chunk: Buffer): void {
        assembler.data((this as CallStream)[CALL]!, chunk);
      },
      onEnd(this: http2.ServerHttp2Stream): void {
        assembler.end((this as CallStream)[CALL]!);
      },
      onDrain(this: http2.ServerHttp2Stream): void {
        assembler.drain(this, (this as CallStream)[CALL]!);
      },
    };
  }

  /**
   * Open a call of `method` on `stream` (its headers checked by the server): count it in the
   * budgets, arm its deadline and read its DATA from now on. A call the budgets or a malformed
   * `grpc-timeout` refuse is answered at once.
   */
  open(
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    path: string,
    method: Method,
  ): void {
    const kind = method.kind;
    const session = stream.session as ConnectionSession;
    let connection = session[CONNECTION];
    if (connection === undefined) connection = session[CONNECTION] = { held: 0 };
    const call: Call = {
      stream,
      kind,
      handle: method.handle,
      path,
      encoding: encodingOf(headers['grpc-encoding']),
      connection,
      ledger: this.ledger,
      acc: undefined,
      accLength: 0,
      need: PREFIX_BYTES,
      held: 0,
      startedMs: this.coarseNowMs,
      closeHooked: false,
      paused: false,
      ended: false,
      message: undefined,
      messages: 0,
      done: false,
      timer: undefined,
      unwatch: undefined,
      headers: this.traceHeaders ? headers : undefined,
    };
    if (!this.hold(call, STREAM_OVERHEAD_BYTES)) return;
    if (method.untimed !== true) this.ledger.unfinished.add(call);
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
    stream.on('data', this.listeners.onData);
    stream.on('end', this.listeners.onEnd);
    if (call.timer !== undefined || kind !== Kind.Unary) hookClose(call);
  }

  /** Start sweeping unfinished calls (at listen). */
  start(): void {
    const requestTimeoutMs = this.requestTimeoutMs;
    this.sweepTimer = setInterval(
      () => this.sweep(),
      requestTimeoutMs > 0 ? sweepIntervalMs(requestTimeoutMs) : 1_000,
    );
    this.sweepTimer.unref();
  }

  /** Stop sweeping (at close). */
  stop(): void {
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
  }

  /** Fail requests older than GRPC_REQUEST_TIMEOUT; forget those whose stream is gone. */
  private sweep(): void {
    const requestTimeoutMs = this.requestTimeoutMs;
    const coarseNowMs = (this.coarseNowMs = performance.now());
    for (const call of this.ledger.unfinished) {
      const stream = call.stream;
      if (stream.destroyed || stream.closed) {
        call.done = true;
        this.ledger.release(call);
      } else if (requestTimeoutMs > 0 && coarseNowMs - call.startedMs >= requestTimeoutMs) {
        this.refuse(
          call,
          'request_timeout',
          GrpcStatus.DEADLINE_EXCEEDED,
          `request not received whole within GRPC_REQUEST_TIMEOUT (${requestTimeoutMs} ms)`,
        );
      }
    }
  }

  // ---- budgets ---------------------------------------------------------------------------

  /**
   * Count `bytes` more against the call's connection and the process; when either bound would
   * be passed, fail the call RESOURCE_EXHAUSTED (counted) and return false.
   */
  private hold(call: Call, bytes: number): boolean {
    const refusal = this.ledger.hold(call, bytes);
    if (refusal === undefined) return true;
    this.refuse(
      call,
      refusal,
      GrpcStatus.RESOURCE_EXHAUSTED,
      `server busy: unfinished requests hold ${BUDGET_SETTING[refusal]}; retry later`,
    );
    return false;
  }

  private refuse(call: Call, reason: RefusalReason, code: GrpcStatusCode, details: string): void {
    this.metrics.refused(reason);
    this.logger.debug({ reason, path: call.path }, 'gRPC request refused by a limit');
    fail(call, code, details);
  }

  // ---- messages --------------------------------------------------------------------------

  private data(call: Call, chunk: Buffer): void {
    if (call.done) return;
    let bytes = chunk;
    if (call.acc !== undefined) {
      const length = call.accLength + chunk.length;
      if (length > call.acc.length && !this.grow(call, length)) return;
      const acc = call.acc;
      chunk.copy(acc, call.accLength);
      call.accLength = length;
      if (length < call.need) return;
      bytes = acc.subarray(0, length);
      call.acc = undefined;
      // A streaming call's messages are handled and dropped; a unary call keeps its message
      // (a view of this buffer) until the request ends, so it stays counted until then.
      if (call.kind === Kind.Bidi) this.ledger.unhold(call, acc.length);
      this.parse(call, bytes, true);
      return;
    }
    this.parse(call, bytes, false);
  }

  /**
   * Handle every whole message in `bytes`; keep the rest for the next chunk. `counted`: `bytes`
   * is a former `acc`, already counted in the budgets.
   */
  private parse(call: Call, bytes: Buffer, counted: boolean): void {
    const maxReceiveMessageBytes = this.maxReceiveMessageBytes;
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
        const inflated = this.inflate(call, flag, message);
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
          if (offset < bytes.length && !this.stash(call, bytes, offset)) return;
          call.paused = true;
          call.stream.pause();
          call.stream.once('drain', this.listeners.onDrain);
          return;
        }
      } else if (call.messages === 1) {
        if (!counted && !this.hold(call, message.length)) return;
        call.message = message;
      } else {
        fail(call, GrpcStatus.UNIMPLEMENTED, `${call.path} takes one request message`);
        return;
      }
    }
    if (offset < bytes.length) this.stash(call, bytes, offset);
  }

  /** Keep `bytes[offset..]` (an unfinished message) in a new `acc`; false if that failed the call. */
  private stash(call: Call, bytes: Buffer, offset: number): boolean {
    const n = bytes.length - offset;
    const need = n >= PREFIX_BYTES ? PREFIX_BYTES + bytes.readUInt32BE(offset + 1) : PREFIX_BYTES;
    const capacity = Math.max(n, Math.min(need, Math.max(2 * n, 1024)));
    if (!this.hold(call, capacity)) return false;
    const acc = Buffer.allocUnsafe(capacity);
    bytes.copy(acc, 0, offset);
    call.acc = acc;
    call.accLength = n;
    call.need = need;
    hookClose(call);
    return true;
  }

  /** Make `acc` hold at least `length` bytes (doubling, up to the message's size). */
  private grow(call: Call, length: number): boolean {
    const old = call.acc!;
    const capacity =
      length >= call.need ? length : Math.min(call.need, Math.max(length, 2 * old.length));
    if (!this.hold(call, capacity - old.length)) return false;
    const acc = Buffer.allocUnsafe(capacity);
    old.copy(acc, 0, 0, call.accLength);
    call.acc = acc;
    return true;
  }

  /** A paused streaming call's answers were sent: read its requests again. */
  private drain(stream: http2.ServerHttp2Stream, call: Call): void {
    if (call.done) return;
    call.paused = false;
    stream.resume();
    const acc = call.acc;
    if (acc !== undefined && call.accLength >= call.need) {
      const bytes = acc.subarray(0, call.accLength);
      call.acc = undefined;
      this.ledger.unhold(call, acc.length);
      this.parse(call, bytes, false);
    }
    if (call.ended && !call.paused && !call.done) this.endRequest(call);
  }

  /** The decompressed message, or `undefined` after failing the call. */
  private inflate(call: Call, flag: number, message: Buffer): Buffer | undefined {
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
      return call.encoding === Encoding.Gzip
        ? zlib.gunzipSync(message, this.inflateOptions)
        : zlib.inflateSync(message, this.inflateOptions);
    } catch (err) {
      const tooLarge = (err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
      if (tooLarge) {
        fail(
          call,
          GrpcStatus.RESOURCE_EXHAUSTED,
          `decompressed message larger than max (${this.maxReceiveMessageBytes}; GRPC_MAX_RECEIVE_MESSAGE_LENGTH)`,
        );
      } else {
        fail(call, GrpcStatus.INTERNAL, `cannot decompress message: ${(err as Error).message}`);
      }
      return undefined;
    }
  }

  // ---- the end of the request ------------------------------------------------------------

  private end(call: Call): void {
    if (call.done) return;
    if (call.paused) {
      // Requests are still stashed: the end counts once they are handled (drain).
      call.ended = true;
      return;
    }
    this.endRequest(call);
  }

  private endRequest(call: Call): void {
    if (call.acc !== undefined) {
      fail(call, GrpcStatus.INTERNAL, 'request ended inside a message');
      return;
    }
    this.ledger.release(call);
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
}

/** The {@link Encoding} a `grpc-encoding` header names. */
function encodingOf(header: string | string[] | undefined): Encoding {
  if (header === undefined || header === 'identity') return Encoding.Identity;
  if (header === 'gzip') return Encoding.Gzip;
  if (header === 'deflate') return Encoding.Deflate;
  return Encoding.Unsupported;
}

/** Watch for the stream's close (streaming calls, calls with a deadline or a stashed message). */
function hookClose(call: Call): void {
  if (call.closeHooked) return;
  call.closeHooked = true;
  call.stream.on('close', onClose);
}

/** The stream closed (answered, reset or its connection gone): give back what the call holds. */
function onClose(this: http2.ServerHttp2Stream): void {
  const call = (this as CallStream)[CALL];
  if (call === undefined) return;
  call.done = true;
  call.ledger.release(call);
  if (call.timer !== undefined) clearTimeout(call.timer);
  call.timer = undefined;
  call.unwatch?.();
  call.unwatch = undefined;
}

function onDeadline(call: Call): void {
  call.timer = undefined;
  if (call.done) return;
  fail(call, GrpcStatus.DEADLINE_EXCEEDED, 'deadline exceeded before the answer was ready');
}
