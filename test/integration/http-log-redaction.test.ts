/**
 * No secret from REDIS_URL (user:password@) or REDIS_AUTH reaches the logs: first through the
 * logger itself (fields, messages, errors, both formats), then from a running sluice at debug
 * level, with the memory store and with BACKEND_TYPE=redis pointed at a dead address (whose
 * connection errors are where a URL would leak).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logging/logger.js';
import { redactUrl, secretsFromEnv } from '../../src/logging/redact.js';
import {
  ensureBuilt,
  freePort,
  SLUICE_MAIN,
  useProcessGroup,
  waitFor,
} from '../helpers/processes.js';
import { ruleDir } from '../helpers/app.js';

const SECRET_ENV = {
  REDIS_URL: 'redis://admin:hunter2-url-secret@127.0.0.1:1,redis://other:p%40ss-two@127.0.0.1:2',
  REDIS_AUTH: 's3cr3t-auth-value',
  REDIS_SENTINEL_AUTH: 'sentinel-secret-value',
};
const SECRETS = [
  'hunter2-url-secret',
  'p%40ss-two',
  'p@ss-two',
  's3cr3t-auth-value',
  'sentinel-secret-value',
];

function leaks(output: string): string[] {
  return SECRETS.filter((secret) => output.includes(secret));
}

describe('log redaction', () => {
  it('redactUrl keeps the address and drops the credentials', () => {
    expect(redactUrl('redis://admin:pw@h:6379')).toBe('redis://[redacted]@h:6379');
    expect(redactUrl('rediss://:pw@h:1,redis://u:p@h2:2')).toBe(
      'rediss://[redacted]@h:1,redis://[redacted]@h2:2',
    );
    expect(redactUrl('127.0.0.1:6379')).toBe('127.0.0.1:6379');
  });

  for (const format of ['json', 'text'] as const) {
    it(`the ${format} logger never writes a secret, wherever it is put`, () => {
      let output = '';
      const logger = createLogger({
        level: 'trace',
        format,
        secrets: secretsFromEnv(SECRET_ENV),
        destination: { write: (line: string) => void (output += line) },
      });
      logger.info({ redisUrl: SECRET_ENV.REDIS_URL }, 'connecting');
      logger.info({ store: { redisUrl: SECRET_ENV.REDIS_URL, redisAuth: 'x' } }, 'nested');
      logger.info({ settings: { REDIS_AUTH: SECRET_ENV.REDIS_AUTH } }, 'settings');
      logger.warn(`auth failed with ${SECRET_ENV.REDIS_AUTH} on ${SECRET_ENV.REDIS_URL}`);
      logger.error(
        { err: new Error(`connect ECONNREFUSED ${SECRET_ENV.REDIS_URL}`) },
        'redis error',
      );
      logger.debug({ sentinel: SECRET_ENV.REDIS_SENTINEL_AUTH }, 'sentinel');
      expect(output.split('\n').filter(Boolean).length).toBe(6);
      expect(leaks(output)).toEqual([]);
      // The address itself stays readable.
      expect(output).toContain('127.0.0.1:1');
    });
  }
});

describe('a running sluice at debug level', () => {
  const group = useProcessGroup();
  beforeAll(() => ensureBuilt(), 180_000);

  const cases: [string, Record<string, string>][] = [
    ['BACKEND_TYPE=memory', { BACKEND_TYPE: 'memory' }],
    // A valid URL to a dead address: the store's connection errors are logged.
    [
      'BACKEND_TYPE=redis, unreachable',
      { BACKEND_TYPE: 'redis', REDIS_URL: 'redis://admin:hunter2-url-secret@127.0.0.1:1' },
    ],
    // Two addresses for a single Redis: the start fails and the message quotes the setting.
    ['BACKEND_TYPE=redis, refused setting', { BACKEND_TYPE: 'redis' }],
  ];
  for (const [what, env] of cases) {
    it(`logs no secret (${what})`, async () => {
      const dir = await ruleDir({
        'edge.yaml':
          'domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n',
      });
      const httpPort = await freePort();
      const proc = group.spawn(
        'sluice',
        process.execPath,
        [SLUICE_MAIN, 'serve', '--config', dir],
        {
          env: {
            ...process.env,
            ...SECRET_ENV,
            ...env,
            REDIS_TIMEOUT: '200ms',
            LOG_LEVEL: 'debug',
            HOST: '127.0.0.1',
            PORT: String(httpPort),
            GRPC_HOST: '127.0.0.1',
            GRPC_PORT: String(await freePort()),
            DEBUG_PORT: String(await freePort()),
          },
        },
      );
      // Serving (then one call, logged at debug level), or exited (a start failure is logged too).
      await waitFor(
        'sluice serving or exited',
        async () => {
          if (proc.hasExited()) return true;
          try {
            return (await fetch(`http://127.0.0.1:${httpPort}/healthcheck`)).status > 0;
          } catch {
            return false;
          }
        },
        { timeoutMs: 15_000, intervalMs: 100, onTimeout: () => proc.output() },
      );
      if (!proc.hasExited()) {
        await fetch(`http://127.0.0.1:${httpPort}/json`, {
          method: 'POST',
          body: JSON.stringify({
            domain: 'edge',
            descriptors: [{ entries: [{ key: 'k', value: 'v' }] }],
          }),
        }).catch(() => undefined);
      }
      await proc.stop();
      const output = proc.output();
      expect(output.length).toBeGreaterThan(0);
      expect(leaks(output)).toEqual([]);
    });
  }
});
