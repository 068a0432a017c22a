/**
 * Reading a counter key back (the layout of limiter/keys.ts: `ALG|WINDOW_MS|DOMAIN|K=V|K#PATTERN`,
 * with `\`, `|`, `=` and `#` backslash-escaped), so the console can name the rule of a live
 * counter. Only the debug console uses it; the request path never decodes a key.
 */
import { ALGORITHM_TAGS } from '../../../limiter/keys.js';
import type { Algorithm } from '../../../config/types.js';

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
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (c === '\\') i++;
    else if (c === '=' || c === '#') return { at: i, shared: c === '#' };
  }
  return { at: -1, shared: false };
}

const TAG_TO_ALGORITHM = new Map<string, Algorithm>(
  Object.entries(ALGORITHM_TAGS).map(([algorithm, tag]) => [tag, algorithm as Algorithm]),
);

/** Split a raw key on unescaped `|`, keeping escapes (entries are split further). */
function rawParts(key: string): string[] {
  const parts: string[] = [];
  let start = 0;
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
