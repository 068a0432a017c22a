/**
 * Protobuf shapes (as decoded by proto-loader with LOADER_OPTIONS) <-> domain types. The only
 * place that sees wire objects; proto3 zero values for absent fields are applied here.
 */
import { isUtf8 } from 'node:buffer';
import {
  RATE_LIMIT_UNITS,
  type DescriptorEntry,
  type DescriptorStatus,
  type JsonValue,
  type LimitOverride,
  type RateLimitRequest,
  type RateLimitResponse,
  type RateLimitUnit,
  type RequestDescriptor,
} from '../../model.js';

/** `SECOND` -> `second`, ...: the wire enum names are the units in upper case. */
const UNIT_BY_WIRE: Readonly<Record<string, RateLimitUnit>> = Object.fromEntries(
  RATE_LIMIT_UNITS.map((unit) => [unit.toUpperCase(), unit]),
);

/** Wire enum name of a unit (`SECOND` ...). */
export function unitToWire(unit: RateLimitUnit): string {
  return unit.toUpperCase();
}

/** A unit from its wire form: enum name or number (unknown numbers arrive as numbers). */
export function unitFromWire(value: unknown): RateLimitUnit | undefined {
  if (typeof value === 'string') return UNIT_BY_WIRE[value];
  if (typeof value === 'number' && value >= 1) return RATE_LIMIT_UNITS[value - 1];
  return undefined;
}

function str(value: unknown): string {
  return typeof value === 'string' ? value : '';
}

function uint(value: unknown): number {
  return typeof value === 'number' && value > 0 ? value : 0;
}

/** Map a decoded RateLimitRequest. Absent fields become proto3 zero values. */
export function requestFromWire(wire: any): RateLimitRequest {
  const wireDescriptors: any[] = Array.isArray(wire?.descriptors) ? wire.descriptors : [];
  const descriptors: RequestDescriptor[] = new Array<RequestDescriptor>(wireDescriptors.length);
  for (let i = 0; i < wireDescriptors.length; i++) {
    const d = wireDescriptors[i];
    const wireEntries: any[] = Array.isArray(d?.entries) ? d.entries : [];
    const entries: DescriptorEntry[] = new Array<DescriptorEntry>(wireEntries.length);
    for (let j = 0; j < wireEntries.length; j++) {
      const e = wireEntries[j];
      entries[j] = { key: str(e?.key), value: str(e?.value) };
    }
    let limit: LimitOverride | undefined;
    if (d?.limit != null) {
      limit = {
        requestsPerUnit: uint(d.limit.requests_per_unit),
        unit: unitFromWire(d.limit.unit),
      };
    }
    // UInt64Value: present (even with value 0) means "use this", absent means "use the request's".
    const hitsAddend = d?.hits_addend != null ? uint(d.hits_addend.value) : undefined;
    descriptors[i] = { entries, limit, hitsAddend };
  }
  return { domain: str(wire?.domain), descriptors, hitsAddend: uint(wire?.hits_addend) };
}

function statusToWire(status: DescriptorStatus): any {
  const wire: any = { code: status.code, limit_remaining: status.limitRemaining };
  if (status.currentLimit !== undefined) {
    wire.current_limit = {
      requests_per_unit: status.currentLimit.requestsPerUnit,
      unit: unitToWire(status.currentLimit.unit),
      name: status.currentLimit.name,
    };
  }
  if (status.durationUntilResetMs !== undefined) {
    wire.duration_until_reset = durationToWire(status.durationUntilResetMs);
  }
  return wire;
}

/** A google.protobuf.Duration from milliseconds (millisecond precision kept). */
export function durationToWire(ms: number): { seconds: number; nanos: number } {
  const whole = Math.max(0, Math.round(ms));
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 };
}

/** Map a domain response to the wire shape proto-loader encodes. */
export function responseToWire(response: RateLimitResponse): any {
  const statuses = new Array<any>(response.statuses.length);
  for (let i = 0; i < statuses.length; i++) statuses[i] = statusToWire(response.statuses[i]!);
  return {
    overall_code: response.overallCode,
    statuses,
    response_headers_to_add: response.responseHeadersToAdd,
    raw_body: response.rawBody === undefined ? undefined : Buffer.from(response.rawBody),
    dynamic_metadata:
      response.dynamicMetadata === undefined ? undefined : structToWire(response.dynamicMetadata),
  };
}

/** A google.protobuf.Struct (proto-loader shape, keepCase) from plain JSON fields. */
export function structToWire(fields: Readonly<Record<string, JsonValue>>): any {
  const out: Record<string, any> = {};
  for (const [key, value] of Object.entries(fields)) out[key] = valueToWire(value);
  return { fields: out };
}

/**
 * A google.protobuf.Value from a JSON value. The field names are camelCase even with keepCase:
 * protobufjs defines the google/protobuf/struct.proto types itself, with camelCase names.
 */
function valueToWire(value: JsonValue): any {
  if (value === null) return { nullValue: 'NULL_VALUE' };
  if (typeof value === 'boolean') return { boolValue: value };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(valueToWire) } };
  return { structValue: structToWire(value as Readonly<Record<string, JsonValue>>) };
}

/**
 * Proto3 requires string fields to hold valid UTF-8, and the reference refuses a request whose
 * strings do not ("string field contains invalid UTF-8"). The decoder (protobufjs on a Buffer)
 * replaces bad bytes with U+FFFD instead, so a decoded request without U+FFFD is valid; one with
 * it is checked again on the raw bytes, since U+FFFD may also have been sent on purpose.
 *
 * Returns which field is invalid (e.g. `descriptors[0].entries[1].value`), or `undefined`.
 * Allocates nothing on the common path.
 */
export function findInvalidUtf8(bytes: Uint8Array, wire: any): string | undefined {
  if (!mayHoldReplacement(wire)) return undefined;
  return scanRequest(bytes);
}

const REPLACEMENT = '\uFFFD';

function mayHoldReplacement(wire: any): boolean {
  if (typeof wire?.domain === 'string' && wire.domain.includes(REPLACEMENT)) return true;
  const descriptors: unknown = wire?.descriptors;
  if (!Array.isArray(descriptors)) return false;
  for (let i = 0; i < descriptors.length; i++) {
    const entries: unknown = descriptors[i]?.entries;
    if (!Array.isArray(entries)) continue;
    for (let j = 0; j < entries.length; j++) {
      const e = entries[j];
      if (typeof e?.key === 'string' && e.key.includes(REPLACEMENT)) return true;
      if (typeof e?.value === 'string' && e.value.includes(REPLACEMENT)) return true;
    }
  }
  return false;
}

/** Walks RateLimitRequest bytes: domain=1, descriptors=2 { entries=1 { key=1, value=2 } }. */
function scanRequest(bytes: Uint8Array): string | undefined {
  let descriptor = 0;
  return scanMessage(bytes, 0, bytes.length, (field, start, end) => {
    if (field === 1) return isUtf8(bytes.subarray(start, end)) ? undefined : 'domain';
    if (field !== 2) return undefined;
    const d = descriptor++;
    let entry = 0;
    return scanMessage(bytes, start, end, (f, s, e) => {
      if (f !== 1) return undefined;
      const n = entry++;
      return scanMessage(bytes, s, e, (ef, es, ee) => {
        if (ef !== 1 && ef !== 2) return undefined;
        if (isUtf8(bytes.subarray(es, ee))) return undefined;
        return `descriptors[${d}].entries[${n}].${ef === 1 ? 'key' : 'value'}`;
      });
    });
  });
}

/**
 * Calls `onBytes` for each length-delimited field of the message in `[start, end)`; stops at the
 * first non-undefined answer. The bytes were already decoded successfully, so they are well formed.
 */
function scanMessage(
  bytes: Uint8Array,
  start: number,
  end: number,
  onBytes: (field: number, start: number, end: number) => string | undefined,
): string | undefined {
  let pos = start;
  const varint = (): number => {
    let result = 0;
    let shift = 1;
    for (;;) {
      const byte = bytes[pos++]!;
      result += (byte & 0x7f) * shift;
      if (byte < 0x80 || pos >= end) return result;
      shift *= 128;
    }
  };
  while (pos < end) {
    const tag = varint();
    const field = Math.floor(tag / 8);
    switch (tag & 7) {
      case 0:
        varint();
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2: {
        const length = varint();
        const found = onBytes(field, pos, pos + length);
        if (found !== undefined) return found;
        pos += length;
        break;
      }
      default:
        return undefined;
    }
  }
  return undefined;
}
