/**
 * YAML text -> node tree with positions. This layer knows YAML (aliases, merge keys, line
 * numbers) and nothing about rate limits; validate.ts walks the tree it returns.
 */
import {
  LineCounter,
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  parseAllDocuments,
  visit,
  type Document,
  type Node as YamlAnyNode,
  YAMLMap,
  type Scalar,
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
// Repeated keys are allowed, as gopkg.in/yaml.v2 allows them: `mapEntries` keeps the last one
// (merging repeated mappings) and reports the repetition as a warning (docs/compatibility.md).
const PARSE_OPTIONS = {
  version: '1.1',
  merge: true,
  uniqueKeys: false,
  prettyErrors: true,
} as const;

/**
 * Parse one configuration file. Never throws: syntax errors become problems.
 *
 * Only the first YAML document is read, as the reference's `yaml.Unmarshal` reads only the first:
 * later documents (after `---`) are ignored, with a warning naming them, and so are their syntax
 * errors (docs/compatibility.md, "Several YAML documents").
 */
export function parseConfigYaml(file: string, content: string): ParsedFile {
  const lineCounter = new LineCounter();
  const sink = new ProblemSink(file, lineCounter);
  const docs = parseAllDocuments(content, { ...PARSE_OPTIONS, lineCounter });
  const documents: Document.Parsed[] = Array.isArray(docs) ? docs : [];
  const first = documents[0];
  const resolve = (node: unknown): YamlNode | null => resolveNode(first, node);

  if (documents.length > 1) warnIgnoredDocuments(documents, sink);
  let broken = false;
  if (first !== undefined) {
    for (const error of first.errors) {
      broken = true;
      sink.add('', `error loading config file: ${firstLine(error.message)}`);
    }
    if (first.errors.length === 0 && !checkAliases(first, sink)) broken = true;
    if (!broken && !checkExpandedSize(first, sink)) broken = true;
  }
  if (broken) return { file, root: undefined, sink, resolve };
  const root = first === undefined ? null : resolveNode(first, first.contents);
  return { file, root, sink, resolve };
}

/** One warning naming every document after the first, with its line. */
function warnIgnoredDocuments(documents: readonly Document.Parsed[], sink: ProblemSink): void {
  const ignored = documents.slice(1).map((doc, index) => {
    const position = sink.position(doc.contents ?? undefined);
    const at = position === undefined ? '' : ` at line ${position.line}`;
    const broken = doc.errors.length > 0 ? ', which is not valid YAML either' : '';
    return `document ${index + 2}${at}${broken}`;
  });
  sink.warn(
    '',
    `the file holds ${documents.length} YAML documents; only the first is loaded, as ` +
      `envoyproxy/ratelimit does, so ${ignored.join(' and ')} ${ignored.length > 1 ? 'are' : 'is'} ` +
      'ignored; put each domain in its own file',
  );
}

/**
 * The entries of a mapping in document order, with `<<` merge keys expanded: a key written in
 * the mapping wins over a merged one, and among merged mappings the earlier one wins (YAML's
 * merge rules). Keys that are not strings are reported through `onBadKey` and skipped.
 *
 * A key written more than once reads as gopkg.in/yaml.v2 decodes it into the reference's structs:
 * the last occurrence wins, except that a run of repeated mappings at the end is merged, later
 * keys over earlier ones (`rate_limit: {unit: hour, requests_per_unit: 2}` then
 * `rate_limit: {requests_per_unit: 7}` is 7 per hour). The entry sits at the first occurrence's
 * place, and `onRepeated` hears of every repetition.
 */
export function mapEntries(
  map: YAMLMap,
  resolve: (node: unknown) => YamlNode | null,
  onBadKey: (keyNode: YamlAnyNode | null, text: string) => void,
  onRepeated?: (repeated: RepeatedKey) => void,
): MapEntry[] {
  const explicit: MapEntry[] = [];
  const merged: MapEntry[] = [];
  const sources: YAMLMap[] = [];
  const occurrences = new Map<string, MapEntry[]>();
  let repeated = false;
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
    const entry: MapEntry = { key: keyNode.value, keyNode, value: resolve(pair.value) };
    const seen = occurrences.get(entry.key);
    if (seen === undefined) {
      occurrences.set(entry.key, [entry]);
      explicit.push(entry);
    } else {
      seen.push(entry);
      repeated = true;
    }
  }
  if (repeated) {
    for (let i = 0; i < explicit.length; i++) {
      const all = occurrences.get(explicit[i]!.key)!;
      if (all.length === 1) continue;
      const combined = combineRepeated(all);
      explicit[i] = combined.entry;
      onRepeated?.({
        key: combined.entry.key,
        keyNodes: all.map((e) => e.keyNode),
        merged: combined.merged,
      });
    }
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

/** A key written more than once in one mapping. */
export interface RepeatedKey {
  /** The key text. */
  readonly key: string;
  /** Every occurrence's key node, in document order. */
  readonly keyNodes: readonly YamlAnyNode[];
  /** True when mappings were merged; false when the last occurrence simply won. */
  readonly merged: boolean;
}

/** yaml.v2's reading of repeated keys: the last wins, a trailing run of mappings is merged. */
function combineRepeated(all: readonly MapEntry[]): { entry: MapEntry; merged: boolean } {
  const last = all[all.length - 1]!;
  let start = all.length - 1;
  while (start > 0 && isMap(all[start - 1]!.value) && isMap(last.value)) start--;
  if (start === all.length - 1) return { entry: last, merged: false };
  const combined = new YAMLMap<unknown, unknown>();
  for (let i = start; i < all.length; i++) {
    combined.items.push(...(all[i]!.value as YAMLMap<unknown, unknown>).items);
  }
  combined.range = (last.value as YAMLMap).range;
  return { entry: { key: last.key, keyNode: last.keyNode, value: combined }, merged: true };
}

/** Longest text a message quotes in full; longer text is cut (see {@link shortText}). */
export const MAX_QUOTED_LENGTH = 32;

/** How many characters of a longer text a message shows. */
const QUOTED_PREFIX_LENGTH = 24;

/**
 * `text` as problems, logs and `sluice check` may show it: in full up to
 * {@link MAX_QUOTED_LENGTH} characters, else its first characters, `…` and its length, so a
 * file that is not a rule file (a linked secret, a key) never appears whole in a message.
 */
export function shortText(text: string): string {
  if (text.length <= MAX_QUOTED_LENGTH) return text;
  return `${text.slice(0, QUOTED_PREFIX_LENGTH)}… (${text.length} characters)`;
}

/** `'text'`, cut as {@link shortText} does. */
export function quote(text: string): string {
  return `'${shortText(text)}'`;
}

/** A short description of a node for messages: its source text, or the kind of collection. */
export function describeNode(node: unknown): string {
  if (node === null || node === undefined) return 'nothing';
  if (isMap(node)) return 'a mapping';
  if (isSeq(node)) return 'a list';
  if (isScalar(node)) {
    if (typeof node.value === 'string') return quote(node.value);
    if (typeof node.value === 'symbol') return quote(node.value.description ?? '');
    return shortText(
      node.source !== undefined && node.source !== '' ? node.source : String(node.value),
    );
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

/** Whether a mapping key is the YAML merge key `<<` (the yaml library reads it as a symbol). */
export function isMergeKey(node: unknown): boolean {
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
          `error loading config file: unknown anchor ${quote(alias.source)} referenced; ` +
            `a value starting with '*' must be quoted ("*${shortText(alias.source)}")`,
          alias,
        );
      } else if (path.includes(target)) {
        ok = false;
        sink.add(
          '',
          `error loading config file: alias ${quote(`*${alias.source}`)} refers to a node that contains it`,
          alias,
        );
      }
    },
  });
  return ok;
}

/**
 * Most YAML nodes a file may hold once its aliases are expanded (each alias counting as a copy of
 * what it names, as validation walks it). Fifty nodes per rule at the default of rules per file
 * leave room for any real rule file; an alias bomb (`a: &a [x, x]`, `b: &b [*a, *a]`, ...)
 * expands to millions from a few kilobytes and is refused before it is walked.
 */
export const MAX_YAML_NODES = 1_000_000;

/** Nesting beyond which the size count stops (validation refuses it anyway). */
const MAX_COUNT_DEPTH = 256;

/**
 * Refuse a document that expands to more than {@link MAX_YAML_NODES} nodes. The count is
 * memoised per node, so it costs time in proportion to the file's text, however much its
 * aliases would expand.
 */
function checkExpandedSize(doc: Document.Parsed, sink: ProblemSink): boolean {
  const sizes = new Map<unknown, number>();
  const limit = MAX_YAML_NODES;
  const sizeOf = (node: unknown, depth: number): number => {
    let current = node;
    for (let hops = 0; hops < 32 && isAlias(current); hops++) current = current.resolve(doc);
    if (!isMap(current) && !isSeq(current)) return 1;
    const known = sizes.get(current);
    if (known !== undefined) return known;
    let size = 1;
    if (depth < MAX_COUNT_DEPTH) {
      for (const item of current.items as unknown[]) {
        if (isPair(item)) size += sizeOf(item.key, depth + 1) + sizeOf(item.value, depth + 1);
        else size += sizeOf(item, depth + 1);
        // Saturate: nothing past the limit matters, and a sum of huge counts stays finite.
        if (size > limit) break;
      }
    }
    size = Math.min(size, limit + 1);
    sizes.set(current, size);
    return size;
  };
  if (sizeOf(doc.contents, 0) <= limit) return true;
  sink.add(
    '',
    `error loading config file: the file expands to more than ${limit} YAML nodes ` +
      '(each alias counts as a copy of what it names); split it into several files or use fewer aliases',
  );
  return false;
}

/** The first line of a YAML error message, without a trailing colon, at most 200 characters. */
function firstLine(message: string): string {
  let line = message.split('\n', 1)[0] ?? message;
  if (line.endsWith(':')) line = line.slice(0, -1);
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/**
 * How gopkg.in/yaml.v2 (the reference's YAML library) reads a scalar when it decodes into a
 * generic value: what the reference's key check (`validateYamlKeys`) then accepts (`string`,
 * `int`, `bool`, `null`) or refuses ("error checking config": `float`, and `uint64` for whole
 * numbers above 2^63-1). Quoted and block scalars are strings; dates stay strings there too.
 */
export type GoScalarKind = 'null' | 'bool' | 'int' | 'uint64' | 'float' | 'string';

const GO_BOOL_AND_NULL: ReadonlyMap<string, GoScalarKind> = new Map([
  ...['y', 'Y', 'yes', 'Yes', 'YES', 'true', 'True', 'TRUE', 'on', 'On', 'ON'].map(
    (s) => [s, 'bool'] as const,
  ),
  ...['n', 'N', 'no', 'No', 'NO', 'false', 'False', 'FALSE', 'off', 'Off', 'OFF'].map(
    (s) => [s, 'bool'] as const,
  ),
  ...['', '~', 'null', 'Null', 'NULL'].map((s) => [s, 'null'] as const),
  ...['.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF'].map(
    (s) => [s, 'float'] as const,
  ),
  ...['-.inf', '-.Inf', '-.INF'].map((s) => [s, 'float'] as const),
]);

const GO_YAML_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const GO_DATE_PREFIX = /^[0-9]{4}-/;
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** {@link GoScalarKind} of a scalar node (see there). */
export function goScalarKind(node: Scalar): GoScalarKind {
  if (node.type !== 'PLAIN') return 'string';
  if (node.tag !== undefined) return node.tag.endsWith(':float') ? 'float' : 'string';
  const text = node.source ?? '';
  const known = GO_BOOL_AND_NULL.get(text);
  if (known !== undefined) return known;
  const first = text.charAt(0);
  if (first === '.') {
    return /^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(text) ? 'float' : 'string';
  }
  if (!/^[-+0-9]/.test(first)) return 'string';
  // yaml.v2 tries a timestamp first; its dates read as strings into a generic value.
  if (GO_DATE_PREFIX.test(text) && isGoTimestamp(text)) return 'string';
  const plain = text.replace(/_/g, '');
  const whole = goParseInt(plain);
  if (whole !== undefined) {
    if (whole >= -INT64_MAX - 1n && whole <= INT64_MAX) return 'int';
    if (whole >= 0n && whole <= UINT64_MAX && !plain.startsWith('-') && !plain.startsWith('+')) {
      return 'uint64';
    }
  }
  if (GO_YAML_FLOAT.test(plain) && Number.isFinite(Number(plain))) return 'float';
  return 'string';
}

/**
 * The whole number yaml.v2 reads from `text` (Go's `strconv.ParseInt(text, 0, 64)` syntax: an
 * optional sign, then `0x`, `0o`, `0b` or a leading `0` for octal, else decimal), unbounded;
 * `undefined` when it is not one. Use with {@link goScalarKind} `int` to get the value.
 */
export function goParseInt(text: string): bigint | undefined {
  const match = /^([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$/.exec(
    text,
  );
  if (match === null) return undefined;
  const sign = match[1] === '-' ? -1n : 1n;
  const digits = match[2]!;
  let value: bigint;
  if (/^0[oO]/.test(digits)) value = BigInt(`0o${digits.slice(2)}`);
  else if (/^0[0-7]+$/.test(digits)) value = BigInt(`0o${digits.slice(1)}`);
  else value = BigInt(digits);
  return sign * value;
}

function isGoTimestamp(text: string): boolean {
  return (
    /^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}$/.test(text) ||
    /^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[Tt ][0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})?$/.test(
      text,
    )
  );
}
