/**
 * The differential tier's rule for the reference's unit-less counter keys (test/differential/
 * deliberate.ts, RULES.unitlessKey): when two units' window starts coincide in the reference.
 */
import { describe, expect, it } from 'vitest';
import { unitlessKeysCollide } from '../../differential/deliberate.js';

const at = (iso: string): number => Date.parse(iso);

describe('unitlessKeysCollide', () => {
  it('HOUR and DAY share a key through the first hour of a UTC day, and only then', () => {
    expect(unitlessKeysCollide('HOUR', 'DAY', [at('2026-11-25T00:00:00Z')])).toBe(true);
    expect(unitlessKeysCollide('DAY', 'HOUR', [at('2026-11-25T00:59:59.999Z')])).toBe(true);
    expect(unitlessKeysCollide('HOUR', 'DAY', [at('2026-11-25T01:00:00Z')])).toBe(false);
    expect(unitlessKeysCollide('HOUR', 'DAY', [at('2026-11-24T23:59:59Z')])).toBe(false);
  });

  it('SECOND and MINUTE in the first second of a minute; either of the times counts', () => {
    const first = at('2026-11-25T10:07:00.400Z');
    const later = at('2026-11-25T10:07:01.000Z');
    expect(unitlessKeysCollide('SECOND', 'MINUTE', [first])).toBe(true);
    expect(unitlessKeysCollide('SECOND', 'MINUTE', [later])).toBe(false);
    expect(unitlessKeysCollide('SECOND', 'MINUTE', [later, first])).toBe(true);
  });

  it('one unit never collides with itself, nor with a unit the reference does not know', () => {
    expect(unitlessKeysCollide('DAY', 'DAY', [at('2026-11-25T00:00:00Z')])).toBe(false);
    expect(unitlessKeysCollide('DAY', 'FORTNIGHT', [at('2026-11-25T00:00:00Z')])).toBe(false);
  });

  it('DAY and MONTH (30 days from the epoch) meet only on a 30-day boundary', () => {
    // 2026-11-25 is day 20782 since the epoch (20782 mod 30 = 22); day 20790 = 693 x 30 starts one.
    expect(unitlessKeysCollide('DAY', 'MONTH', [at('2026-11-25T12:00:00Z')])).toBe(false);
    expect(unitlessKeysCollide('DAY', 'MONTH', [20790 * 86_400_000 + 5_000])).toBe(true);
  });
});
