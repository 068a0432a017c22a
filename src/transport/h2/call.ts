/**
 * One call of the lean server as a plain record, and the ledger of the bytes calls hold. The
 * record is kept on its stream (under {@link CALL}), so the listeners every call shares find it
 * without a closure per call; the assembly (./assembly.ts), the answers (./answers.ts) and the
 * handlers of the method table (./methods.ts) all work on it.
 */
import type http2 from 'node:http2';
import type { RequestBudget } from '../limits.js';

/** How a call's request messages are compressed (`grpc-encoding`). */
export const enum Encoding {
  /** None (no `grpc-encoding`, or `identity`): a compressed message fails the call. */
  Identity,
  /** `gzip`. */
  Gzip,
  /** `deflate` (zlib format). */
  Deflate,
  /** Named in `grpc-encoding` but not supported: fails the call if a message is compressed. */
  Unsupported,
}

/** What kind of method a call is, which decides when its handler runs. */
export const enum Kind {
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
 * A handler answers through `sendUnary`, `finishOk` or `fail` (./answers.ts).
 */
export interface Method {
  /** When the handler runs. */
  readonly kind: Kind;
  /** Handle one request message of `call` (decompressed, without its 5-byte prefix). */
  readonly handle: (call: Call, message: Buffer) => void;
  /**
   * A stream whose request never ends by design (RLQS): exempt from `GRPC_REQUEST_TIMEOUT`.
   * Its messages are still bounded by the receive limit and the byte budgets.
   */
  readonly untimed?: boolean;
}

/** The state of one call; kept on its stream so the shared listeners need no closures. */
export interface Call {
  /** The call's HTTP/2 stream. */
  readonly stream: http2.ServerHttp2Stream;
  /** The method's kind, from the table. */
  readonly kind: Kind;
  /** The method's handler, from the table. */
  readonly handle: Method['handle'];
  /** The request's `:path`. */
  readonly path: string;
  /** How its request messages are compressed. */
  readonly encoding: Encoding;
  /** The connection's accounting. */
  readonly connection: Connection;
  /** The server's ledger, which this call's bytes are counted in. */
  readonly ledger: CallLedger;
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

/** Where a stream keeps its call. */
export const CALL = Symbol('sluice.call');
/** A stream with its call (set once the call is open). */
export type CallStream = http2.ServerHttp2Stream & { [CALL]?: Call };

/** What one connection's unfinished requests hold. */
export interface Connection {
  /** Bytes, at most `GRPC_MAX_CONNECTION_BUFFER_BYTES`. */
  held: number;
}

/** Where a session keeps its {@link Connection}. */
export const CONNECTION = Symbol('sluice.connection');
/** A session with its accounting (set when the server admits it, or by its first call). */
export type ConnectionSession = http2.ServerHttp2Session & { [CONNECTION]?: Connection };

/** Which bound a {@link CallLedger.hold} would pass. */
export type BudgetRefusal = 'connection_buffer' | 'total_buffer';

/**
 * The bytes calls hold, counted three ways: per call, per connection (at most
 * `maxConnectionBufferBytes`) and in the process-wide {@link RequestBudget}; and the calls whose
 * request has not ended, which the assembly's sweep checks. One per server.
 */
export class CallLedger {
  /**
   * Calls whose request has not ended: checked by a sweep for `GRPC_REQUEST_TIMEOUT` and for
   * streams closed without a 'close' listener (their budget is given back).
   */
  readonly unfinished = new Set<Call>();

  /**
   * @param budget the process-wide budget (`MAX_REQUEST_BUFFER_BYTES`).
   * @param maxConnectionBufferBytes the bound of one connection (`GRPC_MAX_CONNECTION_BUFFER_BYTES`).
   */
  constructor(
    private readonly budget: RequestBudget,
    private readonly maxConnectionBufferBytes: number,
  ) {}

  /**
   * Count `bytes` more against the call, its connection and the process; when either bound
   * would be passed, count nothing and return the bound's name.
   */
  hold(call: Call, bytes: number): BudgetRefusal | undefined {
    const connection = call.connection;
    if (connection.held + bytes > this.maxConnectionBufferBytes) return 'connection_buffer';
    if (!this.budget.take(bytes)) return 'total_buffer';
    connection.held += bytes;
    call.held += bytes;
    return undefined;
  }

  /** Give back `bytes` of what the call holds. */
  unhold(call: Call, bytes: number): void {
    call.held -= bytes;
    call.connection.held -= bytes;
    this.budget.release(bytes);
  }

  /** The request is over (ended, failed or closed): give back all it holds. */
  release(call: Call): void {
    this.unfinished.delete(call);
    call.acc = undefined;
    if (call.held !== 0) this.unhold(call, call.held);
  }
}
