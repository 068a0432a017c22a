/**
 * Wildcard patterns for descriptor values (and joined `key_value` texts). `*` matches any run of
 * characters (including none), anywhere in the pattern; every other character matches itself, as
 * in the reference's `wildcardMatch`.
 *
 * Patterns are compiled once when a snapshot is built; matching allocates nothing.
 */

/** A compiled wildcard pattern. */
export interface Glob {
  /** The pattern as written in the configuration, e.g. `user_*`. */
  readonly pattern: string;
  /** The literal text before the first `*`. */
  readonly head: string;
  /** The literal text after the last `*`. */
  readonly tail: string;
  /** Literal runs between the first and the last `*`, in order (empty runs removed). */
  readonly middle: readonly string[];
  /** The shortest value that can match: the total length of the literal runs. */
  readonly minLength: number;
}

/** True when `value` is a wildcard pattern (contains at least one `*`). */
export function isWildcard(value: string): boolean {
  return value.includes('*');
}

/** Compile a pattern that contains at least one `*`. */
export function compileGlob(pattern: string): Glob {
  const parts = pattern.split('*');
  const head = parts[0] ?? '';
  const tail = parts.length > 1 ? (parts[parts.length - 1] ?? '') : '';
  const middle = Object.freeze(parts.slice(1, -1).filter((part) => part !== ''));
  const minLength = head.length + tail.length + middle.reduce((sum, part) => sum + part.length, 0);
  return Object.freeze({ pattern, head, tail, middle, minLength });
}

/** True when `value` matches the compiled pattern. */
export function matchGlob(glob: Glob, value: string): boolean {
  if (value.length < glob.minLength) return false;
  if (!value.startsWith(glob.head) || !value.endsWith(glob.tail)) return false;
  const middle = glob.middle;
  if (middle.length === 0) return true;
  // Leftmost placement of each literal run is optimal for `*`-only globs: placing a run earlier
  // never removes a solution for the runs after it.
  let position = glob.head.length;
  const end = value.length - glob.tail.length;
  for (let i = 0; i < middle.length; i++) {
    const part = middle[i]!;
    const found = value.indexOf(part, position);
    if (found < 0 || found + part.length > end) return false;
    position = found + part.length;
  }
  return true;
}

/**
 * True for a descriptor whose key holds a `*` (`key: "b*"`, `key: "*"`, `key: "a*b"` with or
 * without a value): like the reference, such a node is a wildcard on the joined `key_value` text
 * (`key` alone when it has no value), tested against the request entry's `key_value`
 * (docs/compatibility.md).
 */
export function isKeyWildcard(key: string): boolean {
  return key.includes('*');
}
