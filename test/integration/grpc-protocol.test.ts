/**
 * gRPC-over-HTTP/2 protocol details of the service port, for both servers (GRPC_SERVER=lean and
 * grpc-js): response headers and trailers, Trailers-Only failures, request compression and
 * grpc-accept-encoding, grpc-timeout deadlines, health Watch, and graceful shutdown with GOAWAY.
 * Calls are made over raw `node:http2` where the test must see the frames, and with a grpc-js
 * client built from Envoy's protos elsewhere.
 */
import http2 from 'node:http2';
import zlib from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { createRequire } from 'node:module';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/logging/logger.js';
import type { RateLimitRequest, RateLimitResponse } from '../../src/model.js';
import type { RateLimitService } from '../../src/service/rate-limit-service.js';
import { createServiceServer, type GrpcServerKind } from '../../src/transport/service-server.js';
import type { ServiceServer } from '../../src/transport/rpc.js';
import { createEnvoyRlsClient, loadEnvoyRls, rlsRequest } from '../helpers/envoy-rls-client.js';
import { connectHttp2, grpcFrame, parseGrpcFrames } from '../helpers/grpc-wire.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { waitFor } from '../helpers/processes.js';

const KINDS: readonly GrpcServerKind[] = ['lean', 'grpc-js'];
const RLS = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const rlsMethod = (
  loadEnvoyRls()['envoy.service.ratelimit.v3.RateLimitService'] as grpc.ServiceDefinition
).ShouldRateLimit!;
const encodeRequest = (req: unknown): Buffer => rlsMethod.requestSerialize(req);
const decodeResponse = (bytes: Buffer): any => rlsMethod.responseDeserialize(bytes);

/** What a raw call saw. */
interface Exchange {
  readonly headers: http2.IncomingHttpHeaders;
  readonly trailers: http2.IncomingHttpHeaders | undefined;
  readonly body: Buffer;
  /** grpc-status from the trailers, or from the headers of a Trailers-Only response. */
  readonly status: string | undefined;
  readonly message: string | undefined;
}

/** One request over `session` with extra `headers` and a raw body; bounded by `timeoutMs`. */
function exchange(
  session: http2.ClientHttp2Session,
  body: Buffer,
  headers: http2.OutgoingHttpHeaders = {},
  timeoutMs = 5_000,
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ':method': 'POST',
      ':path': RLS,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...headers,
    });
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    stream.on('response', (h) => (responseHeaders = h));
    stream.on('trailers', (t) => (trailers = t));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => {});
    stream.on('close', () => {
      clearTimeout(timer);
      const source = trailers ?? responseHeaders;
      resolve({
        headers: responseHeaders,
        trailers,
        body: Buffer.concat(chunks),
        status: source['grpc-status'] as string | undefined,
        message: source['grpc-message'] as string | undefined,
      });
    });
    stream.end(body);
  });
}

const RULES = {
  'p.yaml':
    'domain: p\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100}\n',
};

describe.each(KINDS)('GRPC_SERVER=%s: the gRPC protocol on the wire', (kind) => {
  let running: RunningApp;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    running = await startApp([await ruleDir(RULES)], { GRPC_SERVER: kind });
    session = await connectHttp2(`http://127.0.0.1:${running.port}`, 5_000);
  });
  afterAll(async () => {
    session?.destroy();
    await running?.stop();
  });

  it('answers with :status 200, content-type application/grpc, one message and grpc-status 0 in trailers', async () => {
    const res = await exchange(session, grpcFrame(encodeRequest(rlsRequest('p', [{ k: 'a' }]))));
    expect(res.headers[':status']).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/grpc/);
    expect(res.headers['grpc-status']).toBeUndefined();
    expect(res.trailers?.['grpc-status']).toBe('0');
    const [message, ...rest] = parseGrpcFrames(res.body);
    expect(rest).toEqual([]);
    expect(decodeResponse(message!)).toMatchObject({
      overall_code: 'OK',
      statuses: [{ code: 'OK', limit_remaining: 99 }],
    });
  });

  it('answers a failure Trailers-Only, with a percent-encoded grpc-message', async () => {
    const res = await exchange(session, grpcFrame(encodeRequest(rlsRequest('', [{ k: 'a' }]))));
    expect(res.headers[':status']).toBe(200);
    expect(res.headers['grpc-status']).toBe('3');
    expect(res.trailers).toBeUndefined();
    expect(res.body.length).toBe(0);
    expect(decodeURIComponent(res.message!)).toBe('rate limit domain must not be empty');
  });

  it('accepts gzip and deflate requests, and announces what it accepts', async () => {
    const plain = encodeRequest(rlsRequest('p', [{ k: 'z' }]));
    for (const [encoding, compress] of [
      ['gzip', zlib.gzipSync],
      ['deflate', zlib.deflateSync],
    ] as const) {
      const packed = compress(plain);
      const body = Buffer.concat([Buffer.from([1, 0, 0, 0, 0]), packed]);
      body.writeUInt32BE(packed.length, 1);
      const res = await exchange(session, body, {
        'grpc-encoding': encoding,
        'grpc-accept-encoding': 'identity',
      });
      expect(res.status, encoding).toBe('0');
      expect(String(res.headers['grpc-accept-encoding'])).toMatch(/gzip/);
      expect(decodeResponse(parseGrpcFrames(res.body)[0]!).statuses[0].code).toBe('OK');
    }
  });

  it('refuses a message compressed with an unknown grpc-encoding: UNIMPLEMENTED, lists the accepted ones', async () => {
    const packed = zlib.gzipSync(encodeRequest(rlsRequest('p', [{ k: 'a' }])));
    const body = Buffer.concat([Buffer.from([1, 0, 0, 0, 0]), packed]);
    body.writeUInt32BE(packed.length, 1);
    const res = await exchange(session, body, { 'grpc-encoding': 'snappy' });
    expect(res.status).toBe(String(grpc.status.UNIMPLEMENTED));
    // The protocol asks for grpc-accept-encoding on this answer; grpc-js leaves it out.
    if (kind === 'lean') expect(String(res.headers['grpc-accept-encoding'])).toMatch(/gzip/);
    // An uncompressed message is fine whatever grpc-encoding says.
    const plain = await exchange(session, grpcFrame(encodeRequest(rlsRequest('p', [{ k: 'a' }]))), {
      'grpc-encoding': 'snappy',
    });
    expect(plain.status).toBe('0');
  });

  it('refuses a message that inflates beyond GRPC_MAX_RECEIVE_MESSAGE_LENGTH', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(2 * 1_048_576 + 10, 0));
    const body = Buffer.concat([Buffer.from([1, 0, 0, 0, 0]), bomb]);
    body.writeUInt32BE(bomb.length, 1);
    const res = await exchange(session, body, { 'grpc-encoding': 'gzip' });
    expect(res.status).toBe(String(grpc.status.RESOURCE_EXHAUSTED));
  });

  it('answers a grpc-js client that compresses its requests with gzip', async () => {
    const client = new grpc.Client(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure(), {
      'grpc.default_compression_algorithm': grpc.compressionAlgorithms.gzip,
    });
    try {
      const response = await new Promise<any>((resolve, reject) =>
        client.makeUnaryRequest(
          RLS,
          encodeRequest,
          decodeResponse,
          rlsRequest('p', [{ k: 'gz' }]),
          { deadline: Date.now() + 5_000 },
          (err, value) => (err ? reject(err) : resolve(value)),
        ),
      );
      expect(response.overall_code).toBe('OK');
    } finally {
      client.close();
    }
  });

  it('answers UNIMPLEMENTED for a method it does not serve', async () => {
    const client = createEnvoyRlsClient(`127.0.0.1:${running.port}`);
    try {
      const err = await new Promise<grpc.ServiceError>((resolve) =>
        client.raw.makeUnaryRequest(
          '/envoy.service.ratelimit.v3.RateLimitService/Nope',
          (b: Buffer) => b,
          (b: Buffer) => b,
          Buffer.alloc(0),
          { deadline: Date.now() + 5_000 },
          (e) => resolve(e!),
        ),
      );
      expect(err.code).toBe(grpc.status.UNIMPLEMENTED);
      // Which server answered: the suite must run the implementation it names.
      expect(err.details).toMatch(kind === 'lean' ? /^unknown method/ : /does not implement/);
    } finally {
      client.close();
    }
  });
});

describe.each(KINDS)('GRPC_SERVER=%s: every field a response can carry', (kind) => {
  let running: RunningApp;
  beforeAll(async () => {
    running = await startApp(
      [
        await ruleDir({
          't.yaml':
            'domain: t\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n',
        }),
      ],
      {
        GRPC_SERVER: kind,
        RESPONSE_DYNAMIC_METADATA: 'true',
        LIMIT_PROBLEM_JSON_ENABLED: 'true',
        LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
      },
    );
  });
  afterAll(async () => {
    await running?.stop();
  });

  it("sends raw_body, dynamic_metadata and response headers that Envoy's proto decodes", async () => {
    await running.client.shouldRateLimit(rlsRequest('t', [{ k: 'x' }]));
    const client = new grpc.Client(`127.0.0.1:${running.port}`, grpc.credentials.createInsecure());
    try {
      const bytes = await new Promise<Buffer>((resolve, reject) =>
        client.makeUnaryRequest(
          RLS,
          encodeRequest,
          (b: Buffer) => b,
          rlsRequest('t', [{ k: 'x' }]),
          { deadline: Date.now() + 5_000 },
          (err, value) => (err ? reject(err) : resolve(value!)),
        ),
      );
      const response = rlsMethod.responseDeserialize(bytes) as {
        overall_code: string;
        raw_body?: Buffer;
        dynamic_metadata?: { fields: Record<string, unknown> };
        response_headers_to_add?: { key: string; value: string }[];
      };
      expect(response.overall_code).toBe('OVER_LIMIT');
      expect(JSON.parse(Buffer.from(response.raw_body ?? []).toString('utf8'))).toMatchObject({
        status: 429,
      });
      expect(Object.keys(response.dynamic_metadata?.fields ?? {}).length).toBeGreaterThan(0);
      expect(response.response_headers_to_add?.map((h) => h.key)).toEqual(
        expect.arrayContaining(['RateLimit-Limit']),
      );
    } finally {
      client.close();
    }
  });
});

// ---- the transport alone, with a service the test controls ---------------------------------

/** A service whose answers the test releases by hand. */
function heldService(): RateLimitService & { release(): void; held: number } {
  const waiting: (() => void)[] = [];
  const answer: RateLimitResponse = {
    overallCode: 'OK',
    statuses: [
      {
        code: 'OK',
        currentLimit: undefined,
        limitRemaining: 0,
        durationUntilResetMs: undefined,
        rule: undefined,
        hits: 0,
        overLimit: false,
      },
    ],
    responseHeadersToAdd: [],
  };
  return {
    get held() {
      return waiting.length;
    },
    shouldRateLimit(_request: RateLimitRequest) {
      return new Promise((resolve) => waiting.push(() => resolve(answer)));
    },
    release() {
      for (const go of waiting.splice(0)) go();
    },
  };
}

/** A PING round trip: whatever the server wrote before its ACK has reached the client. */
async function flushed(session: http2.ClientHttp2Session): Promise<void> {
  await new Promise<void>((resolve, reject) =>
    session.ping((error) => (error ? reject(error) : resolve())),
  );
  await new Promise((resolve) => setImmediate(resolve));
}

const healthPkg = grpc.loadPackageDefinition(
  protoLoader.loadSync(
    createRequire(import.meta.url).resolve('grpc-health-check/proto/health/v1/health.proto'),
    { keepCase: true, enums: String },
  ),
) as any;

describe.each(KINDS)('GRPC_SERVER=%s: deadlines, health Watch and shutdown', (kind) => {
  let server: ServiceServer | undefined;
  let port = 0;
  let service: ReturnType<typeof heldService>;
  const clients: grpc.Client[] = [];

  async function start(): Promise<void> {
    service = heldService();
    server = createServiceServer({
      kind,
      service,
      logger: silentLogger(),
      maxReceiveMessageBytes: 1_048_576,
    });
    port = await server.listen('127.0.0.1', 0);
  }
  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    service?.release();
    await server?.close(0);
    server = undefined;
  });

  it('answers DEADLINE_EXCEEDED when the answer is not ready within grpc-timeout', async () => {
    await start();
    const session = await connectHttp2(`http://127.0.0.1:${port}`, 5_000);
    // The server's deadline timer runs on a fake clock; the sockets stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let answered = false;
      const pending = exchange(session, grpcFrame(encodeRequest(rlsRequest('p', [{ k: 'a' }]))), {
        'grpc-timeout': '100m',
      }).finally(() => (answered = true));
      for (let i = 0; i < 10_000 && service.held === 0; i++) {
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect(service.held).toBe(1);
      await vi.advanceTimersByTimeAsync(99);
      await flushed(session);
      expect(answered).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      const res = await pending;
      expect(res.status).toBe(String(grpc.status.DEADLINE_EXCEEDED));
      // The deadline answered a call the service had taken and still held.
      expect(service.held).toBe(1);
    } finally {
      vi.useRealTimers();
      session.destroy();
    }
  });

  it('streams health changes to Watch and ends the stream at shutdown', async () => {
    await start();
    const client = new healthPkg.grpc.health.v1.Health(
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    );
    clients.push(client);
    const seen: string[] = [];
    const call = client.Watch({ service: 'envoy.service.ratelimit.v3.RateLimitService' });
    const ended = new Promise<void>((resolve) => {
      call.on('error', () => resolve());
      call.on('end', () => resolve());
    });
    const first = new Promise<void>((resolve) =>
      call.on('data', (m: { status: string }) => {
        seen.push(m.status);
        resolve();
      }),
    );
    await first;
    expect(seen).toEqual(['SERVING']);
    await server!.close(2_000);
    server = undefined;
    await ended;
    expect(seen.at(-1)).toBe('NOT_SERVING');
  });

  it('lets a call in flight finish after close() began, and refuses new connections', async () => {
    await start();
    const session = await connectHttp2(`http://127.0.0.1:${port}`, 5_000);
    try {
      const goaway = new Promise<number>((resolve) =>
        session.on('goaway', (code: number) => resolve(code)),
      );
      const inFlight = exchange(session, grpcFrame(encodeRequest(rlsRequest('p', [{ k: 'a' }]))));
      await waitFor('the service to hold the call', () => service.held === 1, {
        timeoutMs: 5_000,
        intervalMs: 5,
      });
      expect(service.held).toBe(1);
      const closing = server!.close(5_000);
      server = undefined;
      expect(await goaway).toBe(http2.constants.NGHTTP2_NO_ERROR);
      await expect(connectHttp2(`http://127.0.0.1:${port}`, 1_000)).rejects.toThrow();
      service.release();
      const res = await inFlight;
      expect(res.status).toBe('0');
      await closing;
    } finally {
      session.destroy();
    }
  });

  it('cancels what is still running when the grace period ends', async () => {
    await start();
    const session = await connectHttp2(`http://127.0.0.1:${port}`, 5_000);
    try {
      const inFlight = exchange(session, grpcFrame(encodeRequest(rlsRequest('p', [{ k: 'a' }]))));
      await waitFor('the service to hold the call', () => service.held === 1, {
        timeoutMs: 5_000,
        intervalMs: 5,
      });
      // The grace timer runs on a fake clock; the sockets stay real.
      vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
      let closed = false;
      let answered = false;
      const closing = server!.close(200).then(() => (closed = true));
      server = undefined;
      void inFlight.finally(() => (answered = true));
      await vi.advanceTimersByTimeAsync(199);
      await flushed(session);
      expect([closed, answered]).toEqual([false, false]);
      await vi.advanceTimersByTimeAsync(1);
      vi.useRealTimers();
      await closing;
      // The grace period ended the close, not the call: the service still holds it unanswered.
      expect(service.held).toBe(1);
      const res = await inFlight;
      expect(res.status).not.toBe('0');
    } finally {
      vi.useRealTimers();
      session.destroy();
    }
  });
});
