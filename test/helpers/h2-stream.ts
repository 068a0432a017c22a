/**
 * A stand-in for a `node:http2` server stream, for unit tests of the lean server's parts
 * (src/transport/h2/): it records what the server answers (headers, messages, trailers) and lets
 * the test emit DATA, the end of the request, 'drain' and 'close' exactly when it chooses. The
 * real streams are the integration tier's.
 */
import { EventEmitter } from 'node:events';
import type http2 from 'node:http2';
import { frame } from '../../src/transport/h2/framing.js';

/** A stand-in for a server stream: records the answer, emits what a client's stream would. */
export class FakeStream extends EventEmitter {
  readonly session: Record<symbol, unknown>;
  destroyed = false;
  closed = false;
  headersSent = false;
  writableNeedDrain = false;
  paused = false;
  ended = false;
  responseHeaders: http2.OutgoingHttpHeaders | undefined;
  trailers: http2.OutgoingHttpHeaders | undefined;
  readonly written: Buffer[] = [];
  private waitForTrailers = false;

  constructor(session: Record<symbol, unknown> = {}) {
    super();
    this.session = session;
  }

  /** What the server did that a real stream refuses (headers twice, writing after the end). */
  readonly misuse: string[] = [];

  respond(headers: http2.OutgoingHttpHeaders, options: http2.ServerStreamResponseOptions): void {
    if (this.headersSent) this.refuse('respond after the headers were sent');
    this.headersSent = true;
    this.responseHeaders = headers;
    this.waitForTrailers = options.waitForTrailers === true;
    if (options.endStream === true) this.ended = true;
  }

  write(chunk: Uint8Array): boolean {
    if (this.ended) this.refuse('write after end');
    this.written.push(Buffer.from(chunk));
    return true;
  }

  end(chunk?: Uint8Array): void {
    if (chunk !== undefined) this.written.push(Buffer.from(chunk));
    this.ended = true;
    if (this.waitForTrailers) this.emit('wantTrailers');
  }

  /** Record the misuse, then throw as `node:http2` does. */
  private refuse(what: string): never {
    this.misuse.push(what);
    throw new Error(`FakeStream: ${what}`);
  }

  sendTrailers(trailers: http2.OutgoingHttpHeaders): void {
    this.trailers = trailers;
  }

  pause(): this {
    this.paused = true;
    return this;
  }

  resume(): this {
    this.paused = false;
    return this;
  }

  /** The call's status: from a Trailers-Only response or the trailers; `undefined` if none. */
  status(): { code: number; message: string | undefined } | undefined {
    const from = this.trailers ?? this.responseHeaders;
    const code = from?.['grpc-status'];
    if (code === undefined) return undefined;
    const message = from?.['grpc-message'];
    return {
      code: Number(code),
      message: message === undefined ? undefined : decodeURIComponent(String(message)),
    };
  }
}

/** `message` framed with the given compressed flag. */
export function framed(message: Uint8Array, flag = 0): Buffer {
  const buf = frame(message);
  buf[0] = flag;
  return buf;
}

/** Feed `data` to the stream cut at `cuts` (sorted offsets), then end the request. */
export function feed(stream: FakeStream, data: Buffer, cuts: readonly number[], end = true): void {
  let from = 0;
  for (const cut of [...cuts, data.length]) {
    if (cut > from) stream.emit('data', data.subarray(from, cut));
    from = cut;
  }
  if (end) stream.emit('end');
}
