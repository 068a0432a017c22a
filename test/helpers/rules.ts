/**
 * Hand-built rules for tests that exercise the limiter or keys without parsing YAML.
 */
import type { RateLimitRule } from '../../src/model.js';

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
