/**
 * Hand-built rules for tests that exercise the limiter or keys without parsing YAML.
 */
import type { ConfigSnapshot, LimitMatch } from '../../src/config/types.js';
import type { RateLimitRequest, RateLimitRule, RequestDescriptor } from '../../src/model.js';

/** A plain sliding-window rule (2 per minute, no name, not shadow), with `overrides` applied. */
export function makeRule(overrides: Partial<RateLimitRule> = {}): RateLimitRule {
  const requestsPerUnit = overrides.requestsPerUnit ?? 2;
  const unit = overrides.unit ?? 'minute';
  const windowMs = overrides.windowMs ?? 60_000;
  const algorithm = overrides.algorithm ?? 'sliding_window';
  const name = overrides.name ?? '';
  return {
    requestsPerUnit,
    unit,
    windowMs,
    name,
    limits: [
      {
        requestsPerUnit,
        unit,
        unitMultiplier: 1,
        windowMs,
        algorithm,
        burst: requestsPerUnit,
        name,
      },
    ],
    unlimited: false,
    shadowMode: false,
    replaces: [],
    algorithm: 'sliding_window',
    fullKey: 'test.key',
    detailedMetric: false,
    valueToMetric: false,
    shareThreshold: false,
    quotaMode: false,
    fromOverride: false,
    ...overrides,
  };
}

/**
 * A snapshot of domain `d` whose rule for a descriptor is `rules[its first entry's key]` (the
 * limiter's tests: no matching tree, just the rule each descriptor gets).
 */
export function snapshotOf(rules: Record<string, RateLimitRule>): ConfigSnapshot {
  const matches = new Map<string, LimitMatch>(
    Object.entries(rules).map(([k, r]) => [k, { rule: r, sharedPatterns: undefined }]),
  );
  return {
    files: [],
    warnings: [],
    domains: new Map([['d', { name: 'd', files: [] }]]),
    getLimit: (domain, descriptor) =>
      domain === 'd' ? matches.get(descriptor.entries[0]?.key ?? '') : undefined,
    dump: () => [],
  };
}

/** A descriptor with one entry `key=v`, and `more` fields. */
export const desc = (key: string, more: Partial<RequestDescriptor> = {}): RequestDescriptor => ({
  entries: [{ key, value: 'v' }],
  limit: undefined,
  hitsAddend: undefined,
  ...more,
});

/** A request of domain `d`. */
export const req = (descriptors: RequestDescriptor[], hitsAddend = 0): RateLimitRequest => ({
  domain: 'd',
  descriptors,
  hitsAddend,
});
