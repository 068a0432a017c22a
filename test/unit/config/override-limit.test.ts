/**
 * Envoy's per-route `limit` override (src/config/match.ts `overrideLimit`, docs/semantics.md §1):
 * the override's numbers under the default algorithm, keyed like the reference's
 * `descriptorKey`; no override, or one with an unknown unit, is no override.
 */
import { describe, expect, it } from 'vitest';
import { descriptorKey, overrideLimit } from '../../../src/config/match.js';
import type { RequestDescriptor } from '../../../src/model.js';

function descriptor(limit: RequestDescriptor['limit']): RequestDescriptor {
  return {
    entries: [
      { key: 'user', value: 'a' },
      { key: 'path', value: '' },
    ],
    limit,
    hitsAddend: undefined,
  };
}

describe('overrideLimit', () => {
  it('is undefined without an override, or with an override whose unit is unknown', () => {
    expect(overrideLimit('edge', descriptor(undefined))).toBeUndefined();
    expect(
      overrideLimit('edge', descriptor({ requestsPerUnit: 5, unit: undefined })),
    ).toBeUndefined();
  });

  it('builds a sliding_window rule by default, with the override numbers and the reference key', () => {
    const match = overrideLimit('edge', descriptor({ requestsPerUnit: 7, unit: 'minute' }));
    expect(match?.sharedPatterns).toBeUndefined();
    expect(match?.rule).toMatchObject({
      requestsPerUnit: 7,
      unit: 'minute',
      windowMs: 60_000,
      algorithm: 'sliding_window',
      fullKey: 'edge.user_a.path',
      shadowMode: false,
      fromOverride: true,
      name: '',
    });
    expect(match?.rule.limits).toEqual([
      {
        requestsPerUnit: 7,
        unit: 'minute',
        unitMultiplier: 1,
        windowMs: 60_000,
        algorithm: 'sliding_window',
        burst: 7,
        name: '',
      },
    ]);
  });

  it('uses the algorithm it is given', () => {
    const match = overrideLimit(
      'edge',
      descriptor({ requestsPerUnit: 2, unit: 'hour' }),
      'fixed_window',
    );
    expect(match?.rule.algorithm).toBe('fixed_window');
    expect(match?.rule.limits[0]).toMatchObject({ algorithm: 'fixed_window', windowMs: 3_600_000 });
  });

  it('descriptorKey joins key_value, or the key alone when the value is empty', () => {
    expect(descriptorKey('d', descriptor(undefined))).toBe('d.user_a.path');
    expect(descriptorKey('d', { entries: [], limit: undefined, hitsAddend: undefined })).toBe('d.');
  });
});
