// The lean server's call assembly on its own (src/transport/h2/assembly.ts): DATA in any split
// becomes the same messages, compressed messages are inflated within the receive limit, and the
// byte budgets, deadlines and GRPC_REQUEST_TIMEOUT refuse what they should and give back what
// calls held. The stream is a stand-in that records what the server answers; the real streams
// are the integration tier's (grpc-protocol, hostile-clients).
import type http2 from 'node:http2';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../../../src/logging/logger.js';
import type { RefusalReason } from '../../../../src/metrics/metrics.js';
import {
  DEFAULT_GRPC_LIMITS,
  STREAM_OVERHEAD_BYTES,
  createRequestBudget,
  type GrpcLimits,
  type RequestBudget,
} from '../../../../src/transport/limits.js';
import { GrpcStatus } from '../../../../src/transport/status.js';
import { fail, finishOk, respondOk, sendUnary } from '../../../../src/transport/h2/answers.js';
import { CallAssembler } from '../../../../src/transport/h2/assembly.js';
import { CONNECTION, Kind, type Call, type Method } from '../../../../src/transport/h2/call.js';
import { frame } from '../../../../src/transport/h2/framing.js';
import { FakeStream, feed, framed } from '../../../helpers/h2-stream.js';

const LOGGER = silentLogger();

interface Harness {
  readonly assembler: CallAssembler;
  readonly budget: RequestBudget;
  readonly refused: RefusalReason[];
  /** Messages each handler got, in order. */
  readonly received: Buffer[];
}

function harness(
  options: {
    limits?: Partial<GrpcLimits>;
    budgetBytes?: number;
    maxReceiveMessageBytes?: number;
  } = {},
): Harness {
  const budget = createRequestBudget(options.budgetBytes ?? 16 * 1_048_576);
  const refused: RefusalReason[] = [];
  const assembler = new CallAssembler({
    maxReceiveMessageBytes: options.maxReceiveMessageBytes ?? 65_536,
    limits: { ...DEFAULT_GRPC_LIMITS, ...options.limits },
    budget,
    metrics: { refused: (reason) => refused.push(reason) },
    logger: LOGGER,
    traceHeaders: false,
  });
  return { assembler, budget, refused, received: [] };
}

/** A unary method that records its message and answers it back. */
function unary(h: Harness): Method {
  return {
    kind: Kind.Unary,
    handle: (call: Call, message: Buffer) => {
      h.received.push(Buffer.from(message));
      sendUnary(call, frame(message));
    },
  };
}

/** A bidi method that records each message and answers it. */
function bidi(h: Harness, onMessage?: (call: Call) => void): Method {
  return {
    kind: Kind.Bidi,
    handle: (call: Call, message: Buffer) => {
      h.received.push(Buffer.from(message));
      if (!call.stream.headersSent) respondOk(call.stream);
      call.stream.write(frame(message));
      onMessage?.(call);
    },
  };
}

function open(
  h: Harness,
  method: Method,
  headers: http2.IncomingHttpHeaders = {},
  stream = new FakeStream(),
): FakeStream {
  opened.push(stream);
  h.assembler.open(
    stream as unknown as http2.ServerHttp2Stream,
    { ':path': '/test.Service/Method', ...headers },
    '/test.Service/Method',
    method,
  );
  return stream;
}

/** Distinct bytes, so a misplaced byte shows. */
function bytes(n: number, seed = 1): Buffer {
  const buf = Buffer.alloc(n);
  for (let i = 0; i < n; i++) buf[i] = (i * 31 + seed) & 0xff;
  return buf;
}

/** Every stream the test opened: none may see what a real stream refuses. */
const opened: FakeStream[] = [];

afterEach(() => {
  vi.useRealTimers();
  expect(opened.splice(0).flatMap((stream) => stream.misuse)).toEqual([]);
});

describe('messages from DATA', () => {
  it('a unary message split at every pair of byte boundaries reaches the handler whole, once', () => {
    const message = bytes(37);
    const data = framed(message);
    for (let i = 0; i <= data.length; i++) {
      for (let j = i; j <= data.length; j++) {
        const h = harness();
        const stream = open(h, unary(h));
        feed(stream, data, [i, j], false);
        // Whole, but not handled before the request ends; its bytes stay counted till then.
        expect(h.received).toEqual([]);
        expect(h.budget.heldBytes).toBeGreaterThanOrEqual(STREAM_OVERHEAD_BYTES + message.length);
        stream.emit('end');
        expect(h.received, `cut at ${i} and ${j}`).toEqual([message]);
        expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
        expect(Buffer.concat(stream.written)).toEqual(data);
        expect(h.budget.heldBytes).toBe(0);
      }
    }
  });

  it('a message one byte per DATA frame, and a long one in small frames, arrive whole', () => {
    for (const size of [0, 1, 4, 5, 1023, 1024, 5_000, 70_000]) {
      const h = harness({ maxReceiveMessageBytes: 100_000 });
      const message = bytes(size, size);
      const data = framed(message);
      const step = size > 2_000 ? 7 : 1;
      const cuts: number[] = [];
      for (let at = step; at < data.length; at += step) cuts.push(at);
      const stream = open(h, unary(h));
      feed(stream, data, cuts);
      expect(h.received).toEqual([message]);
      expect(h.budget.heldBytes).toBe(0);
      expect((stream.session[CONNECTION] as { held: number }).held).toBe(0);
    }
  });

  it('bidi messages split at every byte boundary are handled in order, each as it completes', () => {
    const messages = [bytes(3, 1), bytes(0), bytes(300, 2), bytes(9, 3)];
    const data = Buffer.concat(messages.map((m) => framed(m)));
    for (let i = 0; i <= data.length; i++) {
      const h = harness();
      const stream = open(h, bidi(h));
      feed(stream, data, [i], false);
      expect(h.received).toEqual(messages);
      // Handled messages are dropped: the open call holds only its overhead.
      expect(h.budget.heldBytes).toBe(STREAM_OVERHEAD_BYTES);
      stream.emit('end');
      expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
      expect(h.budget.heldBytes).toBe(0);
    }
  });

  it('a unary message in one DATA frame is counted until the request ends', () => {
    const message = bytes(100);
    let h = harness();
    let stream = open(h, unary(h));
    stream.emit('data', framed(message));
    expect(h.budget.heldBytes).toBe(STREAM_OVERHEAD_BYTES + 100);
    stream.emit('end');
    expect(h.received).toEqual([message]);
    expect(h.budget.heldBytes).toBe(0);
    h = harness({ budgetBytes: STREAM_OVERHEAD_BYTES + 99 });
    stream = open(h, unary(h));
    stream.emit('data', framed(message));
    expect(stream.status()?.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(h.refused).toEqual(['total_buffer']);
  });

  it('a unary call with no message, or with two, is refused UNIMPLEMENTED', () => {
    let h = harness();
    let stream = open(h, unary(h));
    stream.emit('end');
    expect(stream.status()).toEqual({
      code: GrpcStatus.UNIMPLEMENTED,
      message: '/test.Service/Method needs one request message, got none',
    });
    h = harness();
    stream = open(h, unary(h));
    feed(stream, Buffer.concat([framed(bytes(2)), framed(bytes(2))]), []);
    expect(stream.status()).toEqual({
      code: GrpcStatus.UNIMPLEMENTED,
      message: '/test.Service/Method takes one request message',
    });
    expect(h.received).toEqual([]);
    expect(h.budget.heldBytes).toBe(0);
  });

  it('a request that ends inside a message fails INTERNAL and gives its bytes back', () => {
    const h = harness();
    const data = framed(bytes(100));
    for (const cut of [1, 4, 5, 50, data.length - 1]) {
      const stream = open(h, unary(h));
      stream.emit('data', data.subarray(0, cut));
      stream.emit('end');
      expect(stream.status()).toEqual({
        code: GrpcStatus.INTERNAL,
        message: 'request ended inside a message',
      });
    }
    expect(h.budget.heldBytes).toBe(0);
  });
});

describe('compressed messages', () => {
  const message = Buffer.from('a request message, compressed: '.repeat(8));

  it.each([
    ['gzip', zlib.gzipSync(message)],
    ['deflate', zlib.deflateSync(message)],
  ])('%s messages are inflated, whatever the DATA split', (encoding, compressed) => {
    const data = framed(compressed, 1);
    for (let i = 0; i <= data.length; i++) {
      const h = harness();
      const stream = open(h, unary(h), { 'grpc-encoding': encoding });
      feed(stream, data, [i]);
      expect(h.received).toEqual([message]);
      expect(h.budget.heldBytes).toBe(0);
    }
  });

  it('an uncompressed message on a gzip call is taken as it is', () => {
    const h = harness();
    const stream = open(h, unary(h), { 'grpc-encoding': 'gzip' });
    feed(stream, framed(message), []);
    expect(h.received).toEqual([message]);
  });

  it.each([
    [{}, 1, GrpcStatus.INTERNAL, 'compressed message without a grpc-encoding'],
    [
      { 'grpc-encoding': 'identity' },
      1,
      GrpcStatus.INTERNAL,
      'compressed message without a grpc-encoding',
    ],
    [
      { 'grpc-encoding': 'br' },
      1,
      GrpcStatus.UNIMPLEMENTED,
      'message compressed with an unsupported grpc-encoding; use one of identity,deflate,gzip',
    ],
    [
      { 'grpc-encoding': 'gzip' },
      2,
      GrpcStatus.INTERNAL,
      'invalid compressed-flag 2 in message prefix',
    ],
  ])('headers %j, flag %i: status %i', (headers, flag, code, text) => {
    const h = harness();
    const stream = open(h, unary(h), headers);
    feed(stream, framed(zlib.gzipSync(message), flag), []);
    expect(stream.status()).toEqual({ code, message: text });
    expect(h.received).toEqual([]);
    expect(h.budget.heldBytes).toBe(0);
  });

  it('a message that does not inflate fails INTERNAL', () => {
    const h = harness();
    const stream = open(h, unary(h), { 'grpc-encoding': 'gzip' });
    feed(stream, framed(Buffer.from('not gzip at all'), 1), []);
    expect(stream.status()?.code).toBe(GrpcStatus.INTERNAL);
    expect(stream.status()?.message).toMatch(/^cannot decompress message: /);
  });

  it('a message larger than the receive limit once inflated fails RESOURCE_EXHAUSTED', () => {
    const h = harness({ maxReceiveMessageBytes: 1_000 });
    const stream = open(h, unary(h), { 'grpc-encoding': 'gzip' });
    const bomb = zlib.gzipSync(Buffer.alloc(1_001));
    expect(bomb.length).toBeLessThan(1_000);
    feed(stream, framed(bomb, 1), []);
    expect(stream.status()).toEqual({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      message: 'decompressed message larger than max (1000; GRPC_MAX_RECEIVE_MESSAGE_LENGTH)',
    });
  });
});

describe('limits', () => {
  it('a prefix announcing more than the receive limit is refused before the message arrives', () => {
    const h = harness({ maxReceiveMessageBytes: 1_000 });
    const stream = open(h, unary(h));
    stream.emit('data', framed(bytes(1_001)).subarray(0, 5));
    expect(stream.status()).toEqual({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      message: 'received message larger than max (1001 vs. 1000; GRPC_MAX_RECEIVE_MESSAGE_LENGTH)',
    });
    expect(h.budget.heldBytes).toBe(0);
  });

  it("the connection bound refuses what a connection's unfinished requests would pass", () => {
    const h = harness({ limits: { maxConnectionBufferBytes: 2 * STREAM_OVERHEAD_BYTES + 600 } });
    const session = {};
    const first = open(h, unary(h), {}, new FakeStream(session));
    const second = open(h, unary(h), {}, new FakeStream(session));
    first.emit('data', framed(bytes(500)).subarray(0, 100));
    expect(first.status()).toBeUndefined();
    // The second call's 500 bytes would pass the bound the first call shares.
    second.emit('data', framed(bytes(500)).subarray(0, 100));
    second.emit('data', framed(bytes(500)).subarray(100, 300));
    expect(second.status()).toEqual({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      message:
        'server busy: unfinished requests hold GRPC_MAX_CONNECTION_BUFFER_BYTES; retry later',
    });
    expect(h.refused).toEqual(['connection_buffer']);
    // The first call still completes, and everything is given back.
    feed(first, framed(bytes(500)).subarray(100), []);
    expect(h.received).toEqual([bytes(500)]);
    expect(h.budget.heldBytes).toBe(0);
    expect((session as Record<symbol, { held: number }>)[CONNECTION]!.held).toBe(0);
  });

  it('the process budget refuses a call it cannot hold, at open or mid-message', () => {
    let h = harness({ budgetBytes: STREAM_OVERHEAD_BYTES - 1 });
    let stream = open(h, unary(h));
    expect(stream.status()).toEqual({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      message: 'server busy: unfinished requests hold MAX_REQUEST_BUFFER_BYTES; retry later',
    });
    h = harness({ budgetBytes: STREAM_OVERHEAD_BYTES + 2_000 });
    stream = open(h, unary(h));
    feed(stream, framed(bytes(5_000)), [10, 3_000], false);
    expect(stream.status()?.message).toBe(
      'server busy: unfinished requests hold MAX_REQUEST_BUFFER_BYTES; retry later',
    );
    expect(h.refused).toEqual(['total_buffer']);
    expect(h.budget.heldBytes).toBe(0);
  });

  it('a grpc-timeout fails the call DEADLINE_EXCEEDED when no answer is ready in time', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const h = harness();
    const stream = open(h, unary(h), { 'grpc-timeout': '50m' });
    stream.emit('data', framed(bytes(10)).subarray(0, 7));
    vi.advanceTimersByTime(49);
    expect(stream.status()).toBeUndefined();
    vi.advanceTimersByTime(1);
    expect(stream.status()).toEqual({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      message: 'deadline exceeded before the answer was ready',
    });
    expect(h.budget.heldBytes).toBe(0);
  });

  it('a malformed grpc-timeout fails the call INTERNAL at once', () => {
    const h = harness();
    const stream = open(h, unary(h), { 'grpc-timeout': 'soon' });
    expect(stream.status()).toEqual({
      code: GrpcStatus.INTERNAL,
      message: 'malformed grpc-timeout soon',
    });
    expect(h.budget.heldBytes).toBe(0);
  });

  it('the sweep fails requests older than GRPC_REQUEST_TIMEOUT and forgets closed streams', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval', 'performance'] });
    const h = harness({ limits: { requestTimeoutMs: 1_000 } });
    h.assembler.start();
    const slow = open(h, unary(h));
    slow.emit('data', framed(bytes(10)).subarray(0, 3));
    const gone = open(h, unary(h));
    gone.emit('data', framed(bytes(10)).subarray(0, 3));
    // Closed without a 'close' listener (a unary call with nothing stashed past the prefix has
    // one; this one is forgotten by the sweep either way).
    gone.destroyed = true;
    vi.advanceTimersByTime(999);
    expect(slow.status()).toBeUndefined();
    vi.advanceTimersByTime(250);
    expect(slow.status()).toEqual({
      code: GrpcStatus.DEADLINE_EXCEEDED,
      message: 'request not received whole within GRPC_REQUEST_TIMEOUT (1000 ms)',
    });
    expect(gone.status()).toBeUndefined();
    expect(h.refused).toEqual(['request_timeout']);
    expect(h.budget.heldBytes).toBe(0);
    h.assembler.stop();
  });

  it('a closed stream gives back what its call held', () => {
    const h = harness();
    const stream = open(h, bidi(h));
    stream.emit('data', framed(bytes(3_000)).subarray(0, 2_000));
    expect(h.budget.heldBytes).toBeGreaterThan(2_000);
    stream.destroyed = true;
    stream.emit('close');
    expect(h.budget.heldBytes).toBe(0);
  });
});

describe('a client that does not read the answers', () => {
  it('pauses reading a bidi call until its answers drain, then handles the rest and the end', () => {
    const h = harness();
    const stream = open(
      h,
      bidi(h, (call) => {
        (call.stream as unknown as FakeStream).writableNeedDrain = true;
      }),
    );
    const messages = [bytes(10, 1), bytes(20, 2), bytes(30, 3)];
    const data = Buffer.concat(messages.map((m) => framed(m)));
    // The first two messages and part of the third in one DATA frame.
    stream.emit('data', data.subarray(0, 50));
    expect(h.received).toEqual([messages[0]]);
    expect(stream.paused).toBe(true);
    stream.emit('end');
    expect(stream.status()).toBeUndefined();

    stream.writableNeedDrain = false;
    stream.emit('drain');
    // The stash held the second message whole: handled, and the handler paused again.
    expect(h.received).toEqual([messages[0], messages[1]]);
    expect(stream.paused).toBe(true);
    // Counted: the overhead and the new stash (the third message's 35 bytes), not the old one.
    expect(h.budget.heldBytes).toBe(STREAM_OVERHEAD_BYTES + 35);
    stream.writableNeedDrain = false;
    stream.emit('drain');
    // What is left is part of the third message: the end inside it is a failure.
    expect(stream.status()).toEqual({
      code: GrpcStatus.INTERNAL,
      message: 'request ended inside a message',
    });
    expect(h.budget.heldBytes).toBe(0);
  });

  it('ends a paused call with OK once the stashed messages are handled', () => {
    const h = harness();
    let pauses = 1;
    const stream = open(
      h,
      bidi(h, (call) => {
        if (pauses-- > 0) (call.stream as unknown as FakeStream).writableNeedDrain = true;
      }),
    );
    const messages = [bytes(10, 1), bytes(20, 2)];
    stream.emit('data', Buffer.concat(messages.map((m) => framed(m))));
    stream.emit('end');
    expect(h.received).toEqual([messages[0]]);
    stream.writableNeedDrain = false;
    stream.emit('drain');
    expect(h.received).toEqual(messages);
    expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
    expect(h.budget.heldBytes).toBe(0);
  });
});

describe('answers', () => {
  it('a failure after a streaming call started answering goes in its trailers', () => {
    const h = harness();
    const stream = open(
      h,
      bidi(h, (call) => {
        if (h.received.length === 2) fail(call, GrpcStatus.INVALID_ARGUMENT, 'bad request: 100%');
      }),
    );
    feed(stream, Buffer.concat([framed(bytes(1)), framed(bytes(2)), framed(bytes(3))]), [], false);
    // Failed at the second message: the third is not handled, the answers sent stay sent.
    expect(h.received).toEqual([bytes(1), bytes(2)]);
    expect(stream.written).toEqual([framed(bytes(1)), framed(bytes(2))]);
    expect(stream.responseHeaders?.['grpc-status']).toBeUndefined();
    expect(stream.trailers).toEqual({ 'grpc-status': '3', 'grpc-message': 'bad request: 100%25' });
    expect(stream.status()).toEqual({ code: 3, message: 'bad request: 100%' });
    expect(h.budget.heldBytes).toBe(0);
  });

  it('a streaming call finished early ends with OK and handles nothing more', () => {
    const h = harness();
    const stream = open(
      h,
      bidi(h, (call) => {
        if (h.received.length === 2) finishOk(call);
      }),
    );
    feed(stream, Buffer.concat([framed(bytes(1)), framed(bytes(2)), framed(bytes(3))]), [], false);
    expect(h.received).toEqual([bytes(1), bytes(2)]);
    expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
  });

  it('a failure before any answer is a Trailers-Only response', () => {
    const h = harness();
    const stream = open(h, {
      kind: Kind.Unary,
      handle: (call) => fail(call, GrpcStatus.NOT_FOUND, 'unknown service x'),
    });
    feed(stream, framed(bytes(4)), []);
    expect(stream.trailers).toBeUndefined();
    expect(stream.ended).toBe(true);
    expect(stream.responseHeaders).toEqual({
      ':status': 200,
      'content-type': 'application/grpc',
      'grpc-accept-encoding': 'identity,deflate,gzip',
      'grpc-status': '5',
      'grpc-message': 'unknown service x',
    });
  });
});
