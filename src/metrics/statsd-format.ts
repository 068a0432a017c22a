/**
 * The statsd line protocol as envoyproxy/ratelimit writes it (through lyft/gostats), and the
 * DogStatsD variant (through datadog-go): pure functions from a metric name, value and tags to one
 * line. Tags are carried the gostats way inside a plain statsd name (`name.__key=value`, sorted
 * by key) and as `|#key:value` for DogStatsD, after the reference's mogrifier rules.
 */

/** One tag, as `EXTRA_TAGS` and the mogrifiers give them. */
export interface Tag {
  /** Tag name. */
  readonly key: string;
  /** Tag value (gostats replaces `.`, `:` and `|` with `_` in it). */
  readonly value: string;
}

/**
 * `EXTRA_TAGS` as gostats serialises them into a statsd name: pairs with an empty key or value
 * dropped, values cleaned of `.`, `:` and `|`, sorted by key, each written `.__key=value`.
 */
export function tagSuffix(tags: readonly Tag[]): string {
  const clean = tags
    .filter((t) => t.key !== '' && t.value !== '')
    .map((t) => ({ key: t.key, value: t.value.replace(/[.:|]/g, '_') }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  let suffix = '';
  for (const t of clean) suffix += `.__${t.key}=${t.value}`;
  return suffix;
}

/**
 * One DogStatsD rule (`DOG_STATSD_MOGRIFIER_<NAME>_*`): a metric whose name matches `pattern`
 * is renamed to `name` and given `tags`; `$0`, `$1`, ... in either are the match's groups.
 */
export interface Mogrifier {
  /** The rule's `<NAME>`, for messages. */
  readonly label: string;
  /** `_PATTERN`, compiled (searched anywhere in the name, as Go's FindStringSubmatch). */
  readonly pattern: RegExp;
  /** `_NAME`: the new metric name, with `$n` references. */
  readonly name: string;
  /** `_TAGS`: tag names and values, values with `$n` references. */
  readonly tags: readonly Tag[];
}

/**
 * Compile a Go (RE2) pattern as a JavaScript RegExp: the syntax both share, with Go's named
 * groups `(?P<name>...)` rewritten to `(?<name>...)`. Throws SyntaxError for what neither reads.
 */
export function compileGoPattern(pattern: string): RegExp {
  return new RegExp(pattern.replaceAll('(?P<', '(?<'));
}

const GROUP_REFERENCE = /\$(\d+)/g;

function expand(template: string, groups: RegExpExecArray): string {
  return template.replace(GROUP_REFERENCE, (ref, digits: string) => {
    const i = Number(digits);
    // Out of range stays literal; a group that took no part is '' (as Go's submatch).
    return i < groups.length ? (groups[i] ?? '') : ref;
  });
}

/**
 * A gostats name (`name.__key=value...`) as DogStatsD sends it: the tags split off, then the
 * first mogrifier whose pattern matches renames the metric and adds its tags.
 */
export function mogrify(
  serialized: string,
  mogrifiers: readonly Mogrifier[],
): { name: string; tags: string[] } {
  const at = serialized.indexOf('.__');
  let name = serialized;
  const tags: string[] = [];
  if (at >= 0) {
    name = serialized.slice(0, at);
    for (const pair of serialized.slice(at + 3).split('.__')) {
      const eq = pair.indexOf('=');
      if (eq >= 0) tags.push(`${pair.slice(0, eq)}:${pair.slice(eq + 1)}`);
    }
  }
  for (const m of mogrifiers) {
    const groups = m.pattern.exec(name);
    if (groups === null) continue;
    for (const tag of m.tags) tags.push(`${tag.key}:${expand(tag.value, groups)}`);
    return { name: expand(m.name, groups), tags };
  }
  return { name, tags };
}

/** statsd metric types sluice sends: counter, timer (ms). */
export type LineType = 'c' | 'ms';

/**
 * One line without its newline: `name:value|type`, `|@rate` when sampled (rate < 1), and for
 * DogStatsD `|#tag,tag`. `name` is the gostats-serialised name (tags inside it); DogStatsD lines
 * are mogrified first.
 */
export function formatLine(
  serialized: string,
  value: number,
  type: LineType,
  rate: number,
  dog: { readonly mogrifiers: readonly Mogrifier[] } | undefined,
): string {
  const sampled = rate < 1 ? `|@${rate}` : '';
  if (dog === undefined) return `${serialized}:${value}|${type}${sampled}`;
  const { name, tags } = mogrify(serialized, dog.mogrifiers);
  return `${name}:${value}|${type}${sampled}${tags.length > 0 ? `|#${tags.join(',')}` : ''}`;
}
