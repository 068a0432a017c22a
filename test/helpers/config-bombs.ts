/** Hostile rule files for the config bound tests (issue 22, item 4). */

/**
 * An alias bomb: `levels` levels of 10 aliases each to the level below, the last level holding
 * `rules`, so it expands to 10^levels rules from a few kilobytes.
 */
export function aliasBomb(levels: number): string {
  const lines = [
    'domain: bomb',
    'l0: &l0',
    '  - {key: k, value: v, rate_limit: {unit: second, requests_per_unit: 1}}',
  ];
  for (let i = 1; i <= levels; i++) {
    lines.push(`l${i}: &l${i}`);
    for (let k = 0; k < 10; k++) lines.push(`  - {key: k${k}, descriptors: *l${i - 1}}`);
  }
  lines.push(`descriptors: *l${levels}`, '');
  return lines.join('\n');
}
