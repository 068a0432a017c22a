/**
 * `sluice/embedded` (src/node/embedded.ts): the server's limiter in process, from the same rule
 * files, reloaded on change as the server does (a bad reload keeps the rules serving), refusing
 * invalid rules and settings with every problem named, and counting in a real Redis shared by
 * two app instances, with the failure policy when that Redis is gone.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { createEmbeddedLimiter, type EmbeddedLimiter } from '../../src/node/embedded.js';
import type { RateLimitCall } from '../../src/node/decision.js';
import { silentLogger } from '../../src/logging/logger.js';
import { capturingLogger, ruleDir } from '../helpers/app.js';
import { useProcessGroup, waitFor } from '../helpers/processes.js';
import { requireRedis, startRedis } from '../helpers/redis.js';

const rules = (perMinute: number): string => `
domain: embedded
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: ${perMinute}}
`;

const call = (user: string, hitsAddend?: number): RateLimitCall => ({
  domain: 'embedded',
  descriptors: [{ entries: [{ key: 'user', value: user }], hitsAddend }],
});

/** The limit the rules serving now give `user`, looked up without charging (hits_addend 0). */
async function limitOf(limiter: EmbeddedLimiter): Promise<number | undefined> {
  const answer = await limiter.shouldRateLimit(call('probe', 0));
  return answer.statuses[0]?.limit?.requestsPerUnit;
}

describe('sluice/embedded', () => {
  it('reloads changed rules, and keeps serving the old ones when a change is invalid', async () => {
    const dir = await ruleDir({ 'embedded.yaml': rules(5) });
    const { logger, lines } = capturingLogger();
    const limiter = await createEmbeddedLimiter({ rules: dir, logger });
    try {
      expect(limiter.domains()).toEqual(['embedded']);
      expect(await limitOf(limiter)).toBe(5);
      await fs.writeFile(path.join(dir, 'embedded.yaml'), rules(2));
      await waitFor('the new rules', async () => (await limitOf(limiter)) === 2, {
        timeoutMs: 15_000,
      });
      await fs.writeFile(path.join(dir, 'embedded.yaml'), 'domain: embedded\ndescriptors: [');
      await waitFor('the refused reload', () => limiter.loads().refused === 1, {
        timeoutMs: 15_000,
      });
      expect(await limitOf(limiter)).toBe(2);
      const user = randomUUID();
      const codes: (string | undefined)[] = [];
      for (let i = 0; i < 3; i++)
        codes.push((await limiter.shouldRateLimit(call(user))).overallCode);
      expect(codes).toEqual(['OK', 'OK', 'OVER_LIMIT']);
      expect(lines.some((l) => String(l['msg']).includes('reload failed'))).toBe(true);
    } finally {
      await limiter.close();
    }
  });

  it('refuses invalid rules with every problem named, and invalid settings', async () => {
    const dir = await ruleDir({
      'a.yaml':
        'domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n',
      'b.yaml':
        'domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n',
    });
    const refused = await createEmbeddedLimiter({ rules: dir, watch: false }).catch(
      (e: unknown) => e,
    );
    expect(SluiceError.is(refused, 'INVALID_CONFIG')).toBe(true);
    expect(String((refused as Error).message)).toMatch(/a\.yaml[\s\S]*b\.yaml/);
    const badSetting = await createEmbeddedLimiter({
      rules: dir,
      settings: { BACKEND_TYPE: 'etcd' },
    }).catch((e: unknown) => e);
    expect(SluiceError.is(badSetting, 'INVALID_SETTINGS')).toBe(true);
    expect(String((badSetting as Error).message)).toContain('BACKEND_TYPE');
    await expect(createEmbeddedLimiter({ rules: [] })).rejects.toThrow(/at least one rule/);
  });

  it('answers a call that is not one by the failure policy', async () => {
    const limiter = await createEmbeddedLimiter({
      rules: await ruleDir({ 'embedded.yaml': rules(5) }),
      watch: false,
      failureMode: 'closed',
    });
    try {
      const empty = await limiter.shouldRateLimit({ domain: '', descriptors: [] });
      expect(empty).toMatchObject({ allowed: false, failure: { code: 'INVALID_REQUEST' } });
      expect(empty.failure?.reason).toMatch(/^the embedded sluice limiter: .*failing closed$/);
      const junk = await limiter.shouldRateLimit(null as unknown as RateLimitCall);
      expect(junk.failure?.code).toBe('INVALID_REQUEST');
      const badUnit = await limiter.shouldRateLimit({
        domain: 'embedded',
        descriptors: [
          {
            entries: [{ key: 'user', value: 'u' }],
            limit: { requestsPerUnit: 1, unit: 'minutes' as 'minute' },
          },
        ],
      });
      expect(badUnit.failure?.code).toBe('INVALID_REQUEST');
      expect(badUnit.failure?.reason).toContain('limit.unit minutes is not a unit');
    } finally {
      await limiter.close();
    }
  });
});

const redisRequirement = requireRedis('node-embedded redis');

describe.skipIf(redisRequirement.skip)('sluice/embedded on Redis', () => {
  const group = useProcessGroup();

  it('two app instances share one limit, and fail by the policy when Redis is gone', async () => {
    const redis = await startRedis(group);
    const logger = silentLogger();
    const dir = await ruleDir({ 'embedded.yaml': rules(5) });
    const settings = {
      BACKEND_TYPE: 'redis',
      REDIS_URL: redis.address,
      REDIS_TIMEOUT: '500ms',
      CACHE_KEY_PREFIX: `${randomUUID()}:`,
    };
    const a = await createEmbeddedLimiter({ rules: dir, settings, watch: false, logger });
    const b = await createEmbeddedLimiter({
      rules: dir,
      settings,
      watch: false,
      failureMode: 'closed',
      logger,
    });
    try {
      const user = randomUUID();
      const codes: (string | undefined)[] = [];
      for (let i = 0; i < 3; i++) {
        codes.push((await a.shouldRateLimit(call(user))).overallCode);
        codes.push((await b.shouldRateLimit(call(user))).overallCode);
      }
      expect(codes).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
      await redis.stop();
      const open = await a.shouldRateLimit(call(user));
      const closed = await b.shouldRateLimit(call(user));
      expect(open.allowed).toBe(true);
      expect(closed.allowed).toBe(false);
      expect(open.failure?.code).toMatch(/^STORE_/);
      expect(closed.failure?.reason).toMatch(/failing closed$/);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
