/**
 * Which rule of the rate limit config a quota bucket gets (docs/rlqs.md, "Mapping"). A bucket id
 * is an unordered map, so its entries are put in the order the domain's descriptor tree asks for
 * them: at each level, the entries whose key that level knows (exactly, by a wildcard, or as a
 * key-only node), the alphabetically first of them; then the ordered entries are matched exactly
 * as a `ShouldRateLimit` descriptor with those entries would be (`ConfigSnapshot.getLimit`).
 */
import { lookup } from '../config/match.js';
import type { ConfigSnapshot } from '../config/types.js';
import type { RateLimitRule, RequestDescriptor, RuleLimit } from '../model.js';
import type { BucketEntry } from './model.js';

/** What a bucket's rule says about its quota. */
export type BucketRule =
  /** No rule, a whitelisting node, `unlimited` or shadow mode: nothing to enforce. */
  | { readonly kind: 'allow'; readonly reason: 'no_rule' | 'unlimited' | 'shadow_mode' }
  /** A limit to share between the instances. */
  | {
      readonly kind: 'limit';
      /** Requests per window, the global budget. */
      readonly limit: number;
      /** The window, ms. */
      readonly windowMs: number;
      /** The bucket's capacity for a `token_bucket` rule (`burst`); `limit` for a window. */
      readonly burst: number;
      /** The rule counts with `token_bucket` (else a window algorithm). */
      readonly tokenBucket: boolean;
      /** The rule's key (`domain.key_value...`), for logs and the console. */
      readonly ruleKey: string;
    };

const NO_RULE: BucketRule = { kind: 'allow', reason: 'no_rule' };

/** The bucket's entries in the order the domain's tree reads them (see the module comment). */
export function orderBucketEntries(
  snapshot: ConfigSnapshot,
  domain: string,
  entries: readonly BucketEntry[],
): BucketEntry[] {
  const sorted = [...entries].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  let level = snapshot.tree?.(domain);
  if (level === undefined) return sorted;
  const ordered: BucketEntry[] = [];
  const left = sorted;
  while (left.length > 0) {
    let picked = -1;
    if (level !== undefined) {
      for (let i = 0; i < left.length; i++) {
        if (lookup(level, left[i]!.key, left[i]!.value) !== undefined) {
          picked = i;
          break;
        }
      }
    }
    // No entry fits this level: the rest keep their sorted order (the match then fails).
    if (picked < 0) return ordered.concat(left);
    const entry = left.splice(picked, 1)[0]!;
    ordered.push(entry);
    level = lookup(level!, entry.key, entry.value)?.children;
  }
  return ordered;
}

/** The rule a bucket of `domain` with `entries` gets from `snapshot`. */
export function bucketRule(
  snapshot: ConfigSnapshot | undefined,
  domain: string,
  entries: readonly BucketEntry[],
): BucketRule {
  if (snapshot === undefined || entries.length === 0) return NO_RULE;
  const descriptor: RequestDescriptor = {
    entries: orderBucketEntries(snapshot, domain, entries),
    limit: undefined,
    hitsAddend: undefined,
  };
  const match = snapshot.getLimit(domain, descriptor);
  if (match === undefined) return NO_RULE;
  return ruleOf(match.rule);
}

/** The quota a matched rule gives: its tightest limit (the smallest rate) when it has several. */
function ruleOf(rule: RateLimitRule): BucketRule {
  if (rule.unlimited) return { kind: 'allow', reason: 'unlimited' };
  if (rule.shadowMode) return { kind: 'allow', reason: 'shadow_mode' };
  let tightest: RuleLimit | undefined;
  for (const limit of rule.limits) {
    if (
      tightest === undefined ||
      limit.requestsPerUnit * tightest.windowMs < tightest.requestsPerUnit * limit.windowMs
    ) {
      tightest = limit;
    }
  }
  if (tightest === undefined) return NO_RULE;
  const tokenBucket = tightest.algorithm === 'token_bucket';
  return {
    kind: 'limit',
    limit: tightest.requestsPerUnit,
    windowMs: tightest.windowMs,
    burst: tokenBucket ? tightest.burst : tightest.requestsPerUnit,
    tokenBucket,
    ruleKey: rule.fullKey,
  };
}
