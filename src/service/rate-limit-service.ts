/**
 * ShouldRateLimit in domain terms: validate the request, take the current config snapshot once,
 * and let the limiter decide. Transports (gRPC now, HTTP /json later) call this.
 */
import type { ConfigSnapshot } from '../config/types.js';
import { SluiceError } from '../errors.js';
import type { Limiter } from '../limiter/limiter.js';
import type { Logger } from '../logging/logger.js';
import type { RateLimitRequest, RateLimitResponse } from '../model.js';

/** Size bounds on a request; anything larger is INVALID_REQUEST. */
export interface RequestBounds {
  /** Most descriptors in one request. */
  readonly maxDescriptors: number;
  /** Most entries in one descriptor. */
  readonly maxEntries: number;
  /** Longest entry key or value, in characters. */
  readonly maxEntryLength: number;
}

/** Options for {@link createRateLimitService}. */
export interface RateLimitServiceOptions {
  /** Decides requests. */
  readonly limiter: Limiter;
  /** Returns the snapshot to use; read once per request so a reload never splits one. */
  readonly config: () => ConfigSnapshot;
  /** Request size bounds. */
  readonly bounds: RequestBounds;
  /** Module logger; requests are logged at debug level only. */
  readonly logger: Logger;
}

/** The rate limit service, independent of any transport. */
export interface RateLimitService {
  /**
   * Decide one request. Rejects with SluiceError INVALID_REQUEST for a malformed or oversized
   * request and STORE_UNAVAILABLE when counting failed; over limit is an answer, not an error.
   */
  shouldRateLimit(request: RateLimitRequest): Promise<RateLimitResponse>;
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

/** Create the service. */
export function createRateLimitService(options: RateLimitServiceOptions): RateLimitService {
  const { limiter, config, bounds, logger } = options;
  return {
    async shouldRateLimit(request) {
      validateRequest(request, bounds);
      const response = await limiter.decide(config(), request);
      if (logger.isLevelEnabled('debug')) {
        logger.debug({ request, response }, 'ShouldRateLimit');
      }
      return response;
    },
  };
}
