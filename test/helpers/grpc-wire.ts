/**
 * gRPC calls made by hand over `node:http2`, for tests that must decide when each byte reaches
 * the server (e.g. a request held half-sent across a shutdown). A grpc-js client always sends a
 * whole message at once, so it cannot hold a call open mid-request.
 */
import http2 from 'node:http2';

/**
 * A gRPC length-prefixed message: a 0 compression flag, the length as uint32 big-endian, then
 * `message` (the serialized protobuf).
 */
export function grpcFrame(message: Uint8Array): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt8(0, 0);
  frame.writeUInt32BE(message.length, 1);
  frame.set(message, 5);
  return frame;
}

/**
 * Split a response body into its length-prefixed messages. Throws on a compressed message or a
 * body that ends mid-message.
 */
export function parseGrpcFrames(body: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  let offset = 0;
  while (offset < body.length) {
    if (body.length - offset < 5) throw new Error(`truncated gRPC frame prefix at byte ${offset}`);
    if (body.readUInt8(offset) !== 0) throw new Error(`compressed gRPC frame at byte ${offset}`);
    const length = body.readUInt32BE(offset + 1);
    const end = offset + 5 + length;
    if (end > body.length) throw new Error(`truncated gRPC message at byte ${offset}`);
    messages.push(body.subarray(offset + 5, end));
    offset = end;
  }
  return messages;
}

/** Open an HTTP/2 session to `authority` (`http://host:port`); rejects after `timeoutMs`. */
export async function connectHttp2(
  authority: string,
  timeoutMs: number,
): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(authority);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      session.destroy();
      reject(new Error(`no HTTP/2 connection to ${authority} within ${timeoutMs}ms`));
    }, timeoutMs);
    session.once('connect', () => {
      clearTimeout(timer);
      // Later session errors surface on the streams; without a listener they would crash the
      // test worker.
      session.removeListener('error', onConnectError);
      session.on('error', () => {});
      resolve(session);
    });
    const onConnectError = (error: Error): void => {
      clearTimeout(timer);
      session.destroy();
      reject(error);
    };
    session.once('error', onConnectError);
  });
}

/**
 * Round-trip a PING on `session`; rejects after `timeoutMs`. The peer answers a PING only after
 * it has processed every frame sent before it, so on return the server has seen them all.
 */
export async function pingHttp2(
  session: http2.ClientHttp2Session,
  timeoutMs: number,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no PING answer within ${timeoutMs}ms`)),
      timeoutMs,
    );
    const sent = session.ping((error) => {
      clearTimeout(timer);
      if (error) reject(error);
      else resolve();
    });
    if (!sent) {
      clearTimeout(timer);
      reject(new Error('PING not sent: the session is closed'));
    }
  });
}

/** How a raw call ended. */
export interface RawCallResult {
  /** `:status` of the response headers; `undefined` when none arrived. */
  readonly httpStatus: number | undefined;
  /**
   * `grpc-status` from the trailers, or from the headers of a trailers-only response;
   * `undefined` when neither carried one.
   */
  readonly grpcStatus: string | undefined;
  /** `grpc-message`, when the server sent one. */
  readonly grpcMessage: string | undefined;
  /** The response body, still length-prefixed (see {@link parseGrpcFrames}). */
  readonly body: Buffer;
  /**
   * Why the stream did not end normally (stream error, RST_STREAM code, timeout); `undefined`
   * when it closed cleanly.
   */
  readonly failure: string | undefined;
}

/** A call whose request body the test writes piece by piece. */
export interface RawCall {
  /** Write part of the (already framed) request body; resolves once handed to the session. */
  write(bytes: Uint8Array): Promise<void>;
  /** Write the last bytes and half-close the request. */
  end(bytes: Uint8Array): void;
  /** Settles when the stream closes, or fails it after `timeoutMs`; never rejects. */
  readonly result: Promise<RawCallResult>;
}

/**
 * Start a gRPC call to `path` (`/package.Service/Method`) on `session`: sends the request headers
 * at once and the body only as the caller writes it. The call is cancelled if it has not closed
 * within `timeoutMs` of starting.
 */
export function startRawCall(
  session: http2.ClientHttp2Session,
  path: string,
  timeoutMs: number,
): RawCall {
  const stream = session.request({
    ':method': 'POST',
    ':path': path,
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  let httpStatus: number | undefined;
  let grpcStatus: string | undefined;
  let grpcMessage: string | undefined;
  let failure: string | undefined;
  const chunks: Buffer[] = [];
  const readStatus = (headers: http2.IncomingHttpHeaders): void => {
    const status = headers['grpc-status'];
    if (typeof status === 'string') grpcStatus = status;
    const message = headers['grpc-message'];
    if (typeof message === 'string') grpcMessage = message;
  };
  stream.on('response', (headers) => {
    httpStatus = headers[':status'];
    readStatus(headers);
  });
  stream.on('trailers', readStatus);
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  stream.on('error', (error) => {
    failure ??= `stream error: ${error.message}`;
  });
  const result = new Promise<RawCallResult>((resolve) => {
    const timer = setTimeout(() => {
      failure ??= `timed out after ${timeoutMs}ms`;
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, timeoutMs);
    stream.on('close', () => {
      clearTimeout(timer);
      if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
        failure ??= `stream reset with HTTP/2 error code ${stream.rstCode}`;
      }
      resolve({ httpStatus, grpcStatus, grpcMessage, body: Buffer.concat(chunks), failure });
    });
  });
  return {
    write: (bytes) =>
      new Promise((resolve) => {
        // A failed write also closes the stream, and `result` reports why; nothing to add here.
        stream.write(bytes, () => resolve());
      }),
    end: (bytes) => {
      stream.end(bytes);
    },
    result,
  };
}
