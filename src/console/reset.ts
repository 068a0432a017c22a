/**
 * The counter reset (`POST /api/reset`, off unless `DEBUG_CONSOLE_RESET_ENABLED`): forget the
 * counters a key or a request names. Guarded (guards.ts) and logged with the remote address;
 * refusals are logged a few lines a minute per cause, then counted.
 */
import type http from 'node:http';
import type { ConfigSnapshot } from '../config/types.js';
import { SluiceError } from '../errors.js';
import { counterKey } from '../limiter/keys.js';
import { createLogLimiter } from '../logging/limited.js';
import type { Logger } from '../logging/logger.js';
import type { CounterStore } from '../stores/counter-store.js';
import { requestFromJson } from '../transport/http/json.js';
import { refuseCredential, refusePost } from './guards.js';
import { capList, DISPLAY_MAX_CHARS, readBody, sendJson, type ConsoleEndpoint } from './http.js';
import { PROBLEMS_MAX } from './now.js';

/** What the reset needs. */
export interface ResetSources {
  readonly snapshot: () => ConfigSnapshot;
  readonly store: CounterStore;
  readonly logger: Logger;
  /** `BACKEND_TYPE`, named when the store cannot reset. */
  readonly backend: string;
  /** `DEBUG_CONSOLE_RESET_ENABLED`. */
  readonly enabled: boolean;
  /** The digest of `DEBUG_CONSOLE_RESET_TOKEN`; `undefined`: none set. */
  readonly tokenDigest: Buffer | undefined;
  /** Whether the debug listener is on loopback (off it, a reset needs the token). */
  readonly onLoopback: boolean;
}

/** Where a request came from, for the log. */
function remoteOf(req: http.IncomingMessage): string {
  const { remoteAddress, remotePort } = req.socket;
  return `${remoteAddress ?? '?'}:${remotePort ?? '?'}`;
}

/** Counter keys a reset body names: `{key}` or a request (`{domain, descriptors}`). */
function keysToReset(body: Buffer, current: ConfigSnapshot): string[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new SluiceError('INVALID_JSON', 'the body is not JSON');
  }
  if (parsed !== null && typeof parsed === 'object' && 'key' in parsed) {
    const key = parsed.key;
    if (typeof key !== 'string' || key === '') {
      throw new SluiceError('INVALID_JSON', '"key" must be a counter key (as /api/hot lists them)');
    }
    return [key];
  }
  const request = requestFromJson(body);
  const keys: string[] = [];
  for (const descriptor of request.descriptors) {
    const match = current.getLimit(request.domain, descriptor);
    if (match === undefined || match.rule.unlimited) continue;
    for (const limit of match.rule.limits) {
      keys.push(
        counterKey(request.domain, descriptor.entries, match, limit.windowMs, limit.algorithm),
      );
    }
  }
  return keys;
}

/** The `/api/reset` endpoint. */
export function resetPanel(sources: ResetSources): ConsoleEndpoint {
  const { snapshot, store, logger, tokenDigest, onLoopback } = sources;
  const logLimit = createLogLimiter();

  /** Log a refusal within the limit; `cause` names it (`off`, or the status answered). */
  const logRefusal = (remote: string, cause: string, fields: object): void => {
    const dropped = logLimit(cause);
    if (dropped === undefined) return;
    logger.info(
      { remote, ...fields, dropped },
      cause === 'off'
        ? 'console: counter reset refused (DEBUG_CONSOLE_RESET_ENABLED is off)'
        : 'console: counter reset refused',
    );
  };

  return {
    path: '/api/reset',
    help: 'console: POST {"key": K} or a /json request body to reset counters (DEBUG_CONSOLE_RESET_ENABLED)',
    route: async (req, res) => {
      const remote = remoteOf(req);
      if (!sources.enabled) {
        logRefusal(remote, 'off', {});
        sendJson(res, 403, {
          error:
            'counter reset is off: start sluice with DEBUG_CONSOLE_RESET_ENABLED=true to allow it',
        });
        return;
      }
      const refused = refusePost(req) ?? refuseCredential(req, tokenDigest, onLoopback);
      if (refused !== undefined) {
        if (refused[0] === 401) res.setHeader('WWW-Authenticate', 'Bearer realm="sluice console"');
        logRefusal(remote, String(refused[0]), { status: refused[0] });
        sendJson(res, refused[0], { error: refused[1] });
        return;
      }
      if (store.reset === undefined) {
        sendJson(res, 501, { error: `the ${sources.backend} store cannot reset counters` });
        return;
      }
      const body = await readBody(req, res);
      if (body === undefined) return;
      let keys: string[];
      try {
        keys = keysToReset(body, snapshot());
      } catch (err) {
        if (!SluiceError.is(err, 'INVALID_JSON')) throw err;
        sendJson(res, 400, { error: err.message });
        return;
      }
      const reset: string[] = [];
      for (const key of keys) if (await store.reset(key)) reset.push(key);
      logger.warn(
        { remote, keys: capList(keys, PROBLEMS_MAX, DISPLAY_MAX_CHARS), reset: reset.length },
        'console: counters reset',
      );
      sendJson(res, 200, { keys, reset });
    },
  };
}
