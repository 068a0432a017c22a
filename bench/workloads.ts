/**
 * The rules and requests every benchmark uses: one domain, `bench`, whose limits are high enough
 * that every request is admitted (so the admitted path is measured), plus one tight rule for the
 * rejected path.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { RateLimitRequest, RequestDescriptor } from '../src/model.js';

/** The benchmark domain. */
export const DOMAIN = 'bench';

/** Large enough never to be reached in a benchmark (the YAML maximum is 2^32 - 1). */
const HUGE = 4_000_000_000;

/** The rule file (reference format, no sluice-only keys). */
export const RULES_YAML = `domain: ${DOMAIN}
descriptors:
  - key: generic_key
    value: hot
    rate_limit: { unit: second, requests_per_unit: ${HUGE} }
  - key: generic_key
    value: tight
    rate_limit: { unit: hour, requests_per_unit: 1 }
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }
  - key: api_key
    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: { unit: hour, requests_per_unit: ${HUGE} }
  - key: user
    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }
  - key: tenant
    rate_limit: { unit: hour, requests_per_unit: ${HUGE} }
  - key: route
    rate_limit: { unit: second, requests_per_unit: ${HUGE} }
  - key: method
    rate_limit: { unit: minute, requests_per_unit: ${HUGE} }
`;

/** Write {@link RULES_YAML} into a fresh temp directory; returns the directory. */
export async function writeRules(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-bench-'));
  await fs.writeFile(path.join(dir, 'bench.yaml'), RULES_YAML);
  return dir;
}

/** A distinct IPv4 address per `i` (10.0.0.0/8). */
export function ipFor(i: number): string {
  return `10.${(i >>> 16) & 255}.${(i >>> 8) & 255}.${i & 255}`;
}

function descriptor(entries: [string, string][]): RequestDescriptor {
  return {
    entries: entries.map(([key, value]) => ({ key, value })),
    limit: undefined,
    hitsAddend: undefined,
  };
}

function request(descriptors: RequestDescriptor[]): RateLimitRequest {
  return { domain: DOMAIN, descriptors, hitsAddend: 0 };
}

/** One descriptor on one key that is always admitted. */
export function hotRequest(): RateLimitRequest {
  return request([descriptor([['generic_key', 'hot']])]);
}

/** One descriptor on one key that is over its limit after the first request. */
export function tightRequest(): RateLimitRequest {
  return request([descriptor([['generic_key', 'tight']])]);
}

/** One descriptor, `remote_address` = {@link ipFor}(i). */
export function ipRequest(i: number): RateLimitRequest {
  return request([descriptor([['remote_address', ipFor(i)]])]);
}

/**
 * Four descriptors as Envoy sends for a typical route: a shared key, the client address, a
 * nested (path, address) pair and an API key; all four matched and counted.
 */
export function fourRequest(i: number): RateLimitRequest {
  const ip = ipFor(i);
  return request([
    descriptor([['generic_key', 'hot']]),
    descriptor([['remote_address', ip]]),
    descriptor([
      ['path', '/login'],
      ['remote_address', ip],
    ]),
    descriptor([['api_key', `key-${i}`]]),
  ]);
}

/**
 * Eight descriptors: {@link fourRequest}'s four plus a user, a tenant, a route and a method, as a
 * gateway that limits on every attribute it knows sends; all eight matched and counted.
 */
export function eightRequest(i: number): RateLimitRequest {
  const four = fourRequest(i);
  return request([
    ...four.descriptors,
    descriptor([['user', `user-${i}`]]),
    descriptor([['tenant', `tenant-${i % 16}`]]),
    descriptor([['route', '/api/orders']]),
    descriptor([['method', 'POST']]),
  ]);
}

/** A request in the wire shape proto-loader encodes (snake_case, as the transport decodes it). */
export function toWire(req: RateLimitRequest): unknown {
  return {
    domain: req.domain,
    descriptors: req.descriptors.map((d) => ({
      entries: d.entries.map((e) => ({ key: e.key, value: e.value })),
    })),
  };
}
