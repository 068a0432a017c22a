/**
 * Reference difference 2 (issue 12, issue 17): a request string that is not valid UTF-8 is refused
 * with INVALID_ARGUMENT and the reference's text (`grpc: error unmarshalling request: string field
 * contains invalid UTF-8`, as proto3 requires), never decoded with replacement characters and
 * counted.
 *
 * The requests are raw protobuf bytes sent over a real gRPC call (node:http2), so no client
 * library can repair them first. The suite runs once per gRPC server implementation
 * (`GRPC_SERVER`); add a kind to `SERVERS` to cover another one.
 */
import type http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { connectHttp2, grpcFrame, parseGrpcFrames, startRawCall } from '../helpers/grpc-wire.js';

const SERVERS = ['grpc-js', 'lean'] as const;
const METHOD = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';
const INVALID_ARGUMENT = '3';
/** The reference's text (grpc-go's prefix, protobuf-go's reason). */
const INVALID_UTF8 = 'grpc: error unmarshalling request: string field contains invalid UTF-8';

/** A length-delimited protobuf field. */
function field(number: number, body: Uint8Array): Buffer {
  const length: number[] = [];
  let n = body.length;
  do {
    let byte = n & 0x7f;
    n >>>= 7;
    if (n !== 0) byte |= 0x80;
    length.push(byte);
  } while (n !== 0);
  return Buffer.concat([Buffer.from([(number << 3) | 2, ...length]), body]);
}

/** RateLimitRequest { domain, descriptors: [{ entries: [{ key, value }] }] } as raw bytes. */
function request(domain: Uint8Array, key: Uint8Array, value: Uint8Array): Buffer {
  const entry = Buffer.concat([field(1, key), field(2, value)]);
  return Buffer.concat([field(1, domain), field(2, field(1, entry))]);
}

const text = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Byte strings that are not UTF-8, each with what is wrong. */
const INVALID: readonly [string, Buffer][] = [
  ['a lone continuation byte', Buffer.from([0x61, 0x80, 0x62])],
  ['0xff', Buffer.from([0x61, 0xff])],
  ['a truncated sequence', Buffer.from([0xe2, 0x82])],
  ['an encoded lone surrogate (U+D800)', Buffer.from([0xed, 0xa0, 0x80])],
  ['an overlong encoding of "/"', Buffer.from([0xc0, 0xaf])],
];

describe.each(SERVERS)('invalid UTF-8 in a request string (GRPC_SERVER=%s)', (kind) => {
  let running: RunningApp;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    const dir = await ruleDir({
      'u.yaml':
        'domain: u\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n',
    });
    running = await startApp([dir], { GRPC_SERVER: kind });
    session = await connectHttp2(`http://127.0.0.1:${running.port}`, 5_000);
  });
  afterAll(async () => {
    session?.close();
    await running?.stop();
  });

  async function call(message: Buffer) {
    const raw = startRawCall(session, METHOD, 5_000);
    raw.end(grpcFrame(message));
    return raw.result;
  }

  it.each(INVALID)('a value holding %s gets INVALID_ARGUMENT', async (_what, bad) => {
    const result = await call(request(text('u'), text('k'), bad));
    expect(result.failure).toBeUndefined();
    expect(result.grpcStatus).toBe(INVALID_ARGUMENT);
    expect(decodeURIComponent(result.grpcMessage ?? '')).toBe(INVALID_UTF8);
  });

  it('so does a bad key or a bad domain', async () => {
    for (const message of [
      request(text('u'), Buffer.from([0x6b, 0xff]), text('v')),
      request(Buffer.from([0xc3]), text('k'), text('v')),
    ]) {
      const result = await call(message);
      expect(result.grpcStatus).toBe(INVALID_ARGUMENT);
      expect(decodeURIComponent(result.grpcMessage ?? '')).toBe(INVALID_UTF8);
    }
  });

  it('nothing is counted for a refused request; U+FFFD sent as valid UTF-8 is an ordinary value', async () => {
    // The bad value would decode to "\uFFFD"; if it were counted, this value's counter would move.
    const replacement = text('\uFFFD');
    for (let i = 0; i < 3; i++) {
      expect((await call(request(text('u'), text('k'), Buffer.from([0xff])))).grpcStatus).toBe(
        INVALID_ARGUMENT,
      );
    }
    const ok = await call(request(text('u'), text('k'), replacement));
    expect(ok.grpcStatus).toBe('0');
    const [response] = parseGrpcFrames(ok.body);
    // RateLimitResponse.overall_code = OK (field 1, varint 1) comes first, then the status, whose
    // limit_remaining (field 3) is 1: the first of 2 hits this hour.
    expect(response?.subarray(0, 2)).toEqual(Buffer.from([0x08, 0x01]));
    const decoded = await running.client.shouldRateLimit({
      domain: 'u',
      descriptors: [{ entries: [{ key: 'k', value: '\uFFFD' }] }],
    });
    expect(decoded.statuses?.[0]?.limit_remaining).toBe(0);
  });
});
