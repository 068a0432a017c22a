// The lean server's method table on its own (src/transport/h2/methods.ts): which paths it serves,
// and what ShouldRateLimit, health Check and Watch and reflection answer, driven through the
// call assembly with a stand-in stream (test/helpers/h2-stream.ts) and the real health signal.
import type http2 from 'node:http2';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { SluiceError } from '../../../../src/errors.js';
import { silentLogger } from '../../../../src/logging/logger.js';
import type { RateLimitRequest, RateLimitResponse } from '../../../../src/model.js';
import { createHealthSignal, type HealthSignal } from '../../../../src/service/health.js';
import type { RateLimitService } from '../../../../src/service/rate-limit-service.js';
import {
  DEFAULT_GRPC_LIMITS,
  createRequestBudget,
  type RequestBudget,
} from '../../../../src/transport/limits.js';
import { METHOD_PATHS, RLS_SERVICE_NAME } from '../../../../src/transport/rpc.js';
import { GrpcStatus } from '../../../../src/transport/status.js';
import { CallAssembler } from '../../../../src/transport/h2/assembly.js';
import {
  decodeRateLimitRequest,
  encodeRateLimitResponse,
} from '../../../../src/transport/h2/codec.js';
import { frame } from '../../../../src/transport/h2/framing.js';
import {
  createMethodTable,
  type MethodTable,
  type ReflectionHandler,
} from '../../../../src/transport/h2/methods.js';
import { FakeStream, feed, framed } from '../../../helpers/h2-stream.js';

const LOGGER = silentLogger();

interface Server {
  readonly table: MethodTable;
  readonly budget: RequestBudget;
  /** What `serving()` answers (when no `serving` option was given). */
  serving: boolean;
  /** What `closing()` answers. */
  closing: boolean;
  /** Start a call on `path` with `message`; ends the request unless `end` is false. */
  call(
    path: string,
    message: Uint8Array,
    options?: { end?: boolean; headers?: http2.IncomingHttpHeaders },
  ): FakeStream;
}

function server(
  options: {
    service?: RateLimitService;
    health?: HealthSignal;
    reflection?: ReflectionHandler;
    serving?: () => boolean;
    traceHeaders?: boolean;
  } = {},
): Server {
  const budget = createRequestBudget(1_048_576);
  const assembler = new CallAssembler({
    maxReceiveMessageBytes: 65_536,
    limits: DEFAULT_GRPC_LIMITS,
    budget,
    metrics: { refused() {} },
    logger: LOGGER,
    traceHeaders: options.traceHeaders ?? false,
  });
  const table = createMethodTable({
    service: options.service ?? answering(() => Promise.resolve(ALLOWED)),
    logger: LOGGER,
    health: options.health,
    reflection: options.reflection,
    serving: options.serving ?? (() => state.serving),
    closing: () => state.closing,
  });
  const state: Server = {
    table,
    budget,
    serving: true,
    closing: false,
    call(path, message, { end = true, headers = {} } = {}) {
      const method = table.byPath.get(path);
      if (method === undefined) throw new Error(`no method ${path}`);
      const stream = new FakeStream();
      assembler.open(
        stream as unknown as http2.ServerHttp2Stream,
        { ':path': path, ...headers },
        path,
        method,
      );
      feed(stream, framed(message), [], end);
      return stream;
    },
  };
  return state;
}

const ALLOWED: RateLimitResponse = {
  overallCode: 'OK',
  statuses: [],
  responseHeadersToAdd: [],
};

function answering(
  answer: (request: RateLimitRequest) => Promise<RateLimitResponse>,
): RateLimitService {
  return { shouldRateLimit: answer };
}

/** A HealthCheckRequest for `service`. */
function healthRequest(service: string): Buffer {
  const name = Buffer.from(service);
  return service === '' ? Buffer.alloc(0) : Buffer.concat([Buffer.of(0x0a, name.length), name]);
}

/** The ServingStatus numbers of the HealthCheckResponses the stream carried. */
function healthStatuses(stream: FakeStream): number[] {
  return stream.written.map((buf) => (buf.length === 5 ? 0 : buf[6]!));
}

/** A RateLimitRequest for `domain`, encoded. */
function rlsRequest(domain: string): Buffer {
  const bytes = Buffer.from(domain);
  return Buffer.concat([Buffer.of(0x0a, bytes.length), bytes]);
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the table', () => {
  it('serves ShouldRateLimit, health Check and Watch, and reflection only when given', () => {
    expect([...server().table.byPath.keys()]).toEqual([
      METHOD_PATHS.shouldRateLimit,
      METHOD_PATHS.healthCheck,
      METHOD_PATHS.healthWatch,
    ]);
    const reflection: ReflectionHandler = {
      paths: ['/r.v1/Info', '/r.v1alpha/Info'],
      answer: () => Uint8Array.of(),
    };
    expect([...server({ reflection }).table.byPath.keys()]).toEqual([
      METHOD_PATHS.shouldRateLimit,
      METHOD_PATHS.healthCheck,
      METHOD_PATHS.healthWatch,
      '/r.v1/Info',
      '/r.v1alpha/Info',
    ]);
  });
});

describe('ShouldRateLimit', () => {
  it("answers the service's response, encoded, with status OK", async () => {
    const seen: RateLimitRequest[] = [];
    const s = server({
      service: answering((request) => {
        seen.push(request);
        return Promise.resolve(ALLOWED);
      }),
    });
    const stream = s.call(METHOD_PATHS.shouldRateLimit, rlsRequest('edge'));
    await vi.waitFor(() => expect(stream.status()).toBeDefined());
    expect(seen).toEqual([decodeRateLimitRequest(rlsRequest('edge'))]);
    expect(stream.written).toEqual([frame(encodeRateLimitResponse(ALLOWED))]);
    expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
    expect(s.budget.heldBytes).toBe(0);
  });

  it.each([true, false])(
    'hands the call headers to the service only for tracing (traceHeaders %s)',
    async (traceHeaders) => {
      const seen: unknown[] = [];
      const s = server({
        traceHeaders,
        service: {
          shouldRateLimit(_request, headers) {
            seen.push(headers);
            return Promise.resolve(ALLOWED);
          },
        },
      });
      const headers = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' };
      const stream = s.call(METHOD_PATHS.shouldRateLimit, rlsRequest('edge'), { headers });
      await vi.waitFor(() => expect(stream.status()).toBeDefined());
      expect(seen).toEqual([
        traceHeaders ? { ':path': METHOD_PATHS.shouldRateLimit, ...headers } : undefined,
      ]);
    },
  );

  it('a request that does not decode is INVALID_ARGUMENT, and the service is not called', () => {
    let calls = 0;
    const s = server({
      service: answering(() => {
        calls++;
        return Promise.resolve(ALLOWED);
      }),
    });
    const stream = s.call(METHOD_PATHS.shouldRateLimit, Buffer.of(0x0a, 0x05, 0x61));
    expect(stream.status()?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(stream.status()?.message).toMatch(/unmarshal/i);
    expect(calls).toBe(0);
  });

  it.each([
    ['rejects', () => Promise.reject(new SluiceError('STORE_UNAVAILABLE', 'redis is down'))],
    [
      'throws',
      () => {
        throw new SluiceError('STORE_UNAVAILABLE', 'redis is down');
      },
    ],
  ])('a service that %s answers the status of its error', async (_how, answer) => {
    const s = server({ service: answering(answer) });
    const stream = s.call(METHOD_PATHS.shouldRateLimit, rlsRequest('edge'));
    await vi.waitFor(() => expect(stream.status()).toBeDefined());
    expect(stream.status()).toEqual({ code: GrpcStatus.UNAVAILABLE, message: 'redis is down' });
  });

  it('an answer that comes after the deadline is dropped', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    let resolve: (response: RateLimitResponse) => void = () => {};
    const pending = new Promise<RateLimitResponse>((r) => (resolve = r));
    const s = server({ service: answering(() => pending) });
    const stream = s.call(METHOD_PATHS.shouldRateLimit, rlsRequest('edge'), {
      headers: { 'grpc-timeout': '10m' },
    });
    vi.advanceTimersByTime(10);
    expect(stream.status()?.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    resolve(ALLOWED);
    // The handler's callback was attached first, so it has run once this await returns.
    await pending;
    expect(stream.misuse).toEqual([]);
    expect(stream.written).toEqual([]);
    expect(stream.status()?.code).toBe(GrpcStatus.DEADLINE_EXCEEDED);
  });
});

describe('health Check', () => {
  it.each([
    ['', true, 1],
    [RLS_SERVICE_NAME, true, 1],
    ['', false, 2],
    [RLS_SERVICE_NAME, false, 2],
  ])('service %j while serving=%s answers status %i', (name, serving, status) => {
    const s = server();
    s.serving = serving;
    const stream = s.call(METHOD_PATHS.healthCheck, healthRequest(name));
    expect(healthStatuses(stream)).toEqual([status]);
    expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
  });

  it('an unknown service is NOT_FOUND; a request that does not decode, INVALID_ARGUMENT', () => {
    const s = server();
    expect(s.call(METHOD_PATHS.healthCheck, healthRequest('other.Service')).status()).toEqual({
      code: GrpcStatus.NOT_FOUND,
      message: 'unknown service other.Service',
    });
    const stream = s.call(METHOD_PATHS.healthCheck, Buffer.of(0x0a, 0x09));
    expect(stream.status()?.code).toBe(GrpcStatus.INVALID_ARGUMENT);
    expect(stream.status()?.message).toMatch(/^malformed HealthCheckRequest: DecodeError: /);
  });
});

describe('health Watch', () => {
  it('sends the status now and on each change, then NOT_SERVING and OK when the server closes', () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    let storeUp = true;
    const health = createHealthSignal({ configLoaded: () => true, storeHealthy: () => storeUp });
    const s = server({ health, serving: () => health.serving() });
    const stream = s.call(METHOD_PATHS.healthWatch, healthRequest(''));
    expect(healthStatuses(stream)).toEqual([1]);
    expect(stream.status()).toBeUndefined();

    storeUp = false;
    vi.advanceTimersByTime(1_000);
    storeUp = true;
    vi.advanceTimersByTime(1_000);
    // The server re-checks at listen: no change, nothing sent.
    s.table.recheckWatches();
    expect(healthStatuses(stream)).toEqual([1, 2, 1]);

    s.closing = true;
    s.table.recheckWatches();
    expect(healthStatuses(stream)).toEqual([1, 2, 1, 2]);
    expect(stream.status()).toEqual({ code: GrpcStatus.OK, message: undefined });
    // Unsubscribed: the signal's timer is gone and later changes reach no one.
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('reflection', () => {
  it('answers each request message as it arrives, and a bad one INVALID_ARGUMENT', () => {
    const reflection: ReflectionHandler = {
      paths: ['/r.v1/Info'],
      answer(path, request) {
        if (request.length === 0) throw new Error('empty request');
        return Buffer.concat([Buffer.from(`${path}:`), request]);
      },
    };
    const s = server({ reflection });
    const stream = s.call('/r.v1/Info', Buffer.from('a'), { end: false });
    expect(stream.written).toEqual([frame(Buffer.from('/r.v1/Info:a'))]);
    stream.emit('data', framed(Buffer.from('b')));
    expect(stream.written).toHaveLength(2);
    stream.emit('data', framed(Buffer.alloc(0)));
    expect(stream.status()).toEqual({
      code: GrpcStatus.INVALID_ARGUMENT,
      message: 'malformed reflection request: Error: empty request',
    });
    expect(s.budget.heldBytes).toBe(0);
  });
});
