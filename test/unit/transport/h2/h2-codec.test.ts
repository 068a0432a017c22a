/**
 * The lean server's codec and framing on hand-made bytes: the strictness rules random messages
 * from a well-behaved encoder never reach (test/contract/rls-codec.test.ts covers those).
 */
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../../../src/errors.js';
import {
  decodeHealthCheckRequest,
  decodeRateLimitRequest,
  encodeHealthCheckResponse,
} from '../../../../src/transport/h2/codec.js';
import { encodeGrpcMessage, parseGrpcTimeout } from '../../../../src/transport/h2/framing.js';

const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);
const ascii = (s: string): number[] => [...Buffer.from(s, 'utf8')];

/** Field 2 (one descriptor) holding one entry {k: v}. */
const ONE_DESCRIPTOR = [0x12, 0x08, 0x0a, 0x06, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x76];

describe('decodeRateLimitRequest refuses what is not a well-formed message', () => {
  const refuses = (input: Uint8Array, reason: RegExp): void => {
    const code = reason.source.includes('UTF-8') ? 'INVALID_UTF8' : 'MALFORMED_MESSAGE';
    expect(() => decodeRateLimitRequest(input)).toThrow(
      expect.objectContaining({ name: 'SluiceError', code }),
    );
    expect(() => decodeRateLimitRequest(input)).toThrow(reason);
  };

  it('a domain that claims 9 bytes but carries 1 (the lenient decode answered domain "a")', () => {
    refuses(bytes(0x0a, 0x09, 0x61), /length 9 runs past the end/);
  });

  it('a descriptor whose length runs past the request, even when its own fields fit', () => {
    refuses(bytes(0x0a, 0x01, 0x64, 0x12, 0x05, 0x01), /runs past the end/);
    // The entry claims 7 bytes inside a descriptor of 8 that holds only 6 after it.
    refuses(bytes(0x12, 0x08, 0x0a, 0x07, 0x0a, 0x01, 0x6b, 0x12, 0x01, 0x76), /runs past/);
  });

  it('invalid UTF-8 in any string: domain, entry key, entry value', () => {
    refuses(bytes(0x0a, 0x01, 0xff), /not valid UTF-8/);
    refuses(bytes(0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xc3), /not valid UTF-8/);
    // An encoded surrogate half (ED A0 80) is not UTF-8 either.
    refuses(bytes(0x12, 0x07, 0x0a, 0x05, 0x12, 0x03, 0xed, 0xa0, 0x80), /not valid UTF-8/);
  });

  it('wire types 6 and 7, field number 0, a varint over 10 bytes, an unbalanced group', () => {
    refuses(bytes(0x9e, 0x06, 0x01), /invalid wire type 6/);
    refuses(bytes(0x9f, 0x06, 0x01), /invalid wire type 7/);
    refuses(bytes(0x02, 0x00), /field number 0/);
    refuses(bytes(0x18, ...Array<number>(10).fill(0xff), 0x01), /varint/);
    refuses(bytes(0x18, 0x80), /truncated varint/);
    refuses(bytes(0x9b, 0x06, 0x08, 0x01), /unterminated group/); // field 99 group, never ended
    refuses(bytes(0x9c, 0x06), /end group without start/);
    refuses(bytes(0x9b, 0x06, 0xa4, 0x06), /mismatched end group/); // starts 99, ends 100
    refuses(bytes(0x9d, 0x06, 0x01, 0x02), /truncated fixed-width/); // fixed32 with 2 bytes
  });
});

describe('decodeRateLimitRequest reads proto3 as specified', () => {
  it('keeps non-ASCII strings, including 4-byte characters', () => {
    const domain = 'dömäin-🚦';
    const encoded = Buffer.from(domain, 'utf8');
    const request = decodeRateLimitRequest(bytes(0x0a, encoded.length, ...encoded));
    expect(request.domain).toBe(domain);
  });

  it('skips unknown fields of every wire type, groups included', () => {
    const unknown = [
      ...[0x98, 0x06, 0x96, 0x01], // 99: varint 150
      ...[0x99, 0x06, 1, 2, 3, 4, 5, 6, 7, 8], // 99: fixed64
      ...[0x9a, 0x06, 0x02, 0xff, 0xfe], // 99: bytes, not UTF-8 (not a string field)
      ...[0x9d, 0x06, 1, 2, 3, 4], // 99: fixed32
      ...[0x9b, 0x06, 0x08, 0x01, 0x9b, 0x06, 0x9c, 0x06, 0x9c, 0x06], // 99: nested groups
    ];
    const request = decodeRateLimitRequest(
      bytes(...unknown, 0x0a, 0x01, 0x64, ...unknown, ...ONE_DESCRIPTOR),
    );
    expect(request).toEqual({
      domain: 'd',
      hitsAddend: 0,
      descriptors: [
        { entries: [{ key: 'k', value: 'v' }], limit: undefined, hitsAddend: undefined },
      ],
    });
  });

  it('treats a known field number with another wire type as unknown', () => {
    // domain (1) sent as a varint, hits_addend (3) as bytes: both skipped.
    const request = decodeRateLimitRequest(bytes(0x08, 0x05, 0x1a, 0x01, 0x07, ...ONE_DESCRIPTOR));
    expect(request.domain).toBe('');
    expect(request.hitsAddend).toBe(0);
    expect(request.descriptors).toHaveLength(1);
  });

  it('lets the last scalar win and merges a singular message sent twice', () => {
    const request = decodeRateLimitRequest(
      bytes(
        ...[0x0a, 0x01, ...ascii('a'), 0x0a, 0x01, ...ascii('b')],
        ...[0x18, 0x02, 0x18, 0x03],
        // One descriptor: limit {requests_per_unit: 10}, then limit {unit: HOUR}: merged.
        ...[0x12, 0x08, 0x12, 0x02, 0x08, 0x0a, 0x12, 0x02, 0x10, 0x03],
      ),
    );
    expect(request.domain).toBe('b');
    expect(request.hitsAddend).toBe(3);
    expect(request.descriptors[0]!.limit).toEqual({ requestsPerUnit: 10, unit: 'hour' });
  });

  it('reads uint32 fields as the low 32 bits of the varint, enums out of range as no unit', () => {
    // hits_addend = 2^32 + 5 (a 5-byte varint): uint32 keeps 5.
    const request = decodeRateLimitRequest(
      bytes(0x18, 0x85, 0x80, 0x80, 0x80, 0x10, 0x12, 0x04, 0x12, 0x02, 0x10, 0x09),
    );
    expect(request.hitsAddend).toBe(5);
    expect(request.descriptors[0]!.limit).toEqual({ requestsPerUnit: 0, unit: undefined });
  });

  it('keeps a per-descriptor hits_addend of 0 as present (UInt64Value)', () => {
    const request = decodeRateLimitRequest(bytes(0x12, 0x02, 0x1a, 0x00));
    expect(request.descriptors[0]!.hitsAddend).toBe(0);
  });

  it('an empty message is all zero values', () => {
    expect(decodeRateLimitRequest(bytes())).toEqual({ domain: '', descriptors: [], hitsAddend: 0 });
  });
});

describe('health messages', () => {
  it('decodes the service name and encodes each status', () => {
    expect(decodeHealthCheckRequest(bytes(0x0a, 0x01, 0x78))).toBe('x');
    expect(decodeHealthCheckRequest(bytes())).toBe('');
    expect(() => decodeHealthCheckRequest(bytes(0x0a, 0x02, 0x78))).toThrow(SluiceError);
    expect(() => decodeHealthCheckRequest(bytes(0x0a, 0x02, 0x78))).toThrow(
      expect.objectContaining({ code: 'MALFORMED_MESSAGE' }),
    );
    expect([...encodeHealthCheckResponse(1)]).toEqual([0x08, 0x01]);
    expect([...encodeHealthCheckResponse(0)]).toEqual([]);
  });
});

describe('framing', () => {
  it('parses grpc-timeout in every unit and refuses malformed values', () => {
    expect(parseGrpcTimeout(undefined)).toBeUndefined();
    expect(parseGrpcTimeout('20m')).toBe(20);
    expect(parseGrpcTimeout('1S')).toBe(1000);
    expect(parseGrpcTimeout('2M')).toBe(120_000);
    expect(parseGrpcTimeout('1H')).toBe(3_600_000);
    expect(parseGrpcTimeout('1500u')).toBe(1.5);
    expect(parseGrpcTimeout('99999999n')).toBeCloseTo(99.999999);
    for (const bad of ['', 'm', '20', '20x', '123456789m', '-1m', '1.5S']) {
      expect(parseGrpcTimeout(bad), bad).toBeNaN();
    }
  });

  it('percent-encodes grpc-message: non-printable, non-ASCII and % itself', () => {
    expect(encodeGrpcMessage('plain text')).toBe('plain text');
    expect(encodeGrpcMessage('100% sure\nnext')).toBe('100%25 sure%0Anext');
    expect(encodeGrpcMessage('é')).toBe('%C3%A9');
  });
});
