/**
 * The reading half of the lean server's protobuf codec (./codec.ts): a bounds-checked cursor over
 * a message's bytes that reads varints, fixed-width fields, length-delimited fields and strings,
 * and skips unknown fields and groups. Anything that is not well-formed throws a
 * {@link SluiceError} with code MALFORMED_MESSAGE; a string that is not UTF-8, INVALID_UTF8.
 */
import { SluiceError } from '../../errors.js';

/** The bytes are not a well-formed message of the expected type: MALFORMED_MESSAGE. */
function malformed(message: string): SluiceError {
  return new SluiceError('MALFORMED_MESSAGE', message);
}

/** Protobuf wire types. */
export const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
const WIRE_START_GROUP = 3;
const WIRE_END_GROUP = 4;
const WIRE_FIXED32 = 5;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * A cursor over one message's bytes. `end` bounds the current (sub)message; every read checks it,
 * so a length that claims more than is there fails instead of reading the parent's bytes.
 */
export class Reader {
  /** Where the next read starts, an index into `buf`. */
  pos: number;
  /** Where the current (sub)message ends, an index into `buf`. */
  end: number;

  constructor(
    readonly buf: Uint8Array,
    start: number,
    end: number,
  ) {
    this.pos = start;
    this.end = end;
  }

  /** A varint as a number, exact up to 2^53 (larger values lose precision, as `longs: Number`). */
  varint(): number {
    const buf = this.buf;
    let pos = this.pos;
    const end = this.end;
    if (pos < end) {
      const b = buf[pos]!;
      if (b < 0x80) {
        this.pos = pos + 1;
        return b;
      }
    }
    let result = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (pos >= end) throw malformed('truncated varint');
      const b = buf[pos++]!;
      if (i === 9 && b > 1) throw malformed('varint longer than 64 bits');
      result += (b & 0x7f) * scale;
      if (b < 0x80) {
        this.pos = pos;
        return result;
      }
      scale *= 128;
    }
    throw malformed('varint longer than 10 bytes');
  }

  /** A varint's low 32 bits, unsigned (how protobuf reads uint32 and enums). */
  uint32(): number {
    const buf = this.buf;
    const pos = this.pos;
    if (pos < this.end && buf[pos]! < 0x80) {
      this.pos = pos + 1;
      return buf[pos]!;
    }
    const start = pos;
    let low = 0;
    let shift = 0;
    let p = pos;
    for (let i = 0; i < 10; i++) {
      if (p >= this.end) throw malformed('truncated varint');
      const b = buf[p++]!;
      if (i === 9 && b > 1) throw malformed('varint longer than 64 bits');
      if (shift < 32) low |= (b & 0x7f) << shift;
      shift += 7;
      if (b < 0x80) {
        this.pos = p;
        return low >>> 0;
      }
    }
    this.pos = start;
    throw malformed('varint longer than 10 bytes');
  }

  /** A length prefix; returns the end offset of the bytes it announces. */
  lengthEnd(): number {
    const length = this.varint();
    const end = this.pos + length;
    if (end > this.end) {
      throw malformed(`length ${length} runs past the end of the message`);
    }
    return end;
  }

  /** A length-delimited UTF-8 string; invalid UTF-8 is an error, as proto3 requires. */
  string(): string {
    const end = this.lengthEnd();
    const buf = this.buf;
    const start = this.pos;
    this.pos = end;
    // Short ASCII strings (descriptor keys and values, domains) skip the decoder.
    if (end - start <= 64) {
      let ascii = true;
      for (let i = start; i < end; i++) {
        if (buf[i]! >= 0x80) {
          ascii = false;
          break;
        }
      }
      if (ascii) return latin1(buf, start, end);
    }
    try {
      return utf8.decode(buf.subarray(start, end));
    } catch {
      throw new SluiceError('INVALID_UTF8', 'string field is not valid UTF-8');
    }
  }

  /** Skip the value of a field with wire type `wire` (field `field`, for group matching). */
  skip(wire: number, field: number, depth: number): void {
    switch (wire) {
      case WIRE_VARINT:
        this.varint();
        return;
      case WIRE_FIXED64:
        this.advance(8);
        return;
      case WIRE_LEN:
        this.pos = this.lengthEnd();
        return;
      case WIRE_FIXED32:
        this.advance(4);
        return;
      case WIRE_START_GROUP: {
        if (depth > 100) throw malformed('groups nested too deeply');
        for (;;) {
          if (this.pos >= this.end) throw malformed('unterminated group');
          const tag = this.uint32();
          const number = tag >>> 3;
          const inner = tag & 7;
          if (number === 0) throw malformed('field number 0');
          if (inner === WIRE_END_GROUP) {
            if (number !== field) throw malformed('mismatched end group');
            return;
          }
          this.skip(inner, number, depth + 1);
        }
      }
      case WIRE_END_GROUP:
        throw malformed('end group without start group');
      default:
        throw malformed(`invalid wire type ${wire}`);
    }
  }

  private advance(bytes: number): void {
    if (this.pos + bytes > this.end) throw malformed('truncated fixed-width field');
    this.pos += bytes;
  }

  /** Read a tag; returns the field number and sets {@link wire}. Field number 0 is an error. */
  tag(): number {
    const tag = this.uint32();
    const number = tag >>> 3;
    if (number === 0) throw malformed('field number 0');
    this.wire = tag & 7;
    return number;
  }

  /** Wire type of the last tag read. */
  wire = 0;
}

/** `buf[start, end)` as a string of its bytes (the caller has checked they are ASCII). */
function latin1(buf: Uint8Array, start: number, end: number): string {
  const n = end - start;
  if (n === 0) return '';
  if (n === 1) return String.fromCharCode(buf[start]!);
  if (n <= 16) {
    let s = '';
    for (let i = start; i < end; i++) s += String.fromCharCode(buf[i]!);
    return s;
  }
  return String.fromCharCode.apply(null, buf.subarray(start, end) as unknown as number[]);
}
