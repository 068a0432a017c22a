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
 * What may not stand in a stats key: control characters (a newline starts a new line; Unicode's
 * line and paragraph separators too, for readers that split on them), the line's
 * own separators `:` and `|`, the sample rate's `@`, and the characters that open tags in the name
 * formats statsd_exporter reads besides DogStatsD's (`#` Librato, `,` InfluxDB, `[...]` SignalFx).
 */
const UNSAFE_IN_KEY = /[\p{Cc}\p{Zl}\p{Zp}:|@#,[\]]/gu;

/** gostats' tag marker: a dot and two or more underscores (`.__key=value`). */
const TAG_MARKER = /\.__+/g;

/**
 * A stats key (which holds request values for `detailed_metric`, `value_to_metric` and overrides)
 * made safe to stand inside a statsd or DogStatsD name: {@link UNSAFE_IN_KEY} characters become
 * `_`, and a dot followed by underscores becomes `._`, so that no value can start a line, a field
 * or a tag (the reference's own sanitising, `:` and `|` only, is applied before this).
 */
export function safeStatsKey(key: string): string {
  return key.replace(UNSAFE_IN_KEY, '_').replace(TAG_MARKER, '._');
}

/** What may not stand in a gostats tag key or value: the marker's `.` and `=`, and UNSAFE_IN_KEY. */
const UNSAFE_IN_TAG = /[\p{Cc}\p{Zl}\p{Zp}.=:|@#,[\]]/gu;

/**
 * `EXTRA_TAGS` as gostats serialises them into a statsd name: pairs with an empty key or value
 * dropped, values cleaned of `.`, `:` and `|` (gostats' rule) and of whatever else could end the
 * line or start another tag (keys too), sorted by key, each written `.__key=value`.
 */
export function tagSuffix(tags: readonly Tag[]): string {
  const clean = tags
    .filter((t) => t.key !== '' && t.value !== '')
    .map((t) => ({
      key: t.key.replace(UNSAFE_IN_TAG, '_'),
      value: t.value.replace(UNSAFE_IN_TAG, '_'),
    }))
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

/** What would end a line or a field in a name: control characters, `:` and `|`. */
const UNSAFE_IN_NAME = /[\p{Cc}\p{Zl}\p{Zp}:|]/gu;

/** What would end a line, a field or a tag in a DogStatsD tag: control characters, `|` and `,`. */
const UNSAFE_IN_DOG_TAG = /[\p{Cc}\p{Zl}\p{Zp}|,]/gu;

/**
 * One line without its newline: `name:value|type`, `|@rate` when sampled (rate < 1), and for
 * DogStatsD `|#tag,tag`. `name` is the gostats-serialised name (tags inside it); DogStatsD lines
 * are mogrified first. Whatever the name, the mogrifier rules and the tags hold, the result is one
 * line with one value: the last guard after {@link safeStatsKey} and {@link tagSuffix}.
 */
export function formatLine(
  serialized: string,
  value: number,
  type: LineType,
  rate: number,
  dog: { readonly mogrifiers: readonly Mogrifier[] } | undefined,
): string {
  const sampled = rate < 1 ? `|@${rate}` : '';
  if (dog === undefined)
    return `${serialized.replace(UNSAFE_IN_NAME, '_')}:${value}|${type}${sampled}`;
  const { name, tags } = mogrify(serialized, dog.mogrifiers);
  let tagText = '';
  for (const tag of tags)
    tagText += `${tagText === '' ? '|#' : ','}${tag.replace(UNSAFE_IN_DOG_TAG, '_')}`;
  return `${name.replace(UNSAFE_IN_NAME, '_')}:${value}|${type}${sampled}${tagText}`;
}
