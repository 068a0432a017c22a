/**
 * The request bounds (`MAX_DESCRIPTORS_PER_REQUEST`, `MAX_ENTRIES_PER_DESCRIPTOR`,
 * `MAX_ENTRY_LENGTH`, docs/configuration.md) as `validateRequest` enforces them: a request exactly
 * at a bound passes, one past it is INVALID_REQUEST with a message that names the setting; an
 * empty domain or descriptor list is refused with the reference's messages.
 */
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../../src/errors.js';
import type { RateLimitRequest, RequestDescriptor } from '../../../src/model.js';
import {
  EMPTY_DESCRIPTORS_MESSAGE,
  EMPTY_DOMAIN_MESSAGE,
  validateRequest,
  type RequestBounds,
} from '../../../src/service/validate-request.js';

const BOUNDS: RequestBounds = { maxDescriptors: 3, maxEntries: 2, maxEntryLength: 5 };

function descriptor(...entries: [string, string][]): RequestDescriptor {
  return {
    entries: entries.map(([key, value]) => ({ key, value })),
    limit: undefined,
    hitsAddend: undefined,
  };
}

function request(...descriptors: RequestDescriptor[]): RateLimitRequest {
  return { domain: 'edge', descriptors, hitsAddend: 0 };
}

/** The error `validateRequest` throws for `r`, or `undefined` when it accepts it. */
function problem(r: RateLimitRequest, bounds = BOUNDS): SluiceError | undefined {
  try {
    validateRequest(r, bounds);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(SluiceError);
    expect((error as SluiceError).code).toBe('INVALID_REQUEST');
    return error as SluiceError;
  }
}

const one = descriptor(['k', 'v']);

describe('validateRequest', () => {
  it('refuses an empty domain and an empty descriptor list with the reference messages', () => {
    expect(problem({ domain: '', descriptors: [one], hitsAddend: 0 })?.message).toBe(
      EMPTY_DOMAIN_MESSAGE,
    );
    expect(EMPTY_DOMAIN_MESSAGE).toBe('rate limit domain must not be empty');
    expect(problem(request())?.message).toBe(EMPTY_DESCRIPTORS_MESSAGE);
    expect(EMPTY_DESCRIPTORS_MESSAGE).toBe('rate limit descriptor list must not be empty');
    // The domain is checked first.
    expect(problem({ domain: '', descriptors: [], hitsAddend: 0 })?.message).toBe(
      EMPTY_DOMAIN_MESSAGE,
    );
  });

  it('accepts exactly MAX_DESCRIPTORS_PER_REQUEST descriptors and refuses one more', () => {
    expect(problem(request(one, one, one))).toBeUndefined();
    expect(problem(request(one, one, one, one))?.message).toBe(
      'request has 4 descriptors; at most 3 are allowed (MAX_DESCRIPTORS_PER_REQUEST)',
    );
  });

  it('accepts exactly MAX_ENTRIES_PER_DESCRIPTOR entries and refuses one more, naming the descriptor', () => {
    const two = descriptor(['a', '1'], ['b', '2']);
    const three = descriptor(['a', '1'], ['b', '2'], ['c', '3']);
    expect(problem(request(two, two, two))).toBeUndefined();
    expect(problem(request(one, three))?.message).toBe(
      'descriptor 1 has 3 entries; at most 2 are allowed (MAX_ENTRIES_PER_DESCRIPTOR)',
    );
    // A descriptor with no entries is within the bounds (the limiter answers it).
    expect(problem(request(descriptor()))).toBeUndefined();
  });

  it('accepts keys and values of exactly MAX_ENTRY_LENGTH and refuses one character more', () => {
    expect(problem(request(descriptor(['kkkkk', 'vvvvv'])))).toBeUndefined();
    expect(problem(request(one, descriptor(['a', '1'], ['kkkkkk', 'v'])))?.message).toBe(
      'descriptor 1 entry 1: key or value is longer than 5 characters (MAX_ENTRY_LENGTH)',
    );
    expect(problem(request(descriptor(['k', 'vvvvvv'])))?.message).toBe(
      'descriptor 0 entry 0: key or value is longer than 5 characters (MAX_ENTRY_LENGTH)',
    );
  });

  it('checks every descriptor and every entry, not just the first', () => {
    const long = 'x'.repeat(6);
    expect(problem(request(one, one, descriptor(['a', '1'], ['b', long])))?.message).toMatch(
      /^descriptor 2 entry 1: /,
    );
    expect(problem(request(one, one, descriptor(['a', '1'], ['b', '2'], ['c', '3'])))).toEqual(
      expect.objectContaining({ message: expect.stringMatching(/^descriptor 2 has 3 entries/) }),
    );
  });

  it('counts characters, so a bound of 1 admits one character and refuses two', () => {
    const tight: RequestBounds = { maxDescriptors: 1, maxEntries: 1, maxEntryLength: 1 };
    expect(problem(request(descriptor(['k', 'v'])), tight)).toBeUndefined();
    expect(problem(request(descriptor(['k', '']), descriptor(['k', ''])), tight)?.message).toMatch(
      /^request has 2 descriptors/,
    );
    expect(problem(request(descriptor(['k', 'vv'])), tight)?.message).toMatch(/longer than 1/);
  });
});
