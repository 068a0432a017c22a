/**
 * Fuzzing the settings parser: random environments (every variable src/settings.ts reads, with
 * random, near-miss and valid values) and command-line flags go through `loadSettings` and
 * `loadCheckSettings`. Each either gives frozen settings, or throws one SluiceError
 * INVALID_SETTINGS that lists every problem on its own line, each naming the variable (or flag)
 * to fix, never a TypeError or a stack trace, and never echoing a Redis password.
 */
import fs from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { loadCheckSettings, loadSettings, type SettingFlags } from '../../src/settings.js';
import { fcParams, timeoutFor } from './budget.js';

/** Every variable name written out in src/settings.ts, plus the prefixed Redis ones. */
const NAMES: readonly string[] = (() => {
  const source = fs.readFileSync(new URL('../../src/settings.ts', import.meta.url), 'utf8');
  const literal = [...source.matchAll(/'([A-Z][A-Z0-9_]{2,})'/g)].map((m) => m[1]!);
  const redis = ['REDIS_', 'REDIS_PERSECOND_'].flatMap((prefix) =>
    ['URL', 'TYPE', 'SOCKET_TYPE', 'TIMEOUT', 'AUTH', 'SENTINEL_AUTH', 'TLS', 'POOL_SIZE'].map(
      (suffix) => prefix + suffix,
    ),
  );
  const tls = ['TLS_CACERT', 'TLS_CLIENT_CERT', 'TLS_CLIENT_KEY', 'TLS_SKIP_HOSTNAME_VERIFICATION'];
  const words = new Set(['TRUE', 'FALSE', 'INVALID_SETTINGS', 'REDIS_', 'REDIS_PERSECOND_']);
  return [
    ...new Set(
      [...literal, ...redis, ...tls.map((t) => `REDIS_${t}`)].filter((n) => !words.has(n)),
    ),
  ].sort();
})();

const FLAGS = ['--grpc-host', '--grpc-port', '--log-level', '--log-format', '--backend-type'];

/** A password that must never appear in an error message. */
const SECRET = 'hunter2pw';

const valueArb = fc.oneof(
  // Valid and near-miss values of the kinds the parser reads.
  fc.constantFrom(
    '0',
    '1',
    '-1',
    '65535',
    '65536',
    '1024',
    '100000',
    '1e3',
    '0x10',
    ' 7 ',
    '7.5',
    '9007199254740993',
    'true',
    'True',
    'yes',
    'false',
    'memory',
    'redis',
    'REDIS',
    'lean',
    'grpc-js',
    'json',
    'text',
    'debug',
    'warning',
    'single',
    'cluster',
    'sentinel',
    'tcp',
    'unix',
    '10s',
    '1m30s',
    '1.5h',
    '-5s',
    '0',
    'ms',
    '0.8',
    '1.01',
    'NaN',
    'Infinity',
    'sliding_window',
    'token_bucket',
    'reference',
    'ietf',
    'allow',
    '127.0.0.1:6379',
    '[::1]:6379',
    'localhost',
    'mymaster,127.0.0.1:26379',
    '/tmp/redis.sock',
    'h1:1,h2:2',
    ':6379',
    '127.0.0.1:99999',
    `redis://user:${SECRET}@127.0.0.1:6379`,
    `user:${SECRET}@127.0.0.1:6379`,
    `${SECRET}@[::1]:bad`,
    `rediss://:${SECRET}@h:1,h:2`,
    '/nonexistent/cert.pem',
  ),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'grapheme', maxLength: 6 }),
  fc.integer().map(String),
  fc.double().map(String),
  fc.constant('x'.repeat(10_000)),
  fc.constant(''),
);

/** An environment: some known variables, sometimes an unknown one. */
const envArb = fc
  .tuple(
    fc.dictionary(fc.constantFrom(...NAMES), valueArb, { maxKeys: 10 }),
    fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string({ maxLength: 8 }), {
      maxKeys: 2,
    }),
  )
  .map(([known, unknown]): Record<string, string> => ({ ...unknown, ...known }));

const flagsArb: fc.Arbitrary<SettingFlags> = fc.record(
  {
    config: fc.array(fc.string({ maxLength: 10 }), { maxLength: 2 }),
    grpcHost: valueArb,
    grpcPort: valueArb,
    logLevel: valueArb,
    logFormat: valueArb,
    backendType: valueArb,
    shadowMode: fc.boolean(),
  },
  { requiredKeys: [] },
);

const CRASH =
  /TypeError|ReferenceError|RangeError|Cannot read prop|is not a function|undefined is not|\n\s+at /;

/** Throws unless `run` returns, or throws a clear INVALID_SETTINGS error. */
function checkSettingsOutcome(
  run: () => object,
  env: Record<string, string>,
  frozen: boolean,
  flags: SettingFlags = {},
): void {
  let settings: object;
  try {
    settings = run();
  } catch (error) {
    if (!(error instanceof SluiceError)) {
      throw new Error(`not a SluiceError: ${String(error)}`, { cause: error });
    }
    expect(error.code).toBe('INVALID_SETTINGS');
    const [title, ...problems] = error.message.split('\n');
    expect(title).toBe('invalid settings:');
    expect(problems.length).toBeGreaterThan(0);
    for (const problem of problems) {
      expect(problem).toMatch(/^ {2}- \S/);
      const named = [...NAMES, ...FLAGS].some((name) => problem.includes(name));
      expect(named, `a problem that names no variable: ${problem}`).toBe(true);
      expect(problem).not.toMatch(CRASH);
    }
    const secretElsewhere = Object.entries(env).some(
      ([name, value]) =>
        value.includes(SECRET) && !/^REDIS_(PERSECOND_)?(URL|AUTH|SENTINEL_AUTH)$/.test(name),
    );
    // A password typed into another variable or a flag is echoed as that value; only the
    // Redis URL and auth variables must hide it.
    if (!secretElsewhere && !JSON.stringify(flags).includes(SECRET)) {
      expect(error.message).not.toContain(SECRET);
    }
    return;
  }
  if (frozen) expect(Object.isFrozen(settings)).toBe(true);
}

describe('fuzzing the settings parser', () => {
  it('reads every variable the parser knows', () => {
    // The extraction from the source found the variables (a guard for the fuzzing below).
    expect(NAMES).toEqual(
      expect.arrayContaining(['GRPC_PORT', 'MEMORY_MAX_KEYS', 'REDIS_URL', 'REDIS_PERSECOND_URL']),
    );
  });

  it('a REDIS_URL with credentials but no scheme is refused without quoting the password', () => {
    // Found by this fuzzing: `user:password@host:port` (redis:// left out) was quoted verbatim.
    for (const url of [`user:${SECRET}@127.0.0.1:6379`, `127.0.0.1:1, :${SECRET}@h:2`]) {
      const env = { BACKEND_TYPE: 'redis', REDIS_TYPE: 'cluster', REDIS_URL: url };
      expect(() => loadSettings(env)).toThrow(/REDIS_URL="[^"]*\[redacted\]@/);
      expect(() => loadSettings(env)).not.toThrow(SECRET);
    }
  });

  it('a 50,000-character REDIS_URL is refused and redacted in bounded work', () => {
    // Found by this fuzzing: the redaction's scheme pattern was unbounded, so a long value
    // without `://` took time quadratic in its length (0.9 s at 10,000 characters, 50 s
    // here, past this test's timeout; now milliseconds).
    for (const url of ['x'.repeat(50_000), `u:${SECRET}@${'h'.repeat(50_000)}`]) {
      const env = { BACKEND_TYPE: 'redis', REDIS_TYPE: 'cluster', REDIS_URL: url };
      expect(() => loadSettings(env)).toThrow(/REDIS_URL=/);
      expect(() => loadSettings(env)).not.toThrow(SECRET);
    }
  }, 10_000);

  it(
    'random environments and flags give settings or a clear INVALID_SETTINGS error',
    () => {
      fc.assert(
        fc.property(envArb, flagsArb, (env, flags) => {
          checkSettingsOutcome(() => loadSettings(env, flags), env, true, flags);
          checkSettingsOutcome(() => loadCheckSettings(env), env, false);
        }),
        fcParams(500),
      );
    },
    timeoutFor(10_000),
  );

  it(
    'random Redis environments (BACKEND_TYPE=redis) likewise',
    () => {
      fc.assert(
        fc.property(envArb, (env) => {
          const redisEnv = { ...env, BACKEND_TYPE: 'redis' };
          checkSettingsOutcome(() => loadSettings(redisEnv), redisEnv, true);
        }),
        fcParams(300),
      );
    },
    timeoutFor(10_000),
  );
});
