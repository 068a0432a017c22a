/**
 * The top and descriptor levels of a rule file: `domain`, `descriptors` (nested up to a bound, and
 * counted against the rule bounds), each descriptor's keys and flags, and `metadata` as JSON.
 */
import { isMap, isScalar, isSeq, type Node as YamlAnyNode, type YAMLMap } from 'yaml';
import type { JsonObject, JsonValue } from '../model.js';
import type { Algorithm } from '../algorithms/index.js';
import {
  ALL_DESCRIPTOR_KEYS,
  ROOT_KEYS,
  type DescriptorConfig,
  type FileConfig,
  type RateLimitConfig,
} from './file-config.js';
import { isWildcard } from './glob.js';
import {
  describeNode,
  isMergeKey,
  quote,
  type MapEntry,
  type ParsedFile,
  type YamlNode,
} from './parse.js';
import type { AlgorithmRefusal } from './file-config.js';
import { readRateLimit, readRateLimitList } from './validate-rate-limit.js';
import { FieldReader } from './yaml-fields.js';

// Guards against runaway nesting (e.g. an alias that refers to its own ancestor).
const MAX_DEPTH = 64;

/**
 * Walks one parsed file from its top level down through its descriptors, collecting every
 * problem in the file's sink; the `rate_limit` level is validate-rate-limit.ts.
 */
export class Walker {
  /** Reads the fields of the file's mappings. */
  private readonly fields: FieldReader;
  /** Descriptor nodes walked; the walk stops one past `maxRules`. */
  rules = 0;

  constructor(
    private readonly parsed: ParsedFile,
    private readonly defaultAlgorithm: Algorithm,
    private readonly maxRules: number,
    private readonly refusal?: AlgorithmRefusal,
  ) {
    this.fields = new FieldReader(parsed);
  }

  /** The file: its top-level mapping, `domain` and `descriptors`. */
  root(node: YamlNode | null): FileConfig {
    const file = this.parsed.file;
    if (node !== null && !isMap(node)) {
      this.fields.sink.add(
        '',
        `error loading config file: the file must be a mapping with 'domain' and 'descriptors' keys, not ${describeNode(node)}`,
        node,
      );
      return { file, domain: '', domainPosition: undefined, descriptors: [] };
    }
    let domain = '';
    let domainNode: YamlAnyNode | null = node;
    let domainIsString = true;
    let descriptors: readonly DescriptorConfig[] = [];
    for (const entry of this.fields.entries(node, '')) {
      switch (entry.key) {
        case 'domain': {
          domainNode = entry.value ?? entry.keyNode;
          const text = this.fields.string(entry, 'domain', 'domain: edge');
          domainIsString = text !== undefined;
          domain = text ?? '';
          break;
        }
        case 'descriptors':
          descriptors = this.descriptorList(entry.value, 'descriptors', 0);
          break;
        default:
          this.fields.unknownKey(entry, '', ROOT_KEYS);
      }
    }
    if (domain === '' && domainIsString) {
      this.fields.sink.add('domain', 'config file cannot have empty domain', domainNode);
    }
    return { file, domain, domainPosition: this.fields.sink.position(domainNode), descriptors };
  }

  private descriptorList(
    node: YamlNode | null,
    path: string,
    depth: number,
  ): readonly DescriptorConfig[] {
    if (node === null) return [];
    if (!isSeq(node)) {
      this.fields.sink.add(
        path,
        `descriptors must be a list whose items start with '- key: ...', not ${describeNode(node)}`,
        node,
      );
      return [];
    }
    if (depth >= MAX_DEPTH) {
      this.fields.sink.add(path, `descriptors are nested more than ${MAX_DEPTH} levels deep`, node);
      return [];
    }
    const result: DescriptorConfig[] = [];
    node.items.forEach((item, index) => {
      // Past the bound the file is refused (validateFiles says so); walking on costs only time.
      if (this.rules > this.maxRules) return;
      this.rules++;
      const itemPath = `${path}[${index}]`;
      const resolved = this.fields.mapItem(item, itemPath);
      if (resolved === undefined) return;
      const descriptor = this.descriptor(resolved, itemPath, depth);
      if (descriptor !== undefined) result.push(descriptor);
    });
    return result;
  }

  private descriptor(node: YAMLMap, path: string, depth: number): DescriptorConfig | undefined {
    let key = '';
    let keyNode: YamlAnyNode | null = node;
    let keyIsString = true;
    let value = '';
    let rateLimit: RateLimitConfig | undefined;
    let rateLimitEntry: MapEntry | undefined;
    let rateLimits: readonly RateLimitConfig[] | undefined;
    let rateLimitsEntry: MapEntry | undefined;
    let children: readonly DescriptorConfig[] = [];
    let shadowMode = false;
    let detailedMetric = false;
    let valueToMetric = false;
    let shareThreshold: MapEntry | undefined;
    let quotaMode = false;
    let metadata: JsonObject | undefined;
    for (const entry of this.fields.entries(node, path)) {
      const entryPath = `${path}.${entry.key}`;
      switch (entry.key) {
        case 'key': {
          keyNode = entry.value ?? entry.keyNode;
          const text = this.fields.string(entry, entryPath, 'key: remote_address');
          keyIsString = text !== undefined;
          key = text ?? '';
          break;
        }
        case 'value':
          value = this.fields.string(entry, entryPath, 'value: /login') ?? '';
          break;
        case 'rate_limit':
          rateLimitEntry = entry;
          rateLimit = readRateLimit(
            this.fields,
            this.defaultAlgorithm,
            entry.value,
            entryPath,
            this.refusal,
          );
          break;
        case 'rate_limits':
          rateLimitsEntry = entry;
          rateLimits = readRateLimitList(
            this.fields,
            this.defaultAlgorithm,
            entry.value,
            entryPath,
            this.refusal,
          );
          break;
        case 'descriptors':
          children = this.descriptorList(entry.value, entryPath, depth + 1);
          break;
        case 'shadow_mode':
          shadowMode = this.fields.bool(entry, entryPath);
          break;
        case 'detailed_metric':
          detailedMetric = this.fields.bool(entry, entryPath);
          break;
        case 'value_to_metric':
          valueToMetric = this.fields.bool(entry, entryPath);
          break;
        case 'share_threshold':
          if (this.fields.bool(entry, entryPath)) shareThreshold = entry;
          break;
        case 'quota_mode':
          quotaMode = this.fields.bool(entry, entryPath);
          break;
        case 'metadata':
          // Free-form data returned in dynamic_metadata when the descriptor passes. Anything but
          // a mapping is refused, as the reference refuses it (docs/compatibility.md).
          if (isMap(entry.value)) {
            const json = yamlToJson(entry.value, this.fields.resolve) as JsonObject;
            metadata = Object.keys(json).length > 0 ? json : undefined;
          } else if (entry.value !== null) {
            this.fields.sink.add(
              entryPath,
              `metadata must be a mapping of names to values (for example metadata: {team: payments}), not ${describeNode(entry.value)}`,
              entry.value,
            );
          }
          break;
        default:
          this.fields.unknownKey(entry, path, ALL_DESCRIPTOR_KEYS);
      }
    }
    if (key === '' && keyIsString) {
      this.fields.sink.add(`${path}.key`, 'descriptor has empty key', keyNode);
    }
    // The reference tests the joined `key_value` text for a `*`, so a node with a `*` in its key
    // may share too (docs/compatibility.md, "A `*` in a descriptor key").
    const finalKey = value === '' ? key : `${key}_${value}`;
    if (shareThreshold !== undefined && !isWildcard(finalKey)) {
      this.fields.sink.add(
        `${path}.share_threshold`,
        `share_threshold can only be used with wildcard values (containing '*'), but found key ${quote(finalKey)}`,
        shareThreshold.keyNode,
      );
    }
    if (rateLimitEntry !== undefined && rateLimitsEntry !== undefined) {
      this.fields.sink.add(
        `${path}.rate_limits`,
        "a descriptor has either 'rate_limit' (one limit) or 'rate_limits' (a list), not both; " +
          'move the rate_limit block into the rate_limits list',
        rateLimitsEntry.keyNode,
      );
      rateLimits = undefined;
    }
    if (key === '') return undefined;
    return {
      key,
      value,
      path,
      position: this.fields.sink.position(node),
      rateLimit,
      rateLimits,
      descriptors: children,
      shadowMode,
      detailedMetric,
      valueToMetric,
      shareThreshold: shareThreshold !== undefined,
      quotaMode,
      metadata,
    };
  }
}

/**
 * A `metadata` node as the reference hands it to google.protobuf.Struct: mappings with every key
 * as text (merge keys applied, the last of a repeated key winning), lists, and scalars as YAML 1.1
 * reads them; a timestamp stays the text it was written as.
 */
function yamlToJson(node: YamlNode | null, resolve: (node: unknown) => YamlNode | null): JsonValue {
  if (isMap(node)) {
    const out: Record<string, JsonValue> = {};
    for (const pair of node.items) {
      const keyNode = pair.key as YamlAnyNode | null;
      if (isMergeKey(keyNode)) {
        const sources = resolve(pair.value);
        const list = isSeq(sources) ? sources.items.map((item) => resolve(item)) : [sources];
        for (const source of list) {
          if (!isMap(source)) continue;
          const merged = yamlToJson(source, resolve) as Record<string, JsonValue>;
          for (const name of Object.keys(merged)) if (!(name in out)) out[name] = merged[name]!;
        }
        continue;
      }
      const key = isScalar(keyNode) ? String(keyNode.value) : String(keyNode);
      out[key] = yamlToJson(resolve(pair.value), resolve);
    }
    return out;
  }
  if (isSeq(node)) return node.items.map((item) => yamlToJson(resolve(item), resolve));
  if (isScalar(node)) {
    const value: unknown = node.value;
    // An empty value is resolved to null before it gets here, and anything unknown is null below.
    if (typeof value === 'boolean' || typeof value === 'string') return value;
    // Whole numbers too (never a bigint: the file is parsed without `intAsBigInt`).
    if (typeof value === 'number') return value;
    if (value instanceof Date) return node.source ?? value.toISOString();
  }
  return null;
}
