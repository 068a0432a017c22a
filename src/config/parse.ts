/**
 * YAML text -> node tree with positions. This layer knows YAML (aliases, merge keys, line
 * numbers) and nothing about rate limits; validate.ts walks the tree it returns.
 */
import {
  LineCounter,
  isAlias,
  isMap,
  isScalar,
  isSeq,
  parseAllDocuments,
  visit,
  type Document,
  type Node as YamlAnyNode,
  type Scalar,
  type YAMLMap,
  type YAMLSeq,
} from 'yaml';
import type { ConfigProblem } from '../errors.js';

/** A resolved YAML node: never an alias. */
export type YamlNode = Scalar | YAMLMap | YAMLSeq;

/** One `key: value` of a mapping, after merge keys (`<<: *anchor`) are applied. */
export interface MapEntry {
  /** The key text. */
  readonly key: string;
  /** The key's node, for positions. */
  readonly keyNode: YamlAnyNode;
  /** The value with aliases resolved; `null` for an empty value (`key:`). */
  readonly value: YamlNode | null;
}

/** Collects problems for one file, adding the line and column of the offending node. */
export class ProblemSink {
  /** Every problem added so far, in the order found. */
  readonly problems: ConfigProblem[] = [];
  /** Things the reference accepts silently but that are probably mistakes; never fatal. */
  readonly warnings: ConfigProblem[] = [];

  constructor(
    /** The file the problems are in. */
    readonly file: string,
    private readonly lineCounter: LineCounter,
  ) {}

  /** Add a problem at `path`; `node` (when given) adds ` (line L, column C)` to the message. */
  add(path: string, message: string, node?: YamlAnyNode | null): void {
    this.problems.push({ file: this.file, path, message: message + this.where(node) });
  }

  /** Add a warning at `path` (same format as a problem). */
  warn(path: string, message: string, node?: YamlAnyNode | null): void {
    this.warnings.push({ file: this.file, path, message: message + this.where(node) });
  }

  /** ` (line L, column C)` for a node, `''` when its position is unknown. */
  where(node: YamlAnyNode | null | undefined): string {
    const position = this.position(node);
    return position === undefined ? '' : ` (${formatPosition(position)})`;
  }

  /** The 1-based line and column where a node starts, `undefined` when unknown. */
  position(node: YamlAnyNode | null | undefined): SourcePosition | undefined {
    const offset = node?.range?.[0];
    if (offset === undefined) return undefined;
    const { line, col } = this.lineCounter.linePos(offset);
    return { line, column: col };
  }
}

/** Where a node starts in its file (1-based). */
export interface SourcePosition {
  /** Line number, from 1. */
  readonly line: number;
  /** Column number, from 1. */
  readonly column: number;
}

/** `line L, column C`. */
export function formatPosition(position: SourcePosition): string {
  return `line ${position.line}, column ${position.column}`;
}

/** A parsed file: its root node and what went wrong while parsing. */
export interface ParsedFile {
  /** The file name as given. */
  readonly file: string;
  /**
   * The first document's root node; `null` when the file holds no document (empty file), and
   * `undefined` when the YAML itself is broken (then `sink` holds the parser's errors).
   */
  readonly root: YamlNode | null | undefined;
  /** Problems found so far; validation adds to it. */
  readonly sink: ProblemSink;
  /** Resolves aliases against the file's document. */
  readonly resolve: (node: unknown) => YamlNode | null;
}

// YAML 1.1, as the reference's gopkg.in/yaml.v2 reads it: yes/no/on/off are booleans and `<<`
// merge keys work, so a file means the same to sluice as to the reference.
const PARSE_OPTIONS = {
  version: '1.1',
  merge: true,
  uniqueKeys: true,
  prettyErrors: true,
} as const;

/** Parse one configuration file. Never throws: syntax errors become problems. */
export function parseConfigYaml(file: string, content: string): ParsedFile {
  const lineCounter = new LineCounter();
  const sink = new ProblemSink(file, lineCounter);
  const docs = parseAllDocuments(content, { ...PARSE_OPTIONS, lineCounter });
  const documents: Document.Parsed[] = Array.isArray(docs) ? docs : [];

  let broken = false;
  for (const doc of documents) {
    for (const error of doc.errors) {
      broken = true;
      sink.add('', `error loading config file: ${firstLine(error.message)}`);
    }
    if (doc.errors.length === 0 && !checkAliases(doc, sink)) broken = true;
  }
  const first = documents[0];
  const resolve = (node: unknown): YamlNode | null => resolveNode(first, node);
  if (broken) return { file, root: undefined, sink, resolve };

  const nonEmpty = documents.filter((doc) => doc.contents !== null && !isEmptyScalar(doc.contents));
  if (nonEmpty.length > 1) {
    sink.add(
      '',
      `config file must hold one YAML document (one domain per file) but holds ${nonEmpty.length}; ` +
        'split it into one file per document',
    );
  }
  const doc = nonEmpty[0];
  return { file, root: doc === undefined ? null : resolveNode(doc, doc.contents), sink, resolve };
}

/**
 * The entries of a mapping in document order, with `<<` merge keys expanded: a key written in
 * the mapping wins over a merged one, and among merged mappings the earlier one wins (YAML's
 * merge rules). Keys that are not strings are reported through `onBadKey` and skipped.
 */
export function mapEntries(
  map: YAMLMap,
  resolve: (node: unknown) => YamlNode | null,
  onBadKey: (keyNode: YamlAnyNode | null, text: string) => void,
): MapEntry[] {
  const explicit: MapEntry[] = [];
  const merged: MapEntry[] = [];
  const sources: YAMLMap[] = [];
  for (const pair of map.items) {
    const keyNode = pair.key as YamlAnyNode | null;
    if (isMergeKey(keyNode)) {
      collectMergeSources(resolve(pair.value), resolve, sources);
      continue;
    }
    if (!isScalar(keyNode) || typeof keyNode.value !== 'string') {
      onBadKey(keyNode, describeNode(keyNode));
      continue;
    }
    explicit.push({ key: keyNode.value, keyNode, value: resolve(pair.value) });
  }
  const seen = new Set(explicit.map((entry) => entry.key));
  for (const source of sources) {
    for (const entry of mapEntries(source, resolve, onBadKey)) {
      if (seen.has(entry.key)) continue;
      seen.add(entry.key);
      merged.push(entry);
    }
  }
  return explicit.concat(merged);
}

/** A short description of a node for messages: its source text, or the kind of collection. */
export function describeNode(node: unknown): string {
  if (node === null || node === undefined) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    if (typeof node.value === 'string') return `'${node.value}'`;
    if (typeof node.value === 'symbol') return `'${node.value.description ?? ''}'`;
    return node.source !== undefined && node.source !== '' ? node.source : String(node.value);
  }
  return 'an unsupported value';
}

function collectMergeSources(
  value: YamlNode | null,
  resolve: (node: unknown) => YamlNode | null,
  sources: YAMLMap[],
): void {
  if (isMap(value)) {
    sources.push(value);
  } else if (isSeq(value)) {
    for (const item of value.items) {
      const resolved = resolve(item);
      if (isMap(resolved)) sources.push(resolved);
    }
  }
}

function isMergeKey(node: unknown): boolean {
  if (!isScalar(node)) return false;
  const value: unknown = node.value;
  return typeof value === 'symbol' && value.description === '<<';
}

function resolveNode(doc: Document.Parsed | undefined, node: unknown): YamlNode | null {
  let current: unknown = node;
  // Alias chains are short; the bound only guards against a pathological document.
  for (let hops = 0; hops < 32 && isAlias(current); hops++) {
    current = doc === undefined ? undefined : current.resolve(doc);
  }
  // An empty value (`key:` or `~`) reads as absent, as the reference's decoder leaves a zero value.
  if (isScalar(current)) return current.value === null ? null : current;
  if (isMap(current) || isSeq(current)) return current;
  return null;
}

/**
 * Report aliases that name no anchor (most often an unquoted value starting with `*`, such as
 * `value: *.example.com`) and aliases inside the node they refer to (endless nesting). Returns
 * false when there was any.
 */
function checkAliases(doc: Document.Parsed, sink: ProblemSink): boolean {
  let ok = true;
  visit(doc, {
    Alias(_key, alias, path) {
      const target = alias.resolve(doc);
      if (target === undefined) {
        ok = false;
        sink.add(
          '',
          `error loading config file: unknown anchor '${alias.source}' referenced; ` +
            `a value starting with '*' must be quoted ("*${alias.source}")`,
          alias,
        );
      } else if (path.includes(target)) {
        ok = false;
        sink.add(
          '',
          `error loading config file: alias '*${alias.source}' refers to a node that contains it`,
          alias,
        );
      }
    },
  });
  return ok;
}

function isEmptyScalar(node: unknown): boolean {
  return isScalar(node) && node.value === null;
}

function firstLine(message: string): string {
  const line = message.split('\n', 1)[0] ?? message;
  return line.endsWith(':') ? line.slice(0, -1) : line;
}
