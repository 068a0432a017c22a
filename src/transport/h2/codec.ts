/**
 * A strict, hand-written protobuf codec for exactly the messages the lean server speaks:
 * RateLimitRequest in, RateLimitResponse out (field numbers from `proto/`), and the two small
 * messages of grpc.health.v1. Decoding follows proto3: unknown fields are skipped, a known field
 * with another wire type is treated as unknown, a repeated singular message is merged, the last
 * scalar wins, and absent fields are zero values. Anything that is not a well-formed message
 * (a length running past the end, a varint longer than 10 bytes, field number 0, wire type 6 or
 * 7, an unbalanced group) throws a {@link SluiceError} with code MALFORMED_MESSAGE; a string
 * field that is not UTF-8, code INVALID_UTF8. The reading cursor is ./wire-reader.ts.
 */
import { SluiceError } from '../../errors.js';
import { Reader, WIRE_LEN, WIRE_VARINT } from './wire-reader.js';
import {
  RATE_LIMIT_UNITS,
  type DescriptorEntry,
  type DescriptorStatus,
  type HeaderValue,
  type JsonValue,
  type LimitOverride,
  type RateLimitRequest,
  type RateLimitResponse,
  type RateLimitUnit,
  type RequestDescriptor,
} from '../../model.js';

function unitOf(value: number): RateLimitUnit | undefined {
  // Wire numbers: SECOND=1 ... YEAR=6, WEEK=7; 0 (UNKNOWN) and numbers sluice does not know are
  // kept as "no unit" (proto3 enums are open).
  return value >= 1 && value <= RATE_LIMIT_UNITS.length ? RATE_LIMIT_UNITS[value - 1] : undefined;
}

interface MutableOverride {
  requestsPerUnit: number;
  unit: RateLimitUnit | undefined;
}

function readOverride(r: Reader, end: number, into: MutableOverride | undefined): MutableOverride {
  const outer = r.end;
  r.end = end;
  const o: MutableOverride = into ?? { requestsPerUnit: 0, unit: undefined };
  while (r.pos < end) {
    const field = r.tag();
    const wire = r.wire;
    if (field === 1 && wire === WIRE_VARINT) o.requestsPerUnit = r.uint32();
    else if (field === 2 && wire === WIRE_VARINT) o.unit = unitOf(r.uint32() | 0);
    else r.skip(wire, field, 0);
  }
  r.end = outer;
  return o;
}

/** google.protobuf.UInt64Value: field 1, a varint. */
function readUint64Value(r: Reader, end: number, into: number | undefined): number {
  const outer = r.end;
  r.end = end;
  let value = into ?? 0;
  while (r.pos < end) {
    const field = r.tag();
    const wire = r.wire;
    if (field === 1 && wire === WIRE_VARINT) value = r.varint();
    else r.skip(wire, field, 0);
  }
  r.end = outer;
  return value;
}

function readEntry(r: Reader, end: number, into: DescriptorEntry | undefined): DescriptorEntry {
  const outer = r.end;
  r.end = end;
  let key = into?.key ?? '';
  let value = into?.value ?? '';
  while (r.pos < end) {
    const field = r.tag();
    const wire = r.wire;
    if (field === 1 && wire === WIRE_LEN) key = r.string();
    else if (field === 2 && wire === WIRE_LEN) value = r.string();
    else r.skip(wire, field, 0);
  }
  r.end = outer;
  return { key, value };
}

function readDescriptor(r: Reader, end: number): RequestDescriptor {
  const outer = r.end;
  r.end = end;
  const entries: DescriptorEntry[] = [];
  let limit: MutableOverride | undefined;
  let hitsAddend: number | undefined;
  while (r.pos < end) {
    const field = r.tag();
    const wire = r.wire;
    if (wire === WIRE_LEN && field === 1) {
      const e = r.lengthEnd();
      entries.push(readEntry(r, e, undefined));
    } else if (wire === WIRE_LEN && field === 2) {
      const e = r.lengthEnd();
      limit = readOverride(r, e, limit);
    } else if (wire === WIRE_LEN && field === 3) {
      const e = r.lengthEnd();
      hitsAddend = readUint64Value(r, e, hitsAddend);
    } else {
      r.skip(wire, field, 0);
    }
  }
  r.end = outer;
  const override: LimitOverride | undefined = limit;
  return { entries, limit: override, hitsAddend };
}

/**
 * Decode a RateLimitRequest (envoy.service.ratelimit.v3, fields: domain 1, descriptors 2,
 * hits_addend 3) into its domain form. Throws a {@link SluiceError} (MALFORMED_MESSAGE or
 * INVALID_UTF8) for malformed bytes.
 */
export function decodeRateLimitRequest(buf: Uint8Array): RateLimitRequest {
  const r = new Reader(buf, 0, buf.length);
  let domain = '';
  const descriptors: RequestDescriptor[] = [];
  let hitsAddend = 0;
  while (r.pos < r.end) {
    const field = r.tag();
    const wire = r.wire;
    if (field === 1 && wire === WIRE_LEN) domain = r.string();
    else if (field === 2 && wire === WIRE_LEN) {
      const e = r.lengthEnd();
      descriptors.push(readDescriptor(r, e));
      r.pos = e;
    } else if (field === 3 && wire === WIRE_VARINT) hitsAddend = r.uint32();
    else r.skip(wire, field, 0);
  }
  return { domain, descriptors, hitsAddend };
}

/**
 * Decode a grpc.health.v1.HealthCheckRequest (`service`, field 1); returns the service name.
 */
export function decodeHealthCheckRequest(buf: Uint8Array): string {
  const r = new Reader(buf, 0, buf.length);
  let service = '';
  while (r.pos < r.end) {
    const field = r.tag();
    const wire = r.wire;
    if (field === 1 && wire === WIRE_LEN) service = r.string();
    else r.skip(wire, field, 0);
  }
  return service;
}

/** grpc.health.v1.HealthCheckResponse.ServingStatus numbers. */
export const SERVING_STATUS = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  SERVICE_UNKNOWN: 3,
} as const;

/** Encode a HealthCheckResponse with `status` (field 1). */
export function encodeHealthCheckResponse(status: number): Uint8Array {
  return status === 0 ? new Uint8Array(0) : Uint8Array.of(0x08, status);
}

// ---------------------------------------------------------------------------------------------
// Encoding: sizes first, then one buffer written front to back.

const CODE_NUMBER = { OK: 1, OVER_LIMIT: 2 } as const;
const UNIT_NUMBER: Readonly<Record<RateLimitUnit, number>> = Object.fromEntries(
  RATE_LIMIT_UNITS.map((unit, i) => [unit, i + 1]),
) as Record<RateLimitUnit, number>;

const encoder = new TextEncoder();

function varintSize(value: number): number {
  if (value < 0x80) return 1;
  if (value < 0x4000) return 2;
  if (value < 0x200000) return 3;
  if (value < 0x10000000) return 4;
  let size = 5;
  for (let v = Math.floor(value / 0x800000000); v > 0; v = Math.floor(v / 128)) size++;
  return size;
}

/** UTF-8 byte length of `s` without encoding it. */
function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        // A surrogate pair: 2 UTF-16 units, 4 bytes.
        n += 2;
        i++;
      } else n += 2;
    } else n += 2;
  }
  return n;
}

/** Bytes of a length-delimited field: tag + length + payload. */
function lenField(payload: number): number {
  return 1 + varintSize(payload) + payload;
}

/** Size of a google.protobuf.Value holding `value`. */
function valueSize(value: JsonValue): number {
  if (value === null || typeof value === 'boolean') return 2;
  if (typeof value === 'number') return 9;
  if (typeof value === 'string') return lenField(utf8Length(value));
  if (Array.isArray(value)) {
    let list = 0;
    for (const item of value as readonly JsonValue[]) list += lenField(valueSize(item));
    return lenField(list);
  }
  return lenField(structSize(value as { readonly [key: string]: JsonValue }));
}

function structSize(struct: { readonly [key: string]: JsonValue }): number {
  let size = 0;
  for (const key of Object.keys(struct)) {
    const entry = lenField(utf8Length(key)) + lenField(valueSize(struct[key]!));
    size += lenField(entry);
  }
  return size;
}

function currentLimitSize(status: DescriptorStatus): number {
  const limit = status.currentLimit!;
  let size = 0;
  if (limit.requestsPerUnit !== 0) size += 1 + varintSize(limit.requestsPerUnit);
  size += 2; // unit: never UNKNOWN for a configured rule
  if (limit.name !== '') size += lenField(utf8Length(limit.name));
  return size;
}

function durationSizeOf(ms: number): { seconds: number; nanos: number; size: number } {
  const whole = Math.max(0, Math.round(ms));
  const seconds = Math.floor(whole / 1000);
  const nanos = (whole % 1000) * 1_000_000;
  let size = 0;
  if (seconds !== 0) size += 1 + varintSize(seconds);
  if (nanos !== 0) size += 1 + varintSize(nanos);
  return { seconds, nanos, size };
}

function statusSize(status: DescriptorStatus): number {
  let size = 2; // code: OK or OVER_LIMIT, never 0
  if (status.currentLimit !== undefined) size += lenField(currentLimitSize(status));
  if (status.limitRemaining !== 0) size += 1 + varintSize(status.limitRemaining);
  if (status.durationUntilResetMs !== undefined) {
    size += lenField(durationSizeOf(status.durationUntilResetMs).size);
  }
  return size;
}

function headerSize(header: HeaderValue): number {
  let size = 0;
  if (header.key !== '') size += lenField(utf8Length(header.key));
  if (header.value !== '') size += lenField(utf8Length(header.value));
  return size;
}

/** Writes into a buffer of the exact size computed beforehand. */
class Writer {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  varint(value: number): void {
    const buf = this.buf;
    let pos = this.pos;
    while (value >= 0x80) {
      buf[pos++] = (value % 128) | 0x80;
      value = Math.floor(value / 128);
    }
    buf[pos++] = value;
    this.pos = pos;
  }

  string(s: string, length: number): void {
    this.varint(length);
    if (length === s.length) {
      const buf = this.buf;
      let pos = this.pos;
      for (let i = 0; i < s.length; i++) buf[pos++] = s.charCodeAt(i);
      this.pos = pos;
    } else {
      const { written } = encoder.encodeInto(s, this.buf.subarray(this.pos));
      this.pos += written;
    }
  }

  /** A string field: tag byte, length, bytes. */
  stringField(tag: number, s: string): void {
    this.byte(tag);
    this.string(s, utf8Length(s));
  }

  double(value: number): void {
    const view = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, 8);
    view.setFloat64(0, value, true);
    this.pos += 8;
  }

  value(value: JsonValue): void {
    if (value === null) {
      this.byte(0x08); // null_value = NULL_VALUE (0)
      this.byte(0);
      return;
    }
    if (typeof value === 'boolean') {
      this.byte(0x20); // bool_value, field 4
      this.byte(value ? 1 : 0);
      return;
    }
    if (typeof value === 'number') {
      this.byte(0x11); // number_value, field 2, fixed64
      this.double(value);
      return;
    }
    if (typeof value === 'string') {
      this.stringField(0x1a, value); // string_value, field 3
      return;
    }
    if (Array.isArray(value)) {
      const items = value as readonly JsonValue[];
      let list = 0;
      for (const item of items) list += lenField(valueSize(item));
      this.byte(0x32); // list_value, field 6
      this.varint(list);
      for (const item of items) {
        this.byte(0x0a); // ListValue.values, field 1
        this.varint(valueSize(item));
        this.value(item);
      }
      return;
    }
    const struct = value as { readonly [key: string]: JsonValue };
    this.byte(0x2a); // struct_value, field 5
    this.varint(structSize(struct));
    this.struct(struct);
  }

  struct(struct: { readonly [key: string]: JsonValue }): void {
    for (const key of Object.keys(struct)) {
      const item = struct[key]!;
      const keyLength = utf8Length(key);
      const itemSize = valueSize(item);
      this.byte(0x0a); // Struct.fields (map entry), field 1
      this.varint(lenField(keyLength) + lenField(itemSize));
      this.byte(0x0a); // entry key
      this.string(key, keyLength);
      this.byte(0x12); // entry value
      this.varint(itemSize);
      this.value(item);
    }
  }
}

/**
 * Encode a RateLimitResponse (fields: overall_code 1, statuses 2, response_headers_to_add 3,
 * raw_body 5, dynamic_metadata 6) into `prefix` bytes of free space followed by the message; the
 * caller fills the prefix (the 5-byte gRPC frame header). Proto3 zero values are not written.
 */
export function encodeRateLimitResponse(response: RateLimitResponse, prefix = 0): Buffer {
  const { statuses, responseHeadersToAdd, rawBody, dynamicMetadata } = response;
  let size = 2; // overall_code: OK or OVER_LIMIT, never 0
  for (let i = 0; i < statuses.length; i++) size += lenField(statusSize(statuses[i]!));
  for (let i = 0; i < responseHeadersToAdd.length; i++) {
    size += lenField(headerSize(responseHeadersToAdd[i]!));
  }
  if (rawBody !== undefined && rawBody.length > 0) size += lenField(rawBody.length);
  let metadataSize = 0;
  if (dynamicMetadata !== undefined) {
    metadataSize = structSize(dynamicMetadata);
    size += lenField(metadataSize);
  }

  const buf = Buffer.allocUnsafe(prefix + size);
  const w = new Writer(buf);
  w.pos = prefix;
  w.byte(0x08);
  w.byte(CODE_NUMBER[response.overallCode]);
  for (let i = 0; i < statuses.length; i++) {
    const status = statuses[i]!;
    w.byte(0x12);
    w.varint(statusSize(status));
    w.byte(0x08);
    w.byte(CODE_NUMBER[status.code]);
    const limit = status.currentLimit;
    if (limit !== undefined) {
      w.byte(0x12);
      w.varint(currentLimitSize(status));
      if (limit.requestsPerUnit !== 0) {
        w.byte(0x08);
        w.varint(limit.requestsPerUnit);
      }
      w.byte(0x10);
      w.byte(UNIT_NUMBER[limit.unit]);
      if (limit.name !== '') w.stringField(0x1a, limit.name);
    }
    if (status.limitRemaining !== 0) {
      w.byte(0x18);
      w.varint(status.limitRemaining);
    }
    if (status.durationUntilResetMs !== undefined) {
      const d = durationSizeOf(status.durationUntilResetMs);
      w.byte(0x22);
      w.varint(d.size);
      if (d.seconds !== 0) {
        w.byte(0x08);
        w.varint(d.seconds);
      }
      if (d.nanos !== 0) {
        w.byte(0x10);
        w.varint(d.nanos);
      }
    }
  }
  for (let i = 0; i < responseHeadersToAdd.length; i++) {
    const header = responseHeadersToAdd[i]!;
    w.byte(0x1a);
    w.varint(headerSize(header));
    if (header.key !== '') w.stringField(0x0a, header.key);
    if (header.value !== '') w.stringField(0x12, header.value);
  }
  if (rawBody !== undefined && rawBody.length > 0) {
    w.byte(0x2a);
    w.varint(rawBody.length);
    buf.set(rawBody, w.pos);
    w.pos += rawBody.length;
  }
  if (dynamicMetadata !== undefined) {
    w.byte(0x32);
    w.varint(metadataSize);
    w.struct(dynamicMetadata);
  }
  if (w.pos !== buf.length) {
    throw new SluiceError('INTERNAL', `response encoder wrote ${w.pos - prefix} of ${size} bytes`);
  }
  return buf;
}
