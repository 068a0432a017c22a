/**
 * How the lean server answers a call: a unary response with its OK trailers, the end of a
 * streaming call, a failure status (in the trailers of a call already answering, else a
 * Trailers-Only response). Every answer marks the call done and stops what it holds: its budget,
 * its deadline timer, its health subscription.
 */
import type http2 from 'node:http2';
import type { GrpcStatusCode } from '../status.js';
import type { Call } from './call.js';
import { encodeGrpcMessage } from './framing.js';

/** Request compression the server accepts, in the form `grpc-accept-encoding` lists them. */
export const ACCEPT_ENCODING = 'identity,deflate,gzip';

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

/** Options of a response that is only headers (Trailers-Only, or an HTTP-level refusal). */
export const RESPOND_AND_END = {
  endStream: true,
  sendDate: false,
} as http2.ServerStreamResponseOptions;

/** Send the response headers of a call that will answer with messages and then OK trailers. */
export function respondOk(stream: http2.ServerHttp2Stream): void {
  stream.respond(RESPONSE_HEADERS, RESPOND_WITH_TRAILERS);
  stream.on('wantTrailers', sendOkTrailers);
}

/** Answer a unary call with `buf` (one framed message) and status OK. */
export function sendUnary(call: Call, buf: Buffer): void {
  call.done = true;
  if (call.timer !== undefined) {
    clearTimeout(call.timer);
    call.timer = undefined;
  }
  const stream = call.stream;
  if (stream.destroyed || stream.closed) return;
  respondOk(stream);
  stream.end(buf);
}

/** End a streaming call whose headers are sent, with status OK. */
export function finishOk(call: Call): void {
  call.done = true;
  call.unwatch?.();
  call.unwatch = undefined;
  const stream = call.stream;
  if (stream.destroyed || stream.closed) return;
  if (!stream.headersSent) respondOk(stream);
  stream.end();
}

/** End a call with a failure status. */
export function fail(call: Call, code: GrpcStatusCode, details: string): void {
  call.done = true;
  call.ledger.release(call);
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

/** A response that is only headers: the status of a call that failed before any message. */
export function trailersOnly(stream: http2.ServerHttp2Stream, code: number, details: string): void {
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

function sendOkTrailers(this: http2.ServerHttp2Stream): void {
  this.sendTrailers(OK_TRAILERS);
}
