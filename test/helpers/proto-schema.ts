/**
 * A strict checker of YAML/JSON documents against protobuf message types, the way Envoy reads its
 * bootstrap (proto3 JSON mapping: snake_case or lowerCamelCase field names, well-known types in
 * their JSON form, `google.protobuf.Any` as `{"@type": ..., ...fields}`), plus the
 * protoc-gen-validate rules Envoy enforces that a static check can see.
 *
 * Used by the contract tier to prove envoy/envoy.yaml is a valid `envoy.config.bootstrap.v3.Bootstrap`
 * without running Envoy. The protos are Envoy's own, shipped by the devDependency `@grpc/grpc-js-xds`.
 */
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import protobuf from 'protobufjs';
import type { Enum, Field, Type } from 'protobufjs';

const require = createRequire(import.meta.url);

/** One problem found in a document: where (a JSON-path-like string from the root) and what. */
export interface SchemaIssue {
  /** Location, e.g. `static_resources.clusters[0].load_assignment`. */
  readonly path: string;
  /** What is wrong, e.g. `unknown field "foo" in envoy.config.cluster.v3.Cluster`. */
  readonly message: string;
}

/** Options of {@link createProtoSchema}. */
export interface ProtoSchemaOptions {
  /** Directories searched for imports, in order. */
  readonly includeDirs: readonly string[];
  /** Files (relative to an include dir) loaded up front. */
  readonly files: readonly string[];
  /**
   * Accept fields marked `deprecated = true`. Envoy only warns about them; the default (`false`)
   * reports them, so the shipped config stays on the current API.
   */
  readonly allowDeprecated?: boolean;
}

/** A loaded schema: check documents against any message type it can resolve. */
export interface ProtoSchema {
  /**
   * Every issue of `value` read as the message `typeName` (fully qualified, no leading dot);
   * empty when the document is valid.
   */
  check(typeName: string, value: unknown): SchemaIssue[];
  /** Whether `typeName` resolves to a message type (loading its package directory on demand). */
  hasType(typeName: string): boolean;
}

/** The include directories for Envoy's protos as shipped by `@grpc/grpc-js-xds`. */
export function envoyProtoIncludeDirs(): string[] {
  const xds = path.dirname(require.resolve('@grpc/grpc-js-xds/package.json'));
  const protobufjsDir = path.dirname(require.resolve('protobufjs/package.json'));
  return [
    ...['envoy-api', 'xds', 'googleapis', 'protoc-gen-validate'].map((d) =>
      path.join(xds, 'deps', d),
    ),
    // google/protobuf/descriptor.proto, imported by the validate and udpa annotations.
    protobufjsDir,
  ];
}

const TYPE_URL_PREFIX = 'type.googleapis.com/';
const DURATION_RE = /^-?\d+(\.\d{1,9})?s$/;
const TIMESTAMP_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;
const INTEGER_RE = /^-?\d+$/;
const BASE64_RE = /^[A-Za-z0-9+/_-]*={0,2}$/;

/** Integer ranges per protobuf scalar type (64-bit ones as bigint). */
const INT_RANGES: Record<string, readonly [bigint, bigint]> = {
  int32: [-(2n ** 31n), 2n ** 31n - 1n],
  sint32: [-(2n ** 31n), 2n ** 31n - 1n],
  sfixed32: [-(2n ** 31n), 2n ** 31n - 1n],
  uint32: [0n, 2n ** 32n - 1n],
  fixed32: [0n, 2n ** 32n - 1n],
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  sint64: [-(2n ** 63n), 2n ** 63n - 1n],
  sfixed64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
  fixed64: [0n, 2n ** 64n - 1n],
};

/** Scalar type carried by each wrapper's `value` field. */
const WRAPPERS: Record<string, string> = {
  'google.protobuf.DoubleValue': 'double',
  'google.protobuf.FloatValue': 'float',
  'google.protobuf.Int64Value': 'int64',
  'google.protobuf.UInt64Value': 'uint64',
  'google.protobuf.Int32Value': 'int32',
  'google.protobuf.UInt32Value': 'uint32',
  'google.protobuf.BoolValue': 'bool',
  'google.protobuf.StringValue': 'string',
  'google.protobuf.BytesValue': 'bytes',
};

/** Well-known types whose JSON form is not an object of fields; inside Any they sit in `value`. */
const SPECIAL_JSON_TYPES = new Set([
  ...Object.keys(WRAPPERS),
  'google.protobuf.Duration',
  'google.protobuf.Timestamp',
  'google.protobuf.FieldMask',
  'google.protobuf.Struct',
  'google.protobuf.Value',
  'google.protobuf.ListValue',
]);

/** Envoy's TypedStruct types: `type_url` names the real message, `value` holds it as a Struct. */
const TYPED_STRUCTS = new Set(['udpa.type.v1.TypedStruct', 'xds.type.v3.TypedStruct']);

/** The proto3 JSON name of a field: its `json_name` option or the lowerCamelCase of its name. */
function jsonName(field: Field): string {
  const explicit = field.options?.['json_name'] as unknown;
  if (typeof explicit === 'string') return explicit;
  return field.name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'an object';
  return `${typeof value} ${JSON.stringify(value)}`;
}

/** Load Envoy's protos and return a checker. Throws when an up-front file cannot be loaded. */
export function createProtoSchema(options: ProtoSchemaOptions): ProtoSchema {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    if (path.isAbsolute(target)) return target;
    for (const dir of options.includeDirs) {
      const candidate = path.join(dir, target);
      if (existsSync(candidate)) return candidate;
    }
    return target;
  };
  root.loadSync([...options.files], { keepCase: true });
  root.resolveAll();
  const loadedDirs = new Set<string>();

  /** Resolve a message type, loading the `.proto` files of its package directory if needed. */
  function lookupType(typeName: string): Type | undefined {
    const found = tryLookup(typeName);
    if (found) return found;
    // Envoy's layout: package a.b.c.v3 lives in a/b/c/v3/; message names start upper-case.
    const parts = typeName.split('.');
    const pkg: string[] = [];
    for (const part of parts) {
      if (/^[A-Z]/.test(part)) break;
      pkg.push(part);
    }
    const rel = pkg.join('/');
    if (rel === '' || loadedDirs.has(rel)) return undefined;
    loadedDirs.add(rel);
    for (const dir of options.includeDirs) {
      const abs = path.join(dir, rel);
      if (!existsSync(abs)) continue;
      for (const file of readdirSync(abs)) {
        if (!file.endsWith('.proto')) continue;
        try {
          root.loadSync(path.join(rel, file), { keepCase: true });
        } catch {
          // A file whose imports are not shipped cannot define a usable type; skip it.
        }
      }
    }
    try {
      root.resolveAll();
    } catch {
      return undefined;
    }
    return tryLookup(typeName);
  }

  function tryLookup(typeName: string): Type | undefined {
    try {
      const found = root.lookup(typeName);
      return found instanceof protobuf.Type ? found : undefined;
    } catch {
      return undefined;
    }
  }

  function check(typeName: string, value: unknown): SchemaIssue[] {
    const issues: SchemaIssue[] = [];
    const type = lookupType(typeName);
    if (!type) return [{ path: '', message: `unknown message type ${typeName}` }];
    checkMessage(type, value, '', issues);
    return issues;
  }

  function fullName(type: Type | Enum): string {
    return type.fullName.replace(/^\./, '');
  }

  function join(base: string, key: string): string {
    return base === '' ? key : `${base}.${key}`;
  }

  function checkMessage(type: Type, value: unknown, at: string, issues: SchemaIssue[]): void {
    const name = fullName(type);
    if (value === null) {
      // proto3 JSON: null means "default"; for Value it is the null value. Both are accepted.
      return;
    }
    if (name in WRAPPERS) {
      checkScalar(WRAPPERS[name] ?? '', value, at, issues, undefined);
      return;
    }
    switch (name) {
      case 'google.protobuf.Duration':
        if (typeof value !== 'string' || !DURATION_RE.test(value)) {
          issues.push({
            path: at,
            message: `expected a duration like "0.25s", got ${describe(value)}`,
          });
        }
        return;
      case 'google.protobuf.Timestamp':
        if (typeof value !== 'string' || !TIMESTAMP_RE.test(value)) {
          issues.push({
            path: at,
            message: `expected an RFC 3339 timestamp, got ${describe(value)}`,
          });
        }
        return;
      case 'google.protobuf.FieldMask':
        if (typeof value !== 'string') {
          issues.push({
            path: at,
            message: `expected a field mask string, got ${describe(value)}`,
          });
        }
        return;
      case 'google.protobuf.Struct':
        if (!isPlainObject(value)) {
          issues.push({ path: at, message: `expected an object (Struct), got ${describe(value)}` });
        }
        return;
      case 'google.protobuf.ListValue':
        if (!Array.isArray(value)) {
          issues.push({ path: at, message: `expected a list (ListValue), got ${describe(value)}` });
        }
        return;
      case 'google.protobuf.Value':
        return;
      case 'google.protobuf.Any':
        checkAny(value, at, issues);
        return;
      default:
        break;
    }
    if (!isPlainObject(value)) {
      issues.push({ path: at, message: `expected an object (${name}), got ${describe(value)}` });
      return;
    }
    checkFields(type, value, at, issues, new Set());
  }

  function checkAny(value: unknown, at: string, issues: SchemaIssue[]): void {
    if (!isPlainObject(value)) {
      issues.push({ path: at, message: `expected an object with "@type", got ${describe(value)}` });
      return;
    }
    const typeUrl = value['@type'];
    if (typeof typeUrl !== 'string') {
      issues.push({ path: at, message: 'google.protobuf.Any without a string "@type"' });
      return;
    }
    const slash = typeUrl.lastIndexOf('/');
    const typeName = slash >= 0 ? typeUrl.slice(slash + 1) : typeUrl;
    if (slash >= 0 && typeUrl.slice(0, slash + 1) !== TYPE_URL_PREFIX) {
      issues.push({
        path: join(at, '@type'),
        message: `type URL must start with ${TYPE_URL_PREFIX}`,
      });
    }
    const type = lookupType(typeName);
    if (!type) {
      issues.push({
        path: join(at, '@type'),
        message: `"${typeUrl}" does not resolve to a message type in Envoy's protos`,
      });
      return;
    }
    if (SPECIAL_JSON_TYPES.has(fullName(type))) {
      const extra = Object.keys(value).filter((k) => k !== '@type' && k !== 'value');
      for (const k of extra) issues.push({ path: join(at, k), message: `unknown field "${k}"` });
      checkMessage(type, value['value'], join(at, 'value'), issues);
      return;
    }
    checkFields(type, value, at, issues, new Set(['@type']));
    if (TYPED_STRUCTS.has(fullName(type))) {
      const inner = value['type_url'] ?? value['typeUrl'];
      if (typeof inner === 'string') {
        checkAny({ ...asObject(value['value']), '@type': inner }, join(at, 'value'), issues);
      }
    }
  }

  function asObject(value: unknown): Record<string, unknown> {
    return isPlainObject(value) ? value : {};
  }

  function checkFields(
    type: Type,
    value: Record<string, unknown>,
    at: string,
    issues: SchemaIssue[],
    ignore: ReadonlySet<string>,
  ): void {
    const name = fullName(type);
    const byName = new Map<string, Field>();
    for (const field of type.fieldsArray) {
      byName.set(field.name, field);
      byName.set(jsonName(field), field);
    }
    const seen = new Map<Field, string>();
    for (const [key, fieldValue] of Object.entries(value)) {
      if (ignore.has(key)) continue;
      const field = byName.get(key);
      const fieldPath = join(at, key);
      if (!field) {
        issues.push({ path: fieldPath, message: `unknown field "${key}" in ${name}` });
        continue;
      }
      const other = seen.get(field);
      if (other !== undefined) {
        issues.push({
          path: fieldPath,
          message: `field "${field.name}" given twice, as "${other}" and "${key}"`,
        });
        continue;
      }
      seen.set(field, key);
      if (field.options?.['deprecated'] === true && options.allowDeprecated !== true) {
        issues.push({ path: fieldPath, message: `deprecated field "${field.name}" in ${name}` });
      }
      checkField(field, fieldValue, fieldPath, issues);
    }
    checkOneofs(type, seen, at, issues);
    checkValidateRules(type, value, seen, at, issues);
  }

  function checkOneofs(
    type: Type,
    seen: ReadonlyMap<Field, string>,
    at: string,
    issues: SchemaIssue[],
  ): void {
    for (const oneof of type.oneofsArray) {
      const set = oneof.fieldsArray.filter((f) => seen.has(f)).map((f) => f.name);
      if (set.length > 1) {
        issues.push({
          path: at,
          message: `oneof "${oneof.name}" of ${fullName(type)} has several members set: ${set.join(', ')}`,
        });
      }
      if (set.length === 0 && oneof.options?.['(validate.required)'] === true) {
        issues.push({
          path: at,
          message: `oneof "${oneof.name}" of ${fullName(type)} is required: set one of ${oneof.oneof.join(', ')}`,
        });
      }
    }
  }

  /** The protoc-gen-validate rules Envoy enforces that are visible statically. */
  function checkValidateRules(
    type: Type,
    value: Record<string, unknown>,
    seen: ReadonlyMap<Field, string>,
    at: string,
    issues: SchemaIssue[],
  ): void {
    for (const field of type.fieldsArray) {
      const rules = field.options;
      if (!rules) continue;
      const key = seen.get(field);
      const present = key !== undefined && value[key] !== null;
      const fieldPath = join(at, key ?? field.name);
      if (!present) {
        // An unset oneof member is simply not chosen; its rules apply only when it is.
        if (field.partOf) continue;
        if (rules['(validate.rules).message.required'] === true) {
          issues.push({ path: fieldPath, message: `required field "${field.name}" is missing` });
        }
        if (rules['(validate.rules).repeated.min_items'] !== undefined && field.repeated) {
          issues.push({ path: fieldPath, message: `"${field.name}" needs at least one item` });
        }
        // PGV checks an absent proto3 scalar as its default value.
        const defaultValue = scalarDefault(field);
        if (defaultValue === undefined) continue;
        checkScalarRules(field, defaultValue, fieldPath, issues);
        continue;
      }
      const fieldValue = value[key];
      if (field.repeated && Array.isArray(fieldValue)) {
        const min = rules['(validate.rules).repeated.min_items'];
        const max = rules['(validate.rules).repeated.max_items'];
        if (typeof min === 'number' && fieldValue.length < min) {
          issues.push({ path: fieldPath, message: `needs at least ${min} item(s)` });
        }
        if (typeof max === 'number' && fieldValue.length > max) {
          issues.push({ path: fieldPath, message: `allows at most ${max} item(s)` });
        }
        continue;
      }
      if (!field.repeated && !field.map) checkScalarRules(field, fieldValue, fieldPath, issues);
    }
  }

  function scalarDefault(field: Field): string | number | undefined {
    if (field.repeated || field.map || field.resolvedType) return undefined;
    if (field.type === 'string') return '';
    if (field.type in INT_RANGES || field.type === 'double' || field.type === 'float') return 0;
    return undefined;
  }

  function checkScalarRules(field: Field, value: unknown, at: string, issues: SchemaIssue[]): void {
    const rules = field.options ?? {};
    if (typeof value === 'string' && field.type === 'string') {
      const minLen = rules['(validate.rules).string.min_len'];
      const maxLen = rules['(validate.rules).string.max_len'];
      if (value === '' && rules['(validate.rules).string.ignore_empty'] === true) return;
      if (typeof minLen === 'number' && value.length < minLen) {
        issues.push({
          path: at,
          message: `"${field.name}" must have at least ${minLen} character(s)`,
        });
      }
      if (typeof maxLen === 'number' && value.length > maxLen) {
        issues.push({
          path: at,
          message: `"${field.name}" must have at most ${maxLen} character(s)`,
        });
      }
      return;
    }
    const numeric =
      typeof value === 'number' ? value : typeof value === 'string' ? Number(value) : NaN;
    if (Number.isNaN(numeric) || !(field.type in INT_RANGES || field.type === 'double')) return;
    for (const [op, test] of [
      ['gt', (n: number, b: number) => n > b],
      ['gte', (n: number, b: number) => n >= b],
      ['lt', (n: number, b: number) => n < b],
      ['lte', (n: number, b: number) => n <= b],
    ] as const) {
      const bound = rules[`(validate.rules).${field.type}.${op}`];
      if (typeof bound === 'number' && !test(numeric, bound)) {
        issues.push({
          path: at,
          message: `"${field.name}" must be ${op} ${bound}, got ${numeric}`,
        });
      }
    }
  }

  function checkField(field: Field, value: unknown, at: string, issues: SchemaIssue[]): void {
    if (value === null) return;
    if (field.map) {
      if (!isPlainObject(value)) {
        issues.push({ path: at, message: `expected a map (object), got ${describe(value)}` });
        return;
      }
      const keyType = (field as Field & { keyType: string }).keyType;
      for (const [k, v] of Object.entries(value)) {
        // JSON object keys are strings: integer keys must parse, bool keys are "true"/"false".
        const keyAt = `${at}[${JSON.stringify(k)}]`;
        if (keyType === 'bool' && k !== 'true' && k !== 'false') {
          issues.push({ path: keyAt, message: `expected a bool map key, got "${k}"` });
        } else if (keyType !== 'bool' && keyType !== 'string') {
          checkScalar(keyType, k, keyAt, issues, undefined);
        }
        checkSingle(field, v, `${at}[${JSON.stringify(k)}]`, issues);
      }
      return;
    }
    if (field.repeated) {
      if (!Array.isArray(value)) {
        issues.push({ path: at, message: `expected a list, got ${describe(value)}` });
        return;
      }
      value.forEach((item, i) => checkSingle(field, item, `${at}[${i}]`, issues));
      return;
    }
    checkSingle(field, value, at, issues);
  }

  function checkSingle(field: Field, value: unknown, at: string, issues: SchemaIssue[]): void {
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Type) {
      checkMessage(resolved, value, at, issues);
      return;
    }
    checkScalar(
      field.type,
      value,
      at,
      issues,
      resolved instanceof protobuf.Enum ? resolved : undefined,
    );
  }

  function checkScalar(
    scalarType: string,
    value: unknown,
    at: string,
    issues: SchemaIssue[],
    enumType: Enum | undefined,
  ): void {
    if (enumType) {
      if (typeof value !== 'string' || !(value in enumType.values)) {
        issues.push({
          path: at,
          message: `expected one of ${fullName(enumType)} {${Object.keys(enumType.values).join(', ')}}, got ${describe(value)}`,
        });
      }
      return;
    }
    const range = INT_RANGES[scalarType];
    if (range) {
      let n: bigint | undefined;
      if (typeof value === 'number' && Number.isInteger(value)) n = BigInt(value);
      else if (typeof value === 'string' && INTEGER_RE.test(value)) n = BigInt(value);
      if (n === undefined || n < range[0] || n > range[1]) {
        issues.push({ path: at, message: `expected ${scalarType}, got ${describe(value)}` });
      }
      return;
    }
    switch (scalarType) {
      case 'string':
        if (typeof value !== 'string') {
          issues.push({ path: at, message: `expected string, got ${describe(value)}` });
        }
        return;
      case 'bool':
        if (typeof value !== 'boolean') {
          issues.push({ path: at, message: `expected bool, got ${describe(value)}` });
        }
        return;
      case 'double':
      case 'float':
        if (
          !(typeof value === 'number') &&
          !(
            typeof value === 'string' &&
            (['NaN', 'Infinity', '-Infinity'].includes(value) ||
              (!Number.isNaN(Number(value)) && value.trim() !== ''))
          )
        ) {
          issues.push({ path: at, message: `expected ${scalarType}, got ${describe(value)}` });
        }
        return;
      case 'bytes':
        if (typeof value !== 'string' || !BASE64_RE.test(value)) {
          issues.push({ path: at, message: `expected base64 bytes, got ${describe(value)}` });
        }
        return;
      default:
        issues.push({ path: at, message: `unsupported field type ${scalarType}` });
    }
  }

  return {
    check,
    hasType: (typeName) => lookupType(typeName) !== undefined,
  };
}
