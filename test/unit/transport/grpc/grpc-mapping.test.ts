import { describe, expect, it } from 'vitest';
import {
  durationToWire,
  requestFromWire,
  responseToWire,
  unitFromWire,
} from '../../../../src/transport/grpc/mapping.js';
import { parseDescriptor } from '../../../../src/cli/query.js';

describe('wire mapping', () => {
  it('applies proto3 zero values to absent fields', () => {
    expect(requestFromWire({})).toEqual({ domain: '', descriptors: [], hitsAddend: 0 });
    expect(requestFromWire({ domain: 'd', descriptors: [{}] })).toEqual({
      domain: 'd',
      descriptors: [{ entries: [], limit: undefined, hitsAddend: undefined }],
      hitsAddend: 0,
    });
  });

  it('keeps a present per-descriptor hits_addend, even 0, and maps overrides', () => {
    const r = requestFromWire({
      domain: 'd',
      hits_addend: 3,
      descriptors: [
        {
          entries: [{ key: 'k', value: 'v' }],
          hits_addend: { value: 0 },
          limit: { requests_per_unit: 5, unit: 'WEEK' },
        },
        { entries: [{ key: 'k' }], hits_addend: {}, limit: { unit: 99 } },
      ],
    });
    expect(r.hitsAddend).toBe(3);
    expect(r.descriptors[0]).toEqual({
      entries: [{ key: 'k', value: 'v' }],
      hitsAddend: 0,
      limit: { requestsPerUnit: 5, unit: 'week' },
    });
    expect(r.descriptors[1]).toEqual({
      entries: [{ key: 'k', value: '' }],
      hitsAddend: 0,
      limit: { requestsPerUnit: 0, unit: undefined },
    });
  });

  it('knows every unit by name and number, WEEK=7 included', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(unitFromWire)).toEqual([
      'second',
      'minute',
      'hour',
      'day',
      'month',
      'year',
      'week',
    ]);
    expect(unitFromWire('UNKNOWN')).toBeUndefined();
    expect(unitFromWire(0)).toBeUndefined();
  });

  it('keeps millisecond precision in durations', () => {
    expect(durationToWire(1234)).toEqual({ seconds: 1, nanos: 234_000_000 });
    expect(durationToWire(0)).toEqual({ seconds: 0, nanos: 0 });
  });

  it('omits current_limit and duration when no rule applied', () => {
    const wire = responseToWire({
      overallCode: 'OK',
      statuses: [
        {
          code: 'OK',
          currentLimit: undefined,
          limitRemaining: 0,
          durationUntilResetMs: undefined,
          rule: undefined,
          hits: 0,
          overLimit: false,
        },
      ],
      responseHeadersToAdd: [],
    });
    expect(wire.statuses[0]).toEqual({ code: 'OK', limit_remaining: 0 });
  });
});

describe('sluice query --descriptor parsing', () => {
  it('splits entries on commas and keys on the first =, with backslash escapes', () => {
    expect(parseDescriptor('path=/login,remote_address=10.0.0.1')).toEqual([
      ['path', '/login'],
      ['remote_address', '10.0.0.1'],
    ]);
    expect(parseDescriptor('q=a=b')).toEqual([['q', 'a=b']]);
    expect(parseDescriptor('q=a\\,b')).toEqual([['q', 'a,b']]);
    expect(() => parseDescriptor('novalue')).toThrow(/each entry must be key=value/);
  });
});
