/**
 * `sluice/middleware`: rate limit middleware for node:http, Express 5 and Fastify 5 over a
 * remote sluice (or the reference) or the embedded limiter (docs/node.md).
 */
export { rateLimit, withRateLimit } from './http.js';
export type { HttpMiddleware, HttpRateLimitOptions, RejectionInfo } from './http.js';
export { fastifyRateLimit } from './fastify.js';
export type {
  FastifyInstanceLike,
  FastifyRateLimitOptions,
  FastifyRejectionInfo,
  FastifyReplyLike,
  FastifyRequestLike,
  FastifyRouteRateLimit,
} from './fastify.js';
export { genericKey, header, remoteAddress, route } from './descriptors.js';
export type { DescriptorsOption, EntrySource, RequestLike } from './descriptors.js';
export type { RateLimitOptions } from './core.js';
export type {
  CallDescriptor,
  CallEntry,
  CallUnit,
  DescriptorResult,
  FailureMode,
  RateLimitBackend,
  RateLimitCall,
  RateLimitDecision,
  RateLimitFailure,
  ReportedLimit,
} from '../decision.js';
