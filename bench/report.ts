/**
 * Number formatting, percentiles and the one Markdown table `npm run bench` prints.
 */

/** One row of the results table. */
export interface Row {
  /** Short id, e.g. `1a`. */
  readonly id: string;
  /** What was measured, with its unit. */
  readonly what: string;
  /** sluice's figure, formatted. */
  readonly sluice: string;
  /** The baseline's figure, formatted. */
  readonly baseline: string;
  /** sluice / baseline, formatted; the figure to compare across machines. */
  readonly ratio: string;
}

/** The table as Markdown, aligned for reading in a terminal too. */
export function formatTable(rows: readonly Row[]): string {
  const header: Row = {
    id: '#',
    what: 'measurement',
    sluice: 'sluice',
    baseline: 'baseline',
    ratio: 'ratio sluice/baseline',
  };
  const all = [header, ...rows];
  const keys = ['id', 'what', 'sluice', 'baseline', 'ratio'] as const;
  const widths = keys.map((k) => Math.max(...all.map((r) => r[k].length)));
  const line = (r: Row): string =>
    '| ' + keys.map((k, i) => r[k].padEnd(widths[i]!)).join(' | ') + ' |';
  const rule = '|' + widths.map((w) => '-'.repeat(w + 2)).join('|') + '|';
  return [line(header), rule, ...rows.map(line)].join('\n');
}

/** `value` with 3 significant digits and a k/M suffix: 1234567 -> `1.23M`. */
export function si(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  const abs = Math.abs(value);
  if (abs >= 1e6) return `${(value / 1e6).toPrecision(3)}M`;
  if (abs >= 1e3) return `${(value / 1e3).toPrecision(3)}k`;
  return value.toPrecision(3);
}

/** A ratio with 2 decimals (3 significant digits below 0.1). */
export function ratio(a: number, b: number): string {
  if (!(b > 0) || !Number.isFinite(a)) return 'n/a';
  const r = a / b;
  return r >= 0.1 ? r.toFixed(2) : r.toPrecision(2);
}

/** Milliseconds with 2 decimals. */
export function ms(value: number): string {
  return value.toFixed(2);
}

/** The median of `values` (which is sorted in place). */
export function median(values: number[]): number {
  values.sort((a, b) => a - b);
  const n = values.length;
  if (n === 0) return NaN;
  const mid = n >> 1;
  return n % 2 === 1 ? values[mid]! : (values[mid - 1]! + values[mid]!) / 2;
}

/** Nearest-rank percentile `p` (0..100) of the first `count` values of `sorted` (ascending). */
export function percentile(sorted: Float64Array, count: number, p: number): number {
  if (count === 0) return NaN;
  const rank = Math.min(count, Math.max(1, Math.ceil((p / 100) * count)));
  return sorted[rank - 1]!;
}
