/**
 * The protobuf JSON mapping of RateLimitRequest and RateLimitResponse for `/json`, as the
 * reference's `protojson` reads and writes them: fields in lowerCamelCase or their proto
 * snake_case names, enums by name or number, 64-bit integers as numbers or strings, `null` for a
 * default value, unknown fields rejected. Output uses lowerCamelCase and omits default values.
 */
import { isUtf8 } from 'node:buffer';
import { SluiceError } from '../../errors.js';
import { truncateForLog } from '../../logging/limited.js';
import {
  RATE_LIMIT_UNITS,
  type DescriptorEntry,
  type DescriptorStatus,
  type LimitOverride,
  type RateLimitRequest,
  type RateLimitResponse,
  type RequestDescriptor,
} from '../../model.js';

/** The body could not be read as a RateLimitRequest: INVALID_JSON, `reason` says why. */
function invalid(reason: string): SluiceError {
  return new SluiceError('INVALID_JSON', reason);
}

type JsonObject = Record<string, unknown>;

/**
 * Read the fields of `value` (a JSON object or null) given as `[protoName, jsonName]` pairs;
 * either spelling is accepted, both at once or anything else is an error.
 */
function fields(value: unknown, where: string, names: readonly string[]): Map<string, unknown> {
  if (value === null || value === undefined) return new Map();
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw invalid(`${where}: expected an object`);
  }
  const out = new Map<string, unknown>();
  for (const [key, field] of Object.entries(value as JsonObject)) {
    const proto = names.find((name) => name === key || camel(name) === key);
    if (proto === undefined) {
      // The name is the client's: quoted short, as it ends up in a log line.
      throw invalid(`${where}: unknown field ${JSON.stringify(truncateForLog(key))}`);
    }
    if (out.has(proto)) throw invalid(`${where}: duplicate field "${proto}"`);
    if (field !== null) out.set(proto, field);
  }
  return out;
}

function camel(name: string): string {
  return name.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/** A lone UTF-16 surrogate (a `\ud800`-style escape without its pair). */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function string(value: unknown, where: string): string {
  if (value === undefined) return '';
  if (typeof value !== 'string') throw invalid(`${where}: expected a string`);
  // Proto3 strings are UTF-8, and a lone surrogate has no UTF-8 form (the reference: 400).
  if (LONE_SURROGATE.test(value)) {
    throw invalid(`${where}: string is not valid UTF-8 (a lone surrogate escape)`);
  }
  return value;
}

function unsigned(value: unknown, where: string, max: number): number {
  if (value === undefined) return 0;
  let n: number;
  if (typeof value === 'number') n = value;
  else if (typeof value === 'string' && /^\d+$/.test(value)) n = Number(value);
  else throw invalid(`${where}: expected an unsigned integer`);
  if (!Number.isInteger(n) || n < 0 || n > max) {
    throw invalid(`${where}: expected an unsigned integer up to ${max}`);
  }
  return n;
}

const UINT32_MAX = 4_294_967_295;

function list(value: unknown, where: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalid(`${where}: expected an array`);
  return value;
}

function unit(value: unknown, where: string): LimitOverride['unit'] {
  if (value === undefined) return undefined;
  if (typeof value === 'string') {
    if (value === 'UNKNOWN') return undefined;
    const found = RATE_LIMIT_UNITS.find((u) => u.toUpperCase() === value);
    if (found === undefined) {
      throw invalid(`${where}: unknown unit ${JSON.stringify(truncateForLog(value))}`);
    }
    return found;
  }
  if (typeof value === 'number' && Number.isInteger(value)) {
    return value >= 1 ? RATE_LIMIT_UNITS[value - 1] : undefined;
  }
  throw invalid(`${where}: expected a unit name or number`);
}

/**
 * Parse a `/json` body (its bytes, or text already decoded) into a request; throws
 * SluiceError INVALID_JSON naming the bad field. Bytes that are not UTF-8 are refused, as proto3 JSON
 * requires (the reference answers them 400), rather than read with replacement characters.
 */
export function requestFromJson(body: string | Buffer): RateLimitRequest {
  if (typeof body !== 'string' && !isUtf8(body)) {
    throw invalid('body is not valid UTF-8');
  }
  const text = typeof body === 'string' ? body : body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw invalid(`invalid JSON: ${truncateForLog(reason, 200)}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalid('expected a JSON object');
  }
  const top = fields(parsed, 'request', ['domain', 'descriptors', 'hits_addend']);
  const descriptors: RequestDescriptor[] = list(top.get('descriptors'), 'descriptors').map(
    (raw, i) => {
      const where = `descriptors[${i}]`;
      const d = fields(raw, where, ['entries', 'limit', 'hits_addend']);
      const entries: DescriptorEntry[] = list(d.get('entries'), `${where}.entries`).map(
        (rawEntry, j) => {
          const at = `${where}.entries[${j}]`;
          const e = fields(rawEntry, at, ['key', 'value']);
          return {
            key: string(e.get('key'), `${at}.key`),
            value: string(e.get('value'), `${at}.value`),
          };
        },
      );
      let limit: LimitOverride | undefined;
      if (d.has('limit')) {
        const l = fields(d.get('limit'), `${where}.limit`, ['requests_per_unit', 'unit']);
        limit = {
          requestsPerUnit: unsigned(
            l.get('requests_per_unit'),
            `${where}.limit.requests_per_unit`,
            UINT32_MAX,
          ),
          unit: unit(l.get('unit'), `${where}.limit.unit`),
        };
      }
      const hits = d.get('hits_addend');
      const hitsAddend =
        hits === undefined
          ? undefined
          : unsigned(hits, `${where}.hits_addend`, Number.MAX_SAFE_INTEGER);
      return { entries, limit, hitsAddend };
    },
  );
  return {
    domain: string(top.get('domain'), 'domain'),
    descriptors,
    hitsAddend: unsigned(top.get('hits_addend'), 'hits_addend', UINT32_MAX),
  };
}

/** A google.protobuf.Duration in JSON: seconds with 0, 3, 6 or 9 fraction digits and `s`. */
function durationToJson(ms: number): string {
  const whole = Math.max(0, Math.round(ms));
  const seconds = Math.floor(whole / 1000);
  const millis = whole % 1000;
  return millis === 0 ? `${seconds}s` : `${seconds}.${String(millis).padStart(3, '0')}s`;
}

function statusToJson(status: DescriptorStatus): JsonObject {
  const out: JsonObject = { code: status.code };
  const limit = status.currentLimit;
  if (limit !== undefined) {
    const current: JsonObject = {
      requestsPerUnit: limit.requestsPerUnit,
      unit: limit.unit.toUpperCase(),
    };
    if (limit.requestsPerUnit === 0) delete current.requestsPerUnit;
    if (limit.name !== '') current.name = limit.name;
    out.currentLimit = current;
  }
  if (status.limitRemaining !== 0) out.limitRemaining = status.limitRemaining;
  if (status.durationUntilResetMs !== undefined) {
    out.durationUntilReset = durationToJson(status.durationUntilResetMs);
  }
  return out;
}

/** The response as protobuf JSON text (lowerCamelCase, defaults omitted). */
export function responseToJson(response: RateLimitResponse): string {
  const out: JsonObject = {
    overallCode: response.overallCode,
    statuses: response.statuses.map(statusToJson),
  };
  if (response.responseHeadersToAdd.length > 0) {
    out.responseHeadersToAdd = response.responseHeadersToAdd.map(({ key, value }) => ({
      key,
      value,
    }));
  }
  if (response.rawBody !== undefined && response.rawBody.length > 0) {
    out.rawBody = Buffer.from(response.rawBody).toString('base64');
  }
  if (response.dynamicMetadata !== undefined) out.dynamicMetadata = response.dynamicMetadata;
  return JSON.stringify(out);
}
