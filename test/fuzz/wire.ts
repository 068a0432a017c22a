/**
 * Fuzz tooling for the gRPC port: a small protobuf writer for RateLimitRequest (written here, not
 * taken from src/, so the server's decoder is checked against an independent encoder; field
 * numbers from Envoy's rls.proto: domain 1, descriptors 2 { entries 1 { key 1, value 2 },
 * limit 2 { requests_per_unit 1, unit 2 }, hits_addend 3 (UInt64Value { value 1 }) },
 * hits_addend 3), fast-check arbitraries for requests, byte mutations and gRPC framings, and a raw
 * `node:http2` call that reports how the stream ended.
 */
import http2 from 'node:http2';
import zlib from 'node:zlib';
import fc from 'fast-check';
import { GrpcStatus } from '../../src/transport/status.js';

// ---- protobuf writing --------------------------------------------------------------------

/** A varint of an unsigned integer up to 2^64 - 1. */
function varint(value: bigint | number): number[] {
  let v = BigInt(value);
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

/** A tag byte sequence: field number and wire type. */
function tag(field: number, wire: number): number[] {
  return varint((BigInt(field) << 3n) | BigInt(wire));
}

/** A length-delimited field. */
function lenField(field: number, payload: Uint8Array): Uint8Array {
  return concat([Uint8Array.from([...tag(field, 2), ...varint(payload.length)]), payload]);
}

/** A varint field. */
function varintField(field: number, value: bigint | number): Uint8Array {
  return Uint8Array.from([...tag(field, 0), ...varint(value)]);
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  return Buffer.concat(parts);
}

const utf8 = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'utf8'));

/** A RateLimitRequest as the fuzzer builds it (numbers are wire values, units may be unknown). */
export interface WireRequest {
  readonly domain: string;
  readonly descriptors: readonly WireDescriptor[];
  /** uint32 on the wire. */
  readonly hitsAddend: number;
}

/** One descriptor. */
export interface WireDescriptor {
  readonly entries: readonly { readonly key: string; readonly value: string }[];
  /** `limit` override; `unit` is the enum number (0 = UNKNOWN, 1..7 known, others unknown). */
  readonly limit?: { readonly requestsPerUnit: number; readonly unit: number };
  /** UInt64Value hits_addend, up to 2^64 - 1. */
  readonly hitsAddend?: bigint;
}

/** Encode `request` (zero values omitted, as proto3 writers do). */
export function encodeRequest(request: WireRequest): Uint8Array {
  const parts: Uint8Array[] = [];
  if (request.domain !== '') parts.push(lenField(1, utf8(request.domain)));
  for (const d of request.descriptors) {
    const inner: Uint8Array[] = [];
    for (const e of d.entries) {
      const entry: Uint8Array[] = [];
      if (e.key !== '') entry.push(lenField(1, utf8(e.key)));
      if (e.value !== '') entry.push(lenField(2, utf8(e.value)));
      inner.push(lenField(1, concat(entry)));
    }
    if (d.limit !== undefined) {
      const limit: Uint8Array[] = [];
      if (d.limit.requestsPerUnit !== 0) limit.push(varintField(1, d.limit.requestsPerUnit));
      if (d.limit.unit !== 0) limit.push(varintField(2, d.limit.unit));
      inner.push(lenField(2, concat(limit)));
    }
    if (d.hitsAddend !== undefined) {
      inner.push(
        lenField(3, d.hitsAddend === 0n ? new Uint8Array() : varintField(1, d.hitsAddend)),
      );
    }
    parts.push(lenField(2, concat(inner)));
  }
  if (request.hitsAddend !== 0) parts.push(varintField(3, request.hitsAddend));
  return concat(parts);
}

// ---- arbitraries -------------------------------------------------------------------------

/** Strings the rules know, plus anything (ASCII, any Unicode, empty). */
const text = (known: readonly string[]): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.constantFrom(...known) },
    { weight: 2, arbitrary: fc.string({ maxLength: 12 }) },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 8 }) },
    { weight: 1, arbitrary: fc.constant('') },
  );

/** A limit override with any unit number: UNKNOWN (0), the 7 units, and numbers none knows. */
export const limitArb = fc.record({
  requestsPerUnit: fc.oneof(fc.nat(100), fc.constant(0xffffffff), fc.nat()),
  unit: fc.oneof(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 8, max: 0xffffffff })),
});

/** hits_addend: small, at uint32 bounds, or anything up to 2^64 - 1. */
export const bigHits = fc.oneof(
  fc.bigInt({ min: 0n, max: 5n }),
  fc.constantFrom(0xffffffffn, 0x100000000n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 64n - 1n),
  fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
);

/** Structurally valid requests aimed at the fuzz rules (domain `fuzz`, keys `k`, `tight`). */
const requestArb: fc.Arbitrary<WireRequest> = fc.record({
  domain: text(['fuzz', 'fuzz', 'nope']),
  descriptors: fc.array(
    fc.record(
      {
        entries: fc.array(
          fc.record({ key: text(['k', 'tight', 'nested']), value: text(['a', 'b', 'x']) }),
          { maxLength: 4 },
        ),
        limit: limitArb,
        hitsAddend: bigHits,
      },
      { requiredKeys: ['entries'] },
    ),
    { maxLength: 5 },
  ),
  hitsAddend: fc.oneof(fc.nat(3), fc.constant(0xffffffff), fc.nat()),
});

/** One byte-level change to a message. */
type Mutation =
  | { readonly op: 'set'; readonly at: number; readonly byte: number }
  | { readonly op: 'flip'; readonly at: number; readonly bit: number }
  | { readonly op: 'insert'; readonly at: number; readonly bytes: Uint8Array }
  | { readonly op: 'delete'; readonly at: number; readonly count: number }
  | { readonly op: 'duplicate'; readonly at: number; readonly count: number }
  | { readonly op: 'truncate'; readonly at: number }
  | { readonly op: 'varint'; readonly at: number; readonly bytes: Uint8Array };

const at = fc.nat();
const mutationArb: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('set' as const), at, byte: fc.nat(255) }),
  fc.record({ op: fc.constant('flip' as const), at, bit: fc.nat(7) }),
  fc.record({
    op: fc.constant('insert' as const),
    at,
    bytes: fc.uint8Array({ minLength: 1, maxLength: 8 }),
  }),
  fc.record({ op: fc.constant('delete' as const), at, count: fc.integer({ min: 1, max: 8 }) }),
  fc.record({ op: fc.constant('duplicate' as const), at, count: fc.integer({ min: 1, max: 16 }) }),
  fc.record({ op: fc.constant('truncate' as const), at }),
  // A run of continuation bytes (an overlong or unterminated varint, a huge length).
  fc.record({
    op: fc.constant('varint' as const),
    at,
    bytes: fc.constantFrom(
      Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0x0f),
      Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
      Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
      Uint8Array.of(0x80, 0x80, 0x80),
      Uint8Array.of(0x00),
    ),
  }),
);

/** Apply `mutation` to `bytes` (positions taken modulo the length). */
function mutate(bytes: Uint8Array, mutation: Mutation): Uint8Array {
  const b = Buffer.from(bytes);
  const n = b.length;
  const pos = n === 0 ? 0 : mutation.at % (n + 1);
  switch (mutation.op) {
    case 'set':
      if (n > 0) b[pos % n] = mutation.byte;
      return b;
    case 'flip':
      if (n > 0) b[pos % n]! ^= 1 << mutation.bit;
      return b;
    case 'insert':
      return Buffer.concat([b.subarray(0, pos), mutation.bytes, b.subarray(pos)]);
    case 'delete':
      return Buffer.concat([b.subarray(0, pos), b.subarray(pos + mutation.count)]);
    case 'duplicate':
      return Buffer.concat([b.subarray(0, pos + mutation.count), b.subarray(pos)]);
    case 'truncate':
      return b.subarray(0, pos);
    case 'varint':
      return Buffer.concat([b.subarray(0, pos), mutation.bytes, b.subarray(pos + 1)]);
  }
}

/** A message: random bytes, a valid request, or a valid request with 1 to 4 mutations. */
export const messageArb: fc.Arbitrary<{ readonly kind: string; readonly bytes: Uint8Array }> =
  fc.oneof(
    {
      weight: 1,
      arbitrary: fc.uint8Array({ maxLength: 300 }).map((bytes) => ({ kind: 'random', bytes })),
    },
    { weight: 2, arbitrary: requestArb.map((r) => ({ kind: 'valid', bytes: encodeRequest(r) })) },
    {
      weight: 4,
      arbitrary: fc
        .tuple(requestArb, fc.array(mutationArb, { minLength: 1, maxLength: 4 }))
        .map(([r, ms]) => ({ kind: 'mutated', bytes: ms.reduce(mutate, encodeRequest(r)) })),
    },
  );

// ---- framing -----------------------------------------------------------------------------

/** How a message is put on the stream. */
export type Framing =
  /** A correct 5-byte prefix, uncompressed. */
  | { readonly kind: 'plain' }
  /** The prefix announces `delta` bytes more (or fewer) than follow. */
  | { readonly kind: 'wrong-length'; readonly delta: number }
  /** The prefix announces this many bytes, far more than any limit. */
  | { readonly kind: 'huge-length'; readonly length: number }
  /** Compressed with `grpc-encoding` (flag 1); `corrupt` flips a byte of the compressed data. */
  | {
      readonly kind: 'compressed';
      readonly encoding: 'gzip' | 'deflate';
      readonly corrupt: boolean;
    }
  /** Flag 1 with `grpc-encoding` absent, `identity` or one the server does not support. */
  | { readonly kind: 'flag-without-encoding'; readonly header: string | undefined }
  /** A compressed-flag byte other than 0 and 1. */
  | { readonly kind: 'bad-flag'; readonly flag: number }
  /** A correct frame cut short after `keep` bytes (1 .. length - 1). */
  | { readonly kind: 'truncated'; readonly keep: number }
  /** No message at all. */
  | { readonly kind: 'empty' }
  /** The message twice. */
  | { readonly kind: 'twice' };

export const framingArb: fc.Arbitrary<Framing> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ kind: 'plain' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('wrong-length' as const),
      delta: fc.oneof(fc.integer({ min: -300, max: -1 }), fc.integer({ min: 1, max: 300 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('huge-length' as const),
      length: fc.oneof(fc.constant(0xffffffff), fc.integer({ min: 1_048_577, max: 0xfffffffe })),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('compressed' as const),
      encoding: fc.constantFrom('gzip' as const, 'deflate' as const),
      corrupt: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('flag-without-encoding' as const),
      header: fc.constantFrom(undefined, 'identity', 'snappy', 'br'),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('bad-flag' as const),
      flag: fc.integer({ min: 2, max: 255 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('truncated' as const), keep: fc.nat() }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'empty' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'twice' as const }) },
);

/** A request body and its extra headers. */
export interface FramedCall {
  readonly body: Buffer;
  readonly headers: http2.OutgoingHttpHeaders;
}

function prefix(flag: number, length: number): Buffer {
  const p = Buffer.alloc(5);
  p[0] = flag;
  p.writeUInt32BE(length >>> 0, 1);
  return p;
}

/** Put `message` on the wire as `framing` says. */
export function frameMessage(message: Uint8Array, framing: Framing): FramedCall {
  const m = Buffer.from(message);
  switch (framing.kind) {
    case 'plain':
      return { body: Buffer.concat([prefix(0, m.length), m]), headers: {} };
    case 'wrong-length':
      return {
        body: Buffer.concat([prefix(0, Math.max(0, m.length + framing.delta)), m]),
        headers: {},
      };
    case 'huge-length':
      return { body: Buffer.concat([prefix(0, framing.length), m]), headers: {} };
    case 'compressed': {
      const z = framing.encoding === 'gzip' ? zlib.gzipSync(m) : zlib.deflateSync(m);
      if (framing.corrupt) z[Math.floor(z.length / 2)]! ^= 0x5a;
      return {
        body: Buffer.concat([prefix(1, z.length), z]),
        headers: { 'grpc-encoding': framing.encoding },
      };
    }
    case 'flag-without-encoding':
      return {
        body: Buffer.concat([prefix(1, m.length), m]),
        headers: framing.header === undefined ? {} : { 'grpc-encoding': framing.header },
      };
    case 'bad-flag':
      return { body: Buffer.concat([prefix(framing.flag, m.length), m]), headers: {} };
    case 'truncated': {
      const whole = Buffer.concat([prefix(0, m.length), m]);
      return { body: whole.subarray(0, 1 + (framing.keep % (whole.length - 1))), headers: {} };
    }
    case 'empty':
      return { body: Buffer.alloc(0), headers: {} };
    case 'twice': {
      const one = Buffer.concat([prefix(0, m.length), m]);
      return { body: Buffer.concat([one, one]), headers: {} };
    }
  }
}

/** Cut `body` into pieces at `cuts` (positions modulo the length), for separate DATA frames. */
export function chunk(body: Buffer, cuts: readonly number[]): Buffer[] {
  if (body.length === 0) return [body];
  const points = [...new Set(cuts.map((c) => c % body.length))]
    .filter((c) => c > 0)
    .sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    out.push(body.subarray(from, p));
    from = p;
  }
  out.push(body.subarray(from));
  return out;
}

// ---- raw calls ---------------------------------------------------------------------------

/** The RLS method path. */
const RLS_PATH = '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit';

/** How a raw call ended. */
export interface Outcome {
  /** `:status` of the response headers, when any arrived. */
  readonly httpStatus: number | undefined;
  /** `content-type` of the response headers. */
  readonly contentType: string | undefined;
  /** `grpc-status` from the trailers or a Trailers-Only response. */
  readonly grpcStatus: number | undefined;
  /** `grpc-message`, percent-decoded. */
  readonly grpcMessage: string | undefined;
  /** The response body (length-prefixed messages). */
  readonly body: Buffer;
  /** Why the stream ended abnormally (timeout, error, reset code), `undefined` when it did not. */
  readonly failure: string | undefined;
}

/**
 * Send one call on `session`: request headers plus `headers`, then each of `chunks` in turn, then
 * end the request. Settles when the stream closes, or cancels it after `timeoutMs`.
 */
export function rawCall(
  session: http2.ClientHttp2Session,
  chunks: readonly Buffer[],
  headers: http2.OutgoingHttpHeaders,
  timeoutMs: number,
): Promise<Outcome> {
  return new Promise((resolve) => {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request({
        ':method': 'POST',
        ':path': RLS_PATH,
        'content-type': 'application/grpc',
        te: 'trailers',
        ...headers,
      });
    } catch (err) {
      resolve({
        httpStatus: undefined,
        contentType: undefined,
        grpcStatus: undefined,
        grpcMessage: undefined,
        body: Buffer.alloc(0),
        failure: `request not sent: ${(err as Error).message}`,
      });
      return;
    }
    let httpStatus: number | undefined;
    let contentType: string | undefined;
    let grpcStatus: number | undefined;
    let grpcMessage: string | undefined;
    let failure: string | undefined;
    const body: Buffer[] = [];
    const readStatus = (h: http2.IncomingHttpHeaders): void => {
      const s = h['grpc-status'];
      if (typeof s === 'string') grpcStatus = Number(s);
      const m = h['grpc-message'];
      if (typeof m === 'string') grpcMessage = safeDecode(m);
    };
    stream.on('response', (h) => {
      httpStatus = h[':status'];
      contentType = h['content-type'];
      readStatus(h);
    });
    stream.on('trailers', readStatus);
    stream.on('data', (c: Buffer) => body.push(c));
    // The server may answer (and close) before the whole request is written: write errors then
    // are expected, and the status already received is what counts.
    stream.on('error', (err) => {
      failure ??= `stream error: ${err.message}`;
    });
    const timer = setTimeout(() => {
      failure = `no end of stream within ${timeoutMs} ms`;
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }, timeoutMs);
    stream.on('close', () => {
      clearTimeout(timer);
      if (stream.rstCode !== undefined && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
        failure ??= `stream reset with HTTP/2 code ${stream.rstCode}`;
      }
      resolve({
        httpStatus,
        contentType,
        grpcStatus,
        grpcMessage,
        body: Buffer.concat(body),
        failure,
      });
    });
    const writeNext = (i: number): void => {
      if (stream.destroyed || stream.closed) return;
      if (i === chunks.length - 1) {
        stream.end(chunks[i]);
        return;
      }
      stream.write(chunks[i], () => writeNext(i + 1));
    };
    writeNext(0);
  });
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** One HTTP/2 connection that is re-opened if the server closed it. */
export class Connection {
  private current: http2.ClientHttp2Session | undefined;
  /** Sessions opened so far (1 unless the server closed one). */
  opened = 0;

  constructor(private readonly authority: string) {}

  /** The open session, connecting first when there is none. */
  async session(): Promise<http2.ClientHttp2Session> {
    const s = this.current;
    if (s !== undefined && !s.closed && !s.destroyed) return s;
    const next = http2.connect(this.authority);
    next.on('error', () => {});
    await new Promise<void>((resolve, reject) => {
      next.once('connect', () => resolve());
      next.once('error', reject);
    });
    this.opened++;
    this.current = next;
    return next;
  }

  /** Close the session. */
  close(): void {
    this.current?.close();
    this.current = undefined;
  }
}

// ---- shared rules and checks -------------------------------------------------------------

/** Rules the fuzzed requests aim at, and a separate domain holding the counter checked after. */
export const FUZZ_RULES = {
  'fuzz.yaml': [
    'domain: fuzz',
    'descriptors:',
    '  - key: k',
    '    rate_limit: {unit: minute, requests_per_unit: 1000000}',
    '  - key: tight',
    '    rate_limit: {unit: second, requests_per_unit: 1}',
    '  - key: nested',
    '    descriptors:',
    '      - key: k',
    '        rate_limit: {unit: hour, requests_per_unit: 5}',
    '',
  ].join('\n'),
  'sentinel.yaml':
    'domain: sentinel\ndescriptors:\n  - key: probe\n    rate_limit: {unit: hour, requests_per_unit: 10}\n',
};

/** What is wrong with `outcome`, or `undefined` when it is a proper gRPC answer. */
export function problemWith(outcome: Outcome, expected: ReadonlySet<number>): string | undefined {
  if (outcome.grpcStatus === undefined) {
    return `no grpc-status (http ${outcome.httpStatus}, ${outcome.failure ?? 'closed cleanly'})`;
  }
  if (outcome.httpStatus !== 200) return `HTTP status ${outcome.httpStatus}`;
  if (!outcome.contentType?.startsWith('application/grpc')) {
    return `content-type ${outcome.contentType}`;
  }
  if (!expected.has(outcome.grpcStatus)) {
    return `grpc-status ${outcome.grpcStatus} (${outcome.grpcMessage}) not one of ${[...expected].join(', ')}`;
  }
  if (outcome.grpcStatus !== GrpcStatus.OK && !outcome.grpcMessage)
    return 'a failure without grpc-message';
  return undefined;
}
