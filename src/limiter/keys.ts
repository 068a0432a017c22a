/**
 * Counter keys (docs/semantics.md §6): one string per counter, built from the algorithm, the window length,
 * the domain and the descriptor's entries, escaped so that distinct descriptors never share a
 * counter.
 *
 * Layout: `ALG|WINDOW_MS|DOMAIN|KEY=VALUE|KEY=VALUE...`, e.g. `sw|60000|edge|remote_address=1.2.3.4`.
 * An entry whose value is replaced by a `share_threshold` wildcard pattern is written
 * `KEY#PATTERN` instead, so a pattern never collides with a request value spelled like it.
 * In the domain, keys, values and patterns, the four special characters `\`, `|`, `=` and `#`
 * are escaped with a backslash. Decoding is unambiguous (split on unescaped `|`, then each
 * entry on its first unescaped `=` or `#`), so the key is injective in
 * (algorithm, window, domain, entries, shared pattern). {@link decodeCounterKey} reads a key back
 * (the console names the rule of a live counter with it); the request path never decodes one.
 */
import { ALGORITHM_DESCRIPTORS, type Algorithm } from '../algorithms/index.js';
import type { LimitMatch } from '../config/types.js';
import type { DescriptorEntry } from '../model.js';

/** Short tag of each algorithm in a counter key (its descriptor's `tag`, distinct per algorithm). */
export const ALGORITHM_TAGS: Readonly<Record<Algorithm, string>> = Object.freeze(
  Object.fromEntries(
    ALGORITHM_DESCRIPTORS.map((algorithm) => [algorithm.name, algorithm.tag]),
  ) as Record<Algorithm, string>,
);

const SPECIAL = /[\\|=#]/;
const SPECIAL_ALL = /[\\|=#]/g;

/** `text` with `\`, `|`, `=` and `#` backslash-escaped; returned as is when it has none. */
export function escapeKeyPart(text: string): string {
  return SPECIAL.test(text) ? text.replace(SPECIAL_ALL, '\\$&') : text;
}

/**
 * The counter key of one request descriptor under one matched rule.
 *
 * - `domain`: the request's domain.
 * - `entries`: the request descriptor's entries, in order.
 * - `match`: the matched rule; its `algorithm` is part of the key. Entries shared by a
 *   `share_threshold` wildcard contribute the wildcard pattern instead of their value, so every
 *   value matching the wildcard shares one counter (`match.sharedPatterns`, one slot per entry).
 * - `windowMs`: the window length in ms, part of the key so that a reload that changes the unit
 *   (or multiplier) starts a fresh counter.
 * - `algorithm`: the limit's algorithm (default: the rule's first); a rule with several limits
 *   has one counter per limit, told apart by algorithm and window (validation refuses two limits
 *   with the same pair on one descriptor).
 */
export function counterKey(
  domain: string,
  entries: readonly DescriptorEntry[],
  match: LimitMatch,
  windowMs: number,
  algorithm: Algorithm = match.rule.algorithm,
): string {
  const patterns = match.sharedPatterns;
  let key = ALGORITHM_TAGS[algorithm] + '|' + windowMs + '|' + escapeKeyPart(domain);
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    const pattern = patterns?.[i];
    key +=
      pattern === undefined
        ? '|' + escapeKeyPart(entry.key) + '=' + escapeKeyPart(entry.value)
        : '|' + escapeKeyPart(entry.key) + '#' + escapeKeyPart(pattern);
  }
  return key;
}

/** A decoded counter key. */
export interface DecodedCounterKey {
  readonly algorithm: Algorithm;
  readonly windowMs: number;
  readonly domain: string;
  /** Entries in order; `shared` when the value is a `share_threshold` pattern (`K#PATTERN`). */
  readonly entries: readonly { key: string; value: string; shared: boolean }[];
}

/** `text` with its backslash escapes removed. */
function unescape(text: string): string {
  return text.replace(/\\(.)/g, '$1');
}

/** The separator (`=` or `#`) that ends an entry's key, by position; -1 when none. */
function entrySeparator(raw: string): { at: number; shared: boolean } {
  // Stryker disable next-line EqualityOperator: one step past the end reads undefined, no separator
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\\') i++;
    else if (c === '=' || c === '#') return { at: i, shared: c === '#' };
  }
  // Stryker disable next-line BooleanLiteral: the caller refuses the entry at -1 before reading it
  return { at: -1, shared: false };
}

const TAG_TO_ALGORITHM = new Map<string, Algorithm>(
  Object.entries(ALGORITHM_TAGS).map(([algorithm, tag]) => [tag, algorithm as Algorithm]),
);

/** Split a raw key on unescaped `|`, keeping escapes (entries are split further). */
function rawParts(key: string): string[] {
  const parts: string[] = [];
  let start = 0;
  // Stryker disable next-line EqualityOperator: one step past the end reads undefined, no separator
  for (let i = 0; i < key.length; i++) {
    const c = key[i];
    if (c === '\\') i++;
    else if (c === '|') {
      parts.push(key.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(key.slice(start));
  return parts;
}

/** Decode a counter key; `undefined` when it does not have the layout. */
export function decodeCounterKey(key: string): DecodedCounterKey | undefined {
  const parts = rawParts(key);
  if (parts.length < 3) return undefined;
  const algorithm = TAG_TO_ALGORITHM.get(parts[0]!);
  const windowMs = Number(parts[1]);
  if (algorithm === undefined || !Number.isInteger(windowMs)) return undefined;
  const domain = unescape(parts[2]!);
  const entries: { key: string; value: string; shared: boolean }[] = [];
  for (const raw of parts.slice(3)) {
    const { at, shared } = entrySeparator(raw);
    if (at < 0) return undefined;
    entries.push({
      key: unescape(raw.slice(0, at)),
      value: unescape(raw.slice(at + 1)),
      shared,
    });
  }
  return { algorithm, windowMs, domain, entries };
}
