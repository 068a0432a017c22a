/**
 * The Redis store's settings (`REDIS_*`, `REDIS_PERSECOND_*`, `CACHE_KEY_PREFIX`,
 * `LOCAL_CACHE_SIZE_IN_BYTES`), with the reference's names and defaults: read by `loadSettings`
 * (settings.ts), which reports every problem at once. Credentials never reach a message.
 */
import { redactUrl } from './logging/redact.js';
import { goDurationMs, type Reader } from './settings-reader.js';
import type { RedisStoreOptions } from './stores/index.js';
import { parseAddress } from './stores/redis/address.js';
import type { RedisConnectionOptions } from './stores/redis/connect.js';

/**
 * The Redis store's settings (`REDIS_*`, `REDIS_PERSECOND_*`, `CACHE_KEY_PREFIX`, ...). Every one
 * that is set is checked; `required` (the Redis store is chosen) also asks for the URLs it needs.
 */
export function redisSettings(r: Reader, required: boolean): RedisStoreOptions {
  const main = redisConnection(r, 'REDIS_', 'REDIS_', required);
  const perSecondOn = r.bool('REDIS_PERSECOND', false);
  const perSecond = redisConnection(r, 'REDIS_PERSECOND_', 'REDIS_', required && perSecondOn);
  return {
    main,
    perSecond: perSecondOn ? perSecond : undefined,
    keyPrefix: r.raw('CACHE_KEY_PREFIX') ?? '',
    localCacheBytes: r.int('LOCAL_CACHE_SIZE_IN_BYTES', 0, 0, 1 << 30),
    waitAtStart: r.bool('REDIS_WAIT_AT_START', false),
    ...cachedModeSettings(r, required),
  };
}

/** Shortest `REDIS_SYNC_INTERVAL`: below it the flushes cost Redis more than they save. */
const MIN_SYNC_INTERVAL_MS = 10;

/** Longest `REDIS_SYNC_INTERVAL`: past a minute the global view is too old to limit anything. */
const MAX_SYNC_INTERVAL_MS = 60_000;

/**
 * `REDIS_MODE` (`exact` | `cached`) and `REDIS_SYNC_INTERVAL` (docs/cached-mode.md), checked
 * whatever the backend; `cached` needs the Redis store (`redisChosen`).
 */
function cachedModeSettings(
  r: Reader,
  redisChosen: boolean,
): Pick<RedisStoreOptions, 'mode' | 'syncIntervalMs'> {
  const modeText = r.string('REDIS_MODE', 'exact').toLowerCase();
  if (modeText !== 'exact' && modeText !== 'cached') {
    r.problems.push(`REDIS_MODE=${JSON.stringify(modeText)}: expected exact or cached`);
  }
  const mode = modeText === 'cached' ? 'cached' : 'exact';
  if (mode === 'cached' && !redisChosen) {
    r.problems.push(
      'REDIS_MODE=cached: needs BACKEND_TYPE=redis (cached mode syncs local counters with Redis); ' +
        'set BACKEND_TYPE=redis and REDIS_URL, or remove REDIS_MODE',
    );
  }
  const text = r.raw('REDIS_SYNC_INTERVAL') ?? '100ms';
  let syncIntervalMs = goDurationMs(text);
  if (
    syncIntervalMs === undefined ||
    syncIntervalMs < MIN_SYNC_INTERVAL_MS ||
    syncIntervalMs > MAX_SYNC_INTERVAL_MS
  ) {
    r.problems.push(
      `REDIS_SYNC_INTERVAL=${JSON.stringify(text)}: expected a duration from 10ms to 1m such as ` +
        '100ms or 1s (shorter flushes cost Redis more than they save; longer ones let replicas ' +
        'over-admit for longer)',
    );
    syncIntervalMs = 100;
  }
  return { mode, syncIntervalMs: Math.floor(syncIntervalMs) };
}

/**
 * One Redis connection from the variables starting with `prefix` (`REDIS_` or `REDIS_PERSECOND_`);
 * the TLS files are shared and read with `tlsPrefix` (`REDIS_`), as in the reference. `required`:
 * the connection will be made, so its URL must be set.
 */
function redisConnection(
  r: Reader,
  prefix: string,
  tlsPrefix: string,
  required: boolean,
): RedisConnectionOptions {
  const urlName = `${prefix}URL`;
  const url = r.raw(urlName);
  if (url === undefined && required) {
    r.problems.push(`${urlName} must be set when BACKEND_TYPE=redis`);
  }
  const typeText = r.string(`${prefix}TYPE`, 'single').toLowerCase();
  const type = typeText === 'sentinel' || typeText === 'cluster' ? typeText : 'single';
  if (typeText !== type) {
    r.problems.push(
      `${prefix}TYPE=${JSON.stringify(typeText)}: expected single, sentinel or cluster`,
    );
  }
  const socketText = r.raw(`${prefix}SOCKET_TYPE`)?.toLowerCase();
  if (socketText !== undefined && socketText !== 'tcp' && socketText !== 'unix') {
    r.problems.push(`${prefix}SOCKET_TYPE=${JSON.stringify(socketText)}: expected tcp or unix`);
  }
  const socketType =
    socketText === 'tcp' || socketText === 'unix'
      ? socketText
      : url?.startsWith('/') === true
        ? 'unix'
        : 'tcp';
  if (url !== undefined) {
    const problem = redisUrlProblem(url, type, socketType);
    // Never echo credentials (user:password@) in a start-up error.
    if (problem !== undefined) {
      r.problems.push(`${urlName}=${JSON.stringify(redactUrl(url))}: ${redactUrl(problem)}`);
    }
  }
  const timeoutName = `${prefix}TIMEOUT`;
  const timeoutText = r.raw(timeoutName) ?? '10s';
  let timeoutMs = goDurationMs(timeoutText);
  if (timeoutMs === undefined || timeoutMs <= 0) {
    r.problems.push(
      `${timeoutName}=${JSON.stringify(timeoutText)}: expected a positive duration such as 200ms, 2s or 1m30s`,
    );
    timeoutMs = 10_000;
  }
  return {
    url: url ?? '',
    socketType,
    type,
    auth: r.raw(`${prefix}AUTH`) ?? '',
    sentinelAuth: r.raw(`${prefix}SENTINEL_AUTH`) ?? '',
    tls: r.bool(`${prefix}TLS`, false),
    tlsCaCert: r.raw(`${tlsPrefix}TLS_CACERT`) ?? '',
    tlsClientCert: r.raw(`${tlsPrefix}TLS_CLIENT_CERT`) ?? '',
    tlsClientKey: r.raw(`${tlsPrefix}TLS_CLIENT_KEY`) ?? '',
    tlsSkipHostnameVerification: r.bool(`${tlsPrefix}TLS_SKIP_HOSTNAME_VERIFICATION`, false),
    poolSize: r.int(`${prefix}POOL_SIZE`, 10, 1, 10_000),
    timeoutMs,
  };
}

/** What is wrong with a `REDIS_URL` for its type, or `undefined` when it is fine. */
function redisUrlProblem(
  url: string,
  type: RedisConnectionOptions['type'],
  socketType: 'tcp' | 'unix',
): string | undefined {
  if (type === 'single' && socketType === 'unix') return undefined;
  const parts = url.split(',').map((part) => part.trim());
  let addresses = parts;
  if (type === 'single' && parts.length !== 1) {
    return 'a single Redis takes one address (use REDIS_TYPE=cluster or sentinel for a list)';
  }
  if (type === 'sentinel') {
    if (parts.length < 2 || parts[0] === '') {
      return 'expected the master name and the sentinels: <master name>,<host:port>,...';
    }
    addresses = parts.slice(1);
  }
  for (const part of addresses) {
    try {
      parseAddress(part);
    } catch (error) {
      return (error as Error).message;
    }
  }
  return undefined;
}
