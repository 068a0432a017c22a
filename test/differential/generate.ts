/**
 * Seeded generators for the differential tier: rule files in the reference's format (nesting,
 * wildcards in values and keys, key-only defaults, unlimited, shadow_mode, quota_mode, replaces,
 * share_threshold, metadata, and odd YAML: quoting, flow style, anchors and merge keys, repeated
 * keys, several documents, floats, misplaced and unknown keys) and request sequences for them
 * (several descriptors, hits_addend on the request and on descriptors, overrides, unknown
 * domains, odd strings).
 *
 * Units are hour and day only, so a run never crosses a window boundary unnoticed (the runner
 * still checks the hour). Keys never contain `_`: the reference matches on the joined `key_value`
 * text, and keys without `_` keep that text unambiguous (see deliberate.ts, "joined-key aliasing").
 */
import type { Random } from './random.js';

/** A generated `rate_limit` block. */
export interface GenRateLimit {
  readonly unit: string;
  readonly requestsPerUnit: number;
  readonly unlimited: boolean;
  readonly name: string | undefined;
  readonly replaces: readonly string[];
}

/** A generated descriptor node. */
export interface GenNode {
  readonly key: string;
  /** `''` for a key-only node. */
  readonly value: string;
  readonly rateLimit: GenRateLimit | undefined;
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  readonly shareThreshold: boolean;
  readonly children: readonly GenNode[];
}

/** A generated rule file. */
export interface GenConfig {
  /** The file name (unique in a run). */
  readonly file: string;
  /** The domain the first document declares. */
  readonly domain: string;
  /** The descriptor tree, for building requests. */
  readonly nodes: readonly GenNode[];
  /** The file text. */
  readonly yaml: string;
  /** Which odd features the text uses (for reports and the rules in deliberate.ts). */
  readonly features: ReadonlySet<string>;
}

const KEYS = ['a', 'b', 'k', 'path', 'ip', 'user', 'bb'];
const KEY_WILDCARDS = ['b*', '*', 'us*', 'a*b', 'p*th'];
const VALUES = ['x', 'y', 'v1', 'v2', 'pre1', 'foo', '/login', '10.0.0.1', 'bar'];
const PATTERNS = ['v*', 'pre*', '*', 'fo*', '10.*'];
const MID_PATTERNS = ['v*1', '*o', 'p*e*'];
const NAMES = ['n1', 'n2', 'n3', 'lim'];
const ODD_VALUES = ['', 'ü', 'a b', 'x.y', '💥', 'pre_x', 'v*', '-', 'x'.repeat(40), 'with:colon'];

/** Generate rule file number `index` of a run. */
export function generateConfig(random: Random, index: number): GenConfig {
  const domain = `d${index}`;
  const features = new Set<string>();
  const nodes = generateLevel(random, 0, features);
  const yaml = render(random, domain, nodes, features);
  return { file: `c${String(index).padStart(4, '0')}.yaml`, domain, nodes, yaml, features };
}

function generateLevel(random: Random, depth: number, features: Set<string>): GenNode[] {
  const count = random.int(1, depth === 0 ? 5 : 3);
  const nodes: GenNode[] = [];
  const used = new Set<string>();
  for (let i = 0; i < count; i++) {
    let key = random.pick(KEYS);
    let value = '';
    const kind = random.next();
    if (kind < 0.08) {
      key = random.pick(KEY_WILDCARDS);
      features.add('key-wildcard');
      // A key with `*` and a value is one pattern on the joined key_value text.
      if (random.chance(0.4)) value = random.pick([...VALUES, ...PATTERNS, ...MID_PATTERNS]);
    } else if (kind < 0.45) {
      value = random.pick(VALUES);
    } else if (kind < 0.7) {
      value = random.pick(PATTERNS);
      features.add('value-wildcard');
    } else if (kind < 0.73) {
      value = random.pick(MID_PATTERNS);
      features.add('mid-value-wildcard');
    }
    // A repeated composite key is refused by both; keep it rare so most files load.
    const composite = value === '' ? key : `${key}_${value}`;
    if (used.has(composite) && random.chance(0.9)) continue;
    used.add(composite);
    const children =
      depth < 2 && random.chance(0.3) ? generateLevel(random, depth + 1, features) : [];
    const hasRule = children.length === 0 ? random.chance(0.9) : random.chance(0.4);
    let rateLimit: GenRateLimit | undefined;
    if (hasRule) {
      const unlimited = random.chance(0.07);
      rateLimit = {
        unit: random.pick(['hour', 'day', 'Hour', 'DAY']),
        requestsPerUnit: random.pick([0, 1, 2, 3, 5, 8]),
        unlimited,
        name: random.chance(0.3) ? random.pick(NAMES) : undefined,
        replaces: random.chance(0.1) ? [random.pick(NAMES)] : [],
      };
      if (unlimited) features.add('unlimited');
      if (rateLimit.replaces.length > 0) features.add('replaces');
    }
    const shareThreshold = (value.includes('*') || key.includes('*')) && random.chance(0.4);
    if (shareThreshold) features.add('share_threshold');
    const shadowMode = random.chance(0.1);
    if (shadowMode) features.add('shadow_mode');
    const quotaMode = random.chance(0.05);
    if (quotaMode) features.add('quota_mode');
    nodes.push({ key, value, rateLimit, shadowMode, quotaMode, shareThreshold, children });
  }
  return nodes;
}

/** A scalar in one of YAML's spellings that all mean the same string. */
function quote(random: Random, text: string): string {
  const plainSafe = /^[A-Za-z0-9./-][A-Za-z0-9./ _-]*$/.test(text) && !/^[0-9.+-]/.test(text);
  const style = random.next();
  if (plainSafe && style < 0.5) return text;
  if (style < 0.75 || text.includes("'")) return JSON.stringify(text);
  return `'${text}'`;
}

function render(
  random: Random,
  domain: string,
  nodes: readonly GenNode[],
  features: Set<string>,
): string {
  const lines: string[] = [];
  if (random.chance(0.1)) lines.push('# generated by the differential tier');
  const domainLine = `domain: ${quote(random, domain)}`;
  if (random.chance(0.04)) {
    // Repeated key: the reference keeps the last one.
    lines.push(`domain: other${domain}`);
    features.add('repeated-key');
  }
  lines.push(domainLine);
  if (random.chance(0.03)) {
    lines.push('domain_typo: x');
    features.add('unknown-key');
  }
  lines.push('descriptors:');
  const anchors: string[] = [];
  renderLevel(random, nodes, '  ', lines, features, anchors);
  if (random.chance(0.06)) {
    lines.push(
      '---',
      `domain: second${domain}`,
      'descriptors:',
      '  - key: a',
      '    rate_limit: {unit: hour, requests_per_unit: 1}',
    );
    features.add('several-documents');
  }
  return lines.join('\n') + '\n';
}

function renderLevel(
  random: Random,
  nodes: readonly GenNode[],
  indent: string,
  lines: string[],
  features: Set<string>,
  anchors: string[],
): void {
  for (const node of nodes) {
    const inner = `${indent}  `;
    lines.push(`${indent}- key: ${quote(random, node.key)}`);
    if (node.value !== '') {
      lines.push(`${inner}value: ${quote(random, node.value)}`);
    } else if (random.chance(0.03)) {
      // A number or boolean value is text to both (`value: 15` is "15").
      lines.push(`${inner}value: ${random.pick(['15', 'yes', '0x1F', '2001-12-14'])}`);
      features.add('non-string-scalar');
      // The node is no longer key-only; the request generator does not know its value, so its
      // requests simply fall through to other nodes. Good enough for a differential test.
    }
    if (random.chance(0.01)) {
      lines.push(`${inner}value: 1.5`);
      features.add('float');
    }
    if (node.rateLimit !== undefined)
      renderRateLimit(random, node.rateLimit, inner, lines, features, anchors);
    else if (random.chance(0.05)) {
      lines.push(`${inner}rate_limit:`);
      features.add('empty-rate-limit');
    }
    if (node.shadowMode) lines.push(`${inner}shadow_mode: ${random.pick(['true', 'yes', 'True'])}`);
    if (node.quotaMode) lines.push(`${inner}quota_mode: true`);
    if (node.shareThreshold) lines.push(`${inner}share_threshold: true`);
    else if (random.chance(0.02)) {
      lines.push(`${inner}share_threshold: true`);
      features.add('share_threshold-misuse');
    }
    if (random.chance(0.03)) {
      lines.push(`${inner}detailed_metric: true`);
      features.add('detailed_metric');
    }
    const metadata = random.next();
    if (metadata < 0.06) {
      const n = random.int(1, 9);
      lines.push(
        `${inner}metadata: ${random.pick([
          `{team: t${n}}`,
          `{team: t${n}, tier: {level: ${n}}}`,
          `{tier: {zone: z${n}}, tags: [a, ${n}], flag: yes}`,
        ])}`,
      );
      features.add('metadata-mapping');
    } else if (metadata < 0.08) {
      lines.push(`${inner}metadata: ${random.pick(['true', '[{a: 1}]', 'text'])}`);
      features.add('metadata-not-mapping');
    }
    if (random.chance(0.005)) {
      lines.push(`${inner}descriptor: x`);
      features.add('unknown-key');
    }
    if (node.children.length > 0) {
      lines.push(`${inner}descriptors:`);
      renderLevel(random, node.children, `${inner}  `, lines, features, anchors);
    }
  }
}

function renderRateLimit(
  random: Random,
  rateLimit: GenRateLimit,
  indent: string,
  lines: string[],
  features: Set<string>,
  anchors: string[],
): void {
  const fields: [string, string][] = [];
  if (!rateLimit.unlimited || random.chance(0.1)) {
    fields.push(['unit', rateLimit.unit]);
    if (rateLimit.unlimited) features.add('unlimited-with-unit');
  }
  if (!rateLimit.unlimited) fields.push(['requests_per_unit', String(rateLimit.requestsPerUnit)]);
  if (rateLimit.unlimited) fields.push(['unlimited', 'true']);
  if (rateLimit.name !== undefined) fields.push(['name', rateLimit.name]);
  if (random.chance(0.03)) {
    fields.push(['shadow_mode', 'true']);
    features.add('misplaced-key');
  }
  let anchor = '';
  if (anchors.length > 0 && random.chance(0.1)) {
    // A merge key: the anchored block's fields, this block's fields over them.
    fields.unshift(['<<', `*${random.pick(anchors)}`]);
    features.add('merge-key');
  } else if (random.chance(0.1)) {
    const name = `rl${anchors.length}`;
    anchors.push(name);
    anchor = ` &${name}`;
  }
  if (random.chance(0.04) && !rateLimit.unlimited) {
    // Repeated key: the reference keeps the last occurrence.
    fields.splice(1, 0, ['requests_per_unit', String(rateLimit.requestsPerUnit + 7)]);
    fields.push(['requests_per_unit', String(rateLimit.requestsPerUnit)]);
    features.add('repeated-key');
  }
  if (rateLimit.replaces.length > 0) {
    if (random.chance(0.5)) {
      lines.push(`${indent}rate_limit:${anchor}`);
      for (const [k, v] of fields) lines.push(`${indent}  ${k}: ${v}`);
      lines.push(`${indent}  replaces:`);
      for (const name of rateLimit.replaces) lines.push(`${indent}    - name: ${name}`);
      return;
    }
    fields.push(['replaces', `[${rateLimit.replaces.map((n) => `{name: ${n}}`).join(', ')}]`]);
  }
  if (random.chance(0.5)) {
    lines.push(
      `${indent}rate_limit:${anchor} {${fields.map(([k, v]) => `${k}: ${v}`).join(', ')}}`,
    );
  } else {
    lines.push(`${indent}rate_limit:${anchor}`);
    for (const [k, v] of fields) lines.push(`${indent}  ${k}: ${v}`);
  }
}

/** One request descriptor. */
export interface GenDescriptor {
  readonly entries: readonly { key: string; value: string }[];
  /** The per-descriptor hits_addend (UInt64Value); `undefined` when absent. */
  readonly hitsAddend: number | undefined;
  /** A RateLimitOverride; `undefined` when absent. */
  readonly limit: { requestsPerUnit: number; unit: 'HOUR' | 'DAY' } | undefined;
}

/** One request. */
export interface GenRequest {
  readonly domain: string;
  readonly descriptors: readonly GenDescriptor[];
  /** The request's hits_addend (0 = absent). */
  readonly hitsAddend: number;
}

/** A request sequence for one config. */
export function generateRequests(random: Random, config: GenConfig, count: number): GenRequest[] {
  const requests: GenRequest[] = [];
  for (let i = 0; i < count; i++) {
    const domain = random.chance(0.03)
      ? `unknown${config.domain}`
      : random.chance(0.01)
        ? ''
        : config.domain;
    const descriptors: GenDescriptor[] = [];
    const n = random.chance(0.01) ? 0 : random.int(1, 3);
    for (let d = 0; d < n; d++) {
      // Sometimes the same descriptor twice in one request: both count on one counter.
      const previous = descriptors[d - 1];
      descriptors.push(
        previous !== undefined && random.chance(0.1)
          ? previous
          : generateDescriptor(random, config.nodes),
      );
    }
    requests.push({ domain, descriptors, hitsAddend: random.pick([0, 0, 0, 1, 2, 3, 9]) });
  }
  return requests;
}

function generateDescriptor(random: Random, nodes: readonly GenNode[]): GenDescriptor {
  const entries: { key: string; value: string }[] = [];
  let level = nodes;
  const depth = random.int(1, 3);
  for (let i = 0; i < depth; i++) {
    if (level.length === 0 || random.chance(0.1)) {
      entries.push({ key: random.pick(KEYS), value: random.pick([...VALUES, ...ODD_VALUES]) });
      level = [];
      continue;
    }
    const node = random.pick(level);
    entries.push({ key: requestKey(random, node), value: requestValue(random, node) });
    level = node.children;
  }
  const hitsAddend = random.chance(0.15) ? random.pick([0, 1, 2, 4]) : undefined;
  const limit = random.chance(0.06)
    ? { requestsPerUnit: random.int(0, 4), unit: random.pick(['HOUR', 'DAY'] as const) }
    : undefined;
  return { entries, hitsAddend, limit };
}

function requestKey(random: Random, node: GenNode): string {
  if (!node.key.includes('*')) return node.key;
  if (random.chance(0.1)) return node.key; // the pattern text itself
  return node.key.replace('*', random.pick(['', 'x', 'ar', 'b']));
}

function requestValue(random: Random, node: GenNode): string {
  const value = node.value;
  if (random.chance(0.15)) return random.pick(ODD_VALUES);
  if (value === '') return random.pick(VALUES);
  if (!value.includes('*')) return random.chance(0.85) ? value : random.pick(VALUES);
  if (random.chance(0.1)) return value; // the pattern text itself
  if (random.chance(0.5)) return value.replace(/\*/g, () => random.pick(['', '1', 'zz', 'o']));
  const prefix = value.slice(0, value.indexOf('*'));
  return prefix + random.pick(['', '1', 'zz', 'o', 'e1']);
}
