/**
 * The deliberate differences between sluice and the reference, as rules: the one place
 * where the differential tier decides what it does not compare. Every rule is documented in
 * docs/compatibility.md ("Deliberate differences"); a rule is a predicate over what was generated
 * and observed, never a list of cases.
 */
import type { GenConfig } from './generate.js';

// Config acceptance has no deliberate difference: a file one side loads and the other refuses is
// always reported.

/** A named rule, reported with the number of times it applied. */
export interface DeliberateRule {
  /** Short name, printed in the run's summary. */
  readonly name: string;
  /** What it excuses, and why (docs/compatibility.md has the long form). */
  readonly why: string;
}

/** Every rule, for the summary. */
export const RULES = {
  errorCode: {
    name: 'error-code',
    why: 'when both refuse a request only the refusal is compared, not the gRPC code (sluice answers INVALID_ARGUMENT, the reference UNKNOWN or INTERNAL)',
  },
  rejectedRemaining: {
    name: 'rejected-request-remaining',
    why: 'in a request the reference rejects, sluice charges nothing, so limit_remaining of its OK descriptors is not compared (docs/semantics.md §3)',
  },
  repeatedCounter: {
    name: 'repeated-counter-remaining',
    why: 'when several descriptors of one request count on one counter, sluice reports each with the counter after the whole request, the reference each with its own running total; codes are still compared',
  },
  patternOverride: {
    name: 'override-on-pattern-value',
    why: 'a descriptor with a limit override whose value is spelled like a share_threshold pattern (`pre*`) counts on its own counter in sluice, whose keys mark shared patterns; the reference keys both `path_pre*` and shares one counter, so that counter class is not compared from then on',
  },
  lostMetadata: {
    name: 'metadata-lost-by-the-reference',
    why: "the reference drops a rule's `metadata` from dynamic_metadata when it rebuilds the rule for a stats key (detailed_metric, value_to_metric, or a key wildcard reached through another key); sluice returns it",
  },
  unitlessKey: {
    name: 'reference-key-without-unit',
    why: "the reference's counter key is the entries plus the window start, not the unit: counters of the same entries with two units share one counter while their window starts coincide (HOUR and DAY all through the first hour of a UTC day), so those counter classes are not compared from then on",
  },
  afterRejection: {
    name: 'after-first-rejection',
    why: 'once a counter was charged over its limit by the reference (a rejected request, or shadow/quota mode over the limit), its later codes, remaining and the dynamic metadata are not compared',
  },
} as const satisfies Record<string, DeliberateRule>;

/**
 * The counter class of a limited status: every descriptor that can share a counter with another
 * has the same keys in the same order and the same unit (share_threshold and overrides only
 * change values), so tainting by class is conservative.
 */
export function counterClass(domain: string, keys: readonly string[], unit: string): string {
  return `${domain}\u0000${keys.join('\u0000')}\u0000${unit}`;
}

/**
 * For each status of a request, whether a later status of the same request may count on the same
 * counter (then its limit_remaining is excused by `repeatedCounter`). Without share_threshold in
 * the config only identical entries share a counter; with it, any values of the same keys may.
 */
export function sharesCounterWithLater(
  config: GenConfig,
  domain: string,
  entries: readonly (readonly { key: string; value: string }[])[],
  units: readonly (string | undefined)[],
): boolean[] {
  const shared = config.features.has('share_threshold');
  const ids = entries.map((list, i) => {
    const unit = units[i];
    if (unit === undefined) return undefined;
    const values = shared ? '' : list.map((e) => e.value).join('\u0000');
    return `${counterClass(
      domain,
      list.map((e) => e.key),
      unit,
    )}\u0001${values}`;
  });
  return ids.map((id, i) => id !== undefined && ids.indexOf(id, i + 1) > i);
}

/**
 * True when `descriptor` carries a limit override and a value with a `*` in a config that uses
 * share_threshold: the reference may count it on a shared pattern's counter (RULES.patternOverride).
 */
export function overrideMayShareAPattern(
  config: GenConfig,
  descriptor: { readonly entries: readonly { value: string }[]; readonly limit?: unknown },
): boolean {
  return (
    config.features.has('share_threshold') &&
    descriptor.limit !== undefined &&
    descriptor.entries.some((entry) => entry.value.includes('*'))
  );
}

/**
 * True when the only difference in dynamic_metadata (canonical JSON) is a `metadata` field that
 * sluice sends and the reference left out, in a config whose features make the reference rebuild
 * rules for their stats key (RULES.lostMetadata).
 */
export function referenceLostMetadata(config: GenConfig, mine: string, theirs: string): boolean {
  if (!['detailed_metric', 'key-wildcard'].some((feature) => config.features.has(feature))) {
    return false;
  }
  const sluice = JSON.parse(mine) as Record<string, unknown> | null;
  const reference = JSON.parse(theirs) as Record<string, unknown> | null;
  if (sluice === null || reference === null || !('metadata' in sluice)) return false;
  if ('metadata' in reference) return false;
  const { metadata: _dropped, ...rest } = sluice;
  return JSON.stringify(rest) === theirs;
}

/** The reference's window length per unit, seconds (its `UnitToDivider`). */
const UNIT_SECONDS: Readonly<Record<string, number>> = {
  SECOND: 1,
  MINUTE: 60,
  HOUR: 3_600,
  DAY: 86_400,
  WEEK: 604_800,
  MONTH: 2_592_000,
  YEAR: 31_536_000,
};

/**
 * True when the reference keys a counter of unit `a` and one of unit `b` on the same entries
 * identically at one of `timesMs`: its key ends in the window start, `(now / divider) * divider`
 * in whole seconds, with no unit (RULES.unitlessKey).
 */
export function unitlessKeysCollide(a: string, b: string, timesMs: readonly number[]): boolean {
  const da = UNIT_SECONDS[a];
  const db = UNIT_SECONDS[b];
  if (a === b || da === undefined || db === undefined) return false;
  return timesMs.some((ms) => {
    const now = Math.floor(ms / 1000);
    return Math.floor(now / da) * da === Math.floor(now / db) * db;
  });
}
