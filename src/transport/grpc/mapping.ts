/**
 * Protobuf shapes (as decoded by proto-loader with LOADER_OPTIONS) <-> domain types. The only
 * place that sees wire objects; proto3 zero values for absent fields are applied here.
 */
import {
  RATE_LIMIT_UNITS,
  type DescriptorEntry,
  type DescriptorStatus,
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
  };
}
