/**
 * The request checks ShouldRateLimit makes before counting anything: a domain, at least one
 * descriptor, and the size bounds (`MAX_DESCRIPTORS_PER_REQUEST`, `MAX_ENTRIES_PER_DESCRIPTOR`,
 * `MAX_ENTRY_LENGTH`). Its own module so the mutation tier (stryker.config.json) can cover it by
 * file.
 */
import { SluiceError } from '../errors.js';
import type { RateLimitRequest } from '../model.js';

/** Size bounds on a request; anything larger is INVALID_REQUEST. */
export interface RequestBounds {
  /** Most descriptors in one request. */
  readonly maxDescriptors: number;
  /** Most entries in one descriptor. */
  readonly maxEntries: number;
  /** Longest entry key or value, in characters. */
  readonly maxEntryLength: number;
}

/** The reference's message for a request without a domain. */
export const EMPTY_DOMAIN_MESSAGE = 'rate limit domain must not be empty';
/** The reference's message for a request without descriptors. */
export const EMPTY_DESCRIPTORS_MESSAGE = 'rate limit descriptor list must not be empty';

/** Throws SluiceError INVALID_REQUEST naming the first problem of `request`, if any. */
export function validateRequest(request: RateLimitRequest, bounds: RequestBounds): void {
  if (request.domain === '') throw invalid(EMPTY_DOMAIN_MESSAGE);
  const { descriptors } = request;
  if (descriptors.length === 0) throw invalid(EMPTY_DESCRIPTORS_MESSAGE);
  if (descriptors.length > bounds.maxDescriptors) {
    throw invalid(
      `request has ${descriptors.length} descriptors; at most ${bounds.maxDescriptors} are allowed (MAX_DESCRIPTORS_PER_REQUEST)`,
    );
  }
  for (let i = 0; i < descriptors.length; i++) {
    const entries = descriptors[i]!.entries;
    if (entries.length > bounds.maxEntries) {
      throw invalid(
        `descriptor ${i} has ${entries.length} entries; at most ${bounds.maxEntries} are allowed (MAX_ENTRIES_PER_DESCRIPTOR)`,
      );
    }
    for (let j = 0; j < entries.length; j++) {
      const { key, value } = entries[j]!;
      if (key.length > bounds.maxEntryLength || value.length > bounds.maxEntryLength) {
        throw invalid(
          `descriptor ${i} entry ${j}: key or value is longer than ${bounds.maxEntryLength} characters (MAX_ENTRY_LENGTH)`,
        );
      }
    }
  }
}

function invalid(message: string): SluiceError {
  return new SluiceError('INVALID_REQUEST', message);
}
