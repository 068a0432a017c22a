/**
 * Reading the fields of a rule file's YAML as the reference reads them: the entries of a mapping
 * (keys as text, repeated keys, numbers the reference refuses), strings, booleans and whole
 * numbers, and the problem of an unknown or misplaced key. Every level of the walk
 * (validate-descriptor.ts, validate-rate-limit.ts) reads its keys through a {@link FieldReader}.
 */
import { isMap, isScalar, type Node as YamlAnyNode, type YAMLMap, type YAMLSeq } from 'yaml';
import { MAX_UINT32 } from '../model.js';
import { EXTENSION_KEYS, PLACES } from './file-config.js';
import {
  describeNode,
  goParseInt,
  goScalarKind,
  mapEntries,
  quote,
  shortText,
  type MapEntry,
  type ParsedFile,
  type ProblemSink,
  type RepeatedKey,
  type YamlNode,
} from './parse.js';

/** The field reader of one file: reports to the file's problem sink. */
export class FieldReader {
  /** Where problems and warnings of the file go. */
  readonly sink: ProblemSink;
  /** Resolves aliases (the file's own resolver). */
  readonly resolve: (node: unknown) => YamlNode | null;

  constructor(parsed: ParsedFile) {
    this.sink = parsed.sink;
    this.resolve = parsed.resolve;
  }

  /** The entries of a mapping: keys checked as text, values as the reference reads them. */
  entries(node: YAMLMap | null, path: string): MapEntry[] {
    if (node === null) return [];
    const entries = mapEntries(
      node,
      this.resolve,
      (keyNode, text) => {
        this.sink.add(path, `config error, key is not of type string: ${text}`, keyNode);
      },
      (repeated) => this.warnRepeated(repeated, path),
    );
    for (const entry of entries) this.checkGoScalar(entry, path);
    return entries;
  }

  /** A key written twice loads as in the reference (the last wins), with a warning naming lines. */
  private warnRepeated(repeated: RepeatedKey, parentPath: string): void {
    // Stryker disable next-line OptionalChaining,StringLiteral: every key node of a parsed document has a position; the '?' only satisfies the type
    const lines = repeated.keyNodes.map((node) => this.sink.position(node)?.line ?? '?');
    const path = parentPath === '' ? repeated.key : `${parentPath}.${repeated.key}`;
    this.sink.warn(
      path,
      `${quote(repeated.key)} is written ${lines.length} times (lines ${lines.join(', ')}); ` +
        (repeated.merged
          ? 'the mappings are merged, later keys over earlier ones,'
          : `only the last one (line ${String(lines[lines.length - 1])}) is used,`) +
        ' as envoyproxy/ratelimit reads it; remove the others',
      repeated.keyNodes[repeated.keyNodes.length - 1],
    );
  }

  /**
   * The reference refuses a file holding a floating-point number, or a whole number above
   * 2^63-1, as a value anywhere ("error checking config"), even where a string is expected.
   */
  private checkGoScalar(entry: MapEntry, parentPath: string): void {
    const node = entry.value;
    if (!isScalar(node)) return;
    const kind = goScalarKind(node);
    if (kind !== 'float' && kind !== 'uint64') return;
    const path = parentPath === '' ? entry.key : `${parentPath}.${entry.key}`;
    this.sink.add(
      path,
      `error checking config: ${entry.key} is ${describeNode(node)}, ` +
        (kind === 'float' ? 'a floating-point number' : 'a whole number above 2^63-1') +
        `, which envoyproxy/ratelimit refuses; write a whole number, or quote it if it is text ("${shortText(node.source ?? '')}")`,
      node,
    );
  }

  /**
   * A list item that must be a mapping (aliases resolved): the mapping, or `undefined` once the
   * problem is reported in the reference's words.
   */
  mapItem(item: unknown, path: string): YAMLMap | undefined {
    const resolved = this.resolve(item);
    if (isMap(resolved)) return resolved;
    this.sink.add(
      path,
      `config error, yaml file contains list of type other than map: ${describeNode(resolved)}`,
      resolved ?? (item as YamlAnyNode | null),
    );
    return undefined;
  }

  /**
   * Call `each` with every item of `list` that is a mapping (the others are reported), its path
   * and index, in order; whether every item was a mapping and `each` returned true for it.
   */
  everyMapItem(
    list: YAMLSeq,
    path: string,
    each: (map: YAMLMap, itemPath: string, index: number) => boolean,
  ): boolean {
    let valid = true;
    list.items.forEach((item, index) => {
      const itemPath = `${path}[${index}]`;
      const map = this.mapItem(item, itemPath);
      if (map === undefined || !each(map, itemPath, index)) valid = false;
    });
    return valid;
  }

  /** A key not valid here: a warning when the reference ignores it, else an error with a hint. */
  unknownKey(entry: MapEntry, parentPath: string, validHere: readonly string[]): void {
    const key = entry.key;
    let hint: string;
    // `key` is not valid here (every key valid here has its case), so its home is elsewhere.
    const home = PLACES.find((place) => place.keys.includes(key));
    if (home !== undefined && EXTENSION_KEYS.has(key)) {
      hint = `it belongs ${home.description}`;
    } else if (home !== undefined) {
      // The reference checks keys against one flat list, so a known key in the wrong place loads
      // there and is ignored. A reference file must stay valid here, so this is only a warning.
      const path = parentPath === '' ? key : `${parentPath}.${key}`;
      this.sink.warn(
        path,
        `${quote(key)} is ignored here; it belongs ${home.description}`,
        entry.keyNode,
      );
      return;
    } else {
      const suggestion = closest(key, validHere);
      hint =
        suggestion !== undefined
          ? `did you mean '${suggestion}'?`
          : `valid keys here: ${validHere.join(', ')}`;
    }
    const shown = shortText(key);
    const path = parentPath === '' ? shown : `${parentPath}.${shown}`;
    this.sink.add(path, `config error, unknown key ${quote(key)}; ${hint}`, entry.keyNode);
  }

  /** Whether the entry's value is empty or a scalar. */
  isScalarEntry(entry: MapEntry): boolean {
    return entry.value === null || isScalar(entry.value);
  }

  /** A string field. Plain numbers and booleans keep their source text (`value: 429`). */
  string(entry: MapEntry, path: string, example: string): string | undefined {
    // An empty value (`key:`, `~`, `null`) is resolved to null, never a Scalar holding null.
    const node = entry.value;
    if (node === null) return '';
    if (isScalar(node)) {
      const value: unknown = node.value;
      if (typeof value === 'string') return value;
      // Numbers, booleans and timestamps keep the text as written, as the reference's decoder does.
      if (typeof value === 'number' || typeof value === 'boolean' || value instanceof Date) {
        return node.source ?? String(value);
      }
    }
    this.sink.add(
      path,
      `${entry.key} must be a string (for example ${example}), not ${describeNode(node)}`,
      node,
    );
    return undefined;
  }

  /** A boolean field; `false` when empty. */
  bool(entry: MapEntry, path: string): boolean {
    const node = entry.value;
    if (node === null) return false;
    if (isScalar(node) && typeof node.value === 'boolean') return node.value;
    const quoted =
      isScalar(node) && typeof node.value === 'string' && /^(true|false)$/i.test(node.value);
    this.sink.add(
      path,
      `${entry.key} must be true or false, not ${describeNode(node)}` +
        (quoted ? '; write it without quotes' : ''),
      node,
    );
    return false;
  }

  /** A whole number from 0 to 2^32-1, read as the reference reads it; 0 when empty. */
  uint32(entry: MapEntry, path: string): number | undefined {
    const node = entry.value;
    if (node === null) return 0;
    if (isScalar(node)) {
      // Read as the reference's YAML library reads it (so `1:30` is text, `0x10` is 16).
      const kind = goScalarKind(node);
      if (kind === 'float' || kind === 'uint64') return undefined; // reported by checkGoScalar
      const value =
        (kind === 'int' ? goParseInt((node.source ?? '').replace(/_/g, '')) : undefined) ?? -1n;
      if (value >= 0n && value <= BigInt(MAX_UINT32)) return Number(value);
    }
    const quoted = isScalar(node) && typeof node.value === 'string' && /^\d+$/.test(node.value);
    this.sink.add(
      path,
      `${entry.key} must be a whole number from 0 to ${MAX_UINT32}, not ${describeNode(node)}` +
        (quoted ? '; write it without quotes' : ''),
      node,
    );
    return undefined;
  }
}

function closest(key: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(key.length / 3)) + 1;
  for (const candidate of candidates) {
    const distance = editDistance(key.toLowerCase(), candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}
