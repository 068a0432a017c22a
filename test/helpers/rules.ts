/**
 * Hand-built rules for tests that exercise the limiter or keys without parsing YAML.
 */
import type { RateLimitRule } from '../../src/config/types.js';

/** A plain sliding-window rule (2 per minute, no name, not shadow), with `overrides` applied. */
export function makeRule(overrides: Partial<RateLimitRule> = {}): RateLimitRule {
  return {
    requestsPerUnit: 2,
    unit: 'minute',
    windowMs: 60_000,
    name: '',
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
