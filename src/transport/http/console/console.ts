/**
 * The operator console on the debug listener (docs/operations-console.md): a page at `/` (for a
 * browser; `curl /` still lists the endpoints) and the JSON endpoints behind its panels:
 * `/api/now`, `/api/rules`, `/api/hot`, `POST /api/try` and `POST /api/reset` (off unless
 * `DEBUG_CONSOLE_RESET_ENABLED`). Everything is read from what sluice already keeps (metrics
 * counters, the store, the snapshot); a timer samples the counters, nothing runs per call.
 */
import fs from 'node:fs';
import type http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Clock } from '../../../clock.js';
import type { ConfigSnapshot } from '../../../config/types.js';
import { SluiceError } from '../../../errors.js';
import { createLimiter, type Limiter } from '../../../limiter/limiter.js';
import { counterKey } from '../../../limiter/keys.js';
import { createLogLimiter, truncateForLog } from '../../../logging/limited.js';
import type { Logger } from '../../../logging/logger.js';
import type { Metrics } from '../../../metrics/metrics.js';
import { MAX_UINT32, type RateLimitRequest } from '../../../model.js';
import type { HealthSignal } from '../../../service/health.js';
import type { CounterStore } from '../../../stores/counter-store.js';
import { SLUICE_VERSION } from '../../../version.js';
import { requestFromJson } from '../json.js';
import { isLoopbackHost } from '../host-check.js';
import { send, type Route } from '../server.js';
import type { ConfigStatus } from './config-status.js';
import {
  API_PER_SECOND,
  createApiBudget,
  refuseCredential,
  refusePost,
  resetTokenDigest,
} from './guards.js';
import { decodeCounterKey } from './counter-keys.js';
import { explainPath, ruleView, rulesView } from './rules.js';
import { createSampler, type Sampler } from './sampler.js';

/** Default and largest `n` of `/api/hot?n=`. */
const HOT_DEFAULT = 20;
const HOT_MAX = 200;
/**
 * Most bytes of counter rows in one `/api/hot` answer: past it the lists stop (`truncated`).
 * Request values are up to 4096 characters, and a counter key holds every entry of its
 * descriptor, so n rows alone could be megabytes.
 */
const HOT_MAX_ROW_BYTES = 192 * 1024;
/** How long an `/api/hot` answer is reused for the same `n`, ms (the page polls every 2 s). */
const HOT_CACHE_MS = 1_000;
/** Longest value (entry key or value, domain, rule key) shown, characters; longer ones are cut. */
const DISPLAY_MAX_CHARS = 200;
/** Longest counter key given whole (it is what a reset by key names); longer ones are cut. */
const KEY_MAX_CHARS = 1_024;
/** Most entries shown per counter. */
const ENTRIES_MAX = 16;
/** Most problems of the last load shown by `/api/now`, and most characters of each. */
const PROBLEMS_MAX = 20;
const PROBLEM_MAX_CHARS = 300;
/** Most rule files named by `/api/now`. */
const FILES_MAX = 50;
/** Largest JSON body of `/api/try` and `/api/reset`, bytes. */
const CONSOLE_MAX_BODY_BYTES = 64 * 1024;

/** What the console needs from the app. */
export interface ConsoleOptions {
  /** The snapshot serving now. */
  readonly snapshot: () => ConfigSnapshot;
  /** The counter store (read by hot keys; `reset` when enabled; "try it" checks with 0 hits). */
  readonly store: CounterStore;
  /** The metrics whose counters the console reads. */
  readonly metrics: Metrics;
  /** Health, as `/health` reports it. */
  readonly health: HealthSignal;
  /** Load results of the rules. */
  readonly configStatus: ConfigStatus;
  /** Time source (epoch ms). */
  readonly clock: Clock;
  /** Module logger (resets are logged here, with the remote address). */
  readonly logger: Logger;
  /** Store description for the `now` panel. */
  readonly storeInfo: {
    /** `memory` or `redis` (`BACKEND_TYPE`). */
    readonly backend: string;
    /** `STORE_FAILURE_MODE` (meaningful for redis). */
    readonly failureMode: string;
  };
  /** Global `SHADOW_MODE` and `QUOTA_MODE`, so "try it" answers as the service does. */
  readonly shadowMode: boolean;
  readonly quotaMode: boolean;
  /** `DEBUG_CONSOLE_RESET_ENABLED`. */
  readonly resetEnabled: boolean;
  /**
   * `DEBUG_HOST`: off loopback, a reset needs {@link resetToken} (and without one is refused).
   * Default `127.0.0.1`.
   */
  readonly listenHost?: string;
  /**
   * `DEBUG_CONSOLE_RESET_TOKEN`: when set, every reset must carry `Authorization: Bearer <it>`,
   * wherever the listener is. `undefined`: none.
   */
  readonly resetToken?: string | undefined;
  /** Time between samples of the charts, ms (default 5000). */
  readonly sampleIntervalMs?: number;
}

/** One endpoint of the console. */
export interface ConsoleEndpoint {
  readonly path: string;
  /** One line for the debug listener's endpoint list. */
  readonly help: string;
  readonly route: Route;
}

/** The console, ready to mount on the debug server. */
export interface DebugConsole {
  /** JSON endpoints and assets. */
  readonly endpoints: readonly ConsoleEndpoint[];
  /** The page, served at `/` to browsers. */
  readonly page: Route;
  /** Stop the sampler. */
  close(): void;
}

/** A rule with over-limit hits (labels as the reference's Prometheus mapping gives them). */
interface OverLimitRule {
  readonly domain: string;
  readonly key1: string;
  readonly key2: string;
  readonly overLimit: number;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** The folder of the page's files: `console/` at the package root (src/ and dist/ alike). */
const ASSET_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../console');

const ASSETS: Readonly<Record<string, string>> = {
  'index.html': 'text/html; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'console.css': 'text/css; charset=utf-8',
};

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.setHeader('Cache-Control', 'no-store');
  send(res, status, JSON_TYPE, JSON.stringify(body));
}

/** Read a body up to `maxBytes`; `undefined` when larger. */
function readBody(req: http.IncomingMessage, maxBytes: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Where a request came from, for the log. */
function remoteOf(req: http.IncomingMessage): string {
  const { remoteAddress, remotePort } = req.socket;
  return `${remoteAddress ?? '?'}:${remotePort ?? '?'}`;
}

/** `text` cut to `max` characters, saying how long it was (`abc... (4096 chars)`). */
function cut(text: string, max = DISPLAY_MAX_CHARS): string {
  return truncateForLog(text, max);
}

/** `items` cut to `max`, with a last line saying how many more there were. */
function capList(items: readonly string[], max: number, maxChars: number): string[] {
  const shown = items.slice(0, max).map((item) => cut(item, maxChars));
  if (items.length > max) shown.push(`and ${items.length - max} more`);
  return shown;
}

/** Create the console (its sampler starts now). */
export function createDebugConsole(options: ConsoleOptions): DebugConsole {
  const { snapshot, store, metrics, health, configStatus, clock, logger } = options;
  const startedAt = clock();
  const listenHost = options.listenHost ?? '127.0.0.1';
  const onLoopback = isLoopbackHost(listenHost);
  const tokenDigest =
    options.resetToken === undefined || options.resetToken === ''
      ? undefined
      : resetTokenDigest(options.resetToken);
  if (options.resetEnabled && !onLoopback) {
    logger.warn(
      { debugHost: listenHost, credential: tokenDigest !== undefined },
      tokenDigest === undefined
        ? 'console: DEBUG_CONSOLE_RESET_ENABLED on a debug listener off loopback without DEBUG_CONSOLE_RESET_TOKEN: resets are refused until it is set'
        : 'console: counter resets are open to the network the debug listener is on; each needs DEBUG_CONSOLE_RESET_TOKEN',
    );
  }
  // Per snapshot: its rule count and the /api/rules body (both walk every rule).
  const ruleCounts = new WeakMap<ConfigSnapshot, number>();
  const rulesBodies = new WeakMap<ConfigSnapshot, { version: number; body: string }>();
  // Refused resets are anyone's doing: a few lines a minute per cause, then counts.
  const logLimit = createLogLimiter();
  /** Recent /api/hot answers by n (at most a few kept). */
  const hotAnswers = new Map<number, { at: number; body: string }>();
  const sampler: Sampler = createSampler({
    counters: metrics.service,
    storeSize: () => store.size(),
    storeHealthy: () => store.healthy(),
    clock,
    intervalMs: options.sampleIntervalMs,
  });
  // A limiter of its own over the same store: "try it" checks with 0 hits (nothing is charged)
  // and, unlike the service, counts nothing in the metrics.
  const limiter: Limiter = createLimiter({
    store,
    shadowMode: options.shadowMode,
    quotaMode: options.quotaMode,
  });
  const assets = new Map<string, Buffer>();
  const asset = (name: string): Buffer => {
    let body = assets.get(name);
    if (body === undefined) {
      body = fs.readFileSync(path.join(ASSET_DIR, name));
      assets.set(name, body);
    }
    return body;
  };
  const serveAsset =
    (name: string): Route =>
    (_req, res) => {
      res.setHeader('Cache-Control', 'no-cache');
      res.setHeader('X-Content-Type-Options', 'nosniff');
      if (name === 'index.html') {
        // The page loads nothing from elsewhere.
        res.setHeader(
          'Content-Security-Policy',
          "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        );
      }
      send(res, 200, ASSETS[name]!, asset(name));
    };

  const ruleCount = (current: ConfigSnapshot): number => {
    let count = ruleCounts.get(current);
    if (count === undefined) {
      count = current.dump().length;
      ruleCounts.set(current, count);
    }
    return count;
  };

  const now = (): unknown => {
    const counters = metrics.service;
    const current = snapshot();
    const config = configStatus.view();
    return {
      version: SLUICE_VERSION,
      time: clock(),
      uptimeMs: clock() - startedAt,
      health: { serving: health.serving(), reasons: health.reasons() },
      calls: {
        ok: counters.callsOk,
        overLimit: counters.callsOverLimit,
        errors: counters.serviceErrors + counters.storeErrors + counters.internalErrors,
      },
      rates: sampler.live() ?? sampler.points().at(-1) ?? null,
      store: {
        backend: options.storeInfo.backend,
        failureMode: options.storeInfo.failureMode,
        healthy: store.healthy(),
        keys: store.size(),
        listsCounters: store.top !== undefined,
        canReset: store.reset !== undefined,
      },
      config: {
        ...config,
        lastLoad:
          config.lastLoad === undefined
            ? undefined
            : {
                ...config.lastLoad,
                problems: capList(config.lastLoad.problems, PROBLEMS_MAX, PROBLEM_MAX_CHARS),
              },
        domains: current.domains.size,
        rules: ruleCount(current),
        files: capList(current.files, FILES_MAX, PROBLEM_MAX_CHARS),
      },
      resetEnabled: options.resetEnabled,
      series: { intervalMs: sampler.intervalMs, points: sampler.points() },
    };
  };

  const hot = async (n: number): Promise<unknown> => {
    const current = snapshot();
    if (store.top === undefined) {
      return { listsCounters: false, busiest: [], limited: [], rules: await overLimitRules(n) };
    }
    // Counters with no room left are "limited now"; a wider scan finds them among the busiest.
    const rows = store.top(Math.min(HOT_MAX * 5, n * 5));
    let budget = HOT_MAX_ROW_BYTES;
    let truncated = false;
    const show = (picked: typeof rows): unknown[] => {
      const shown: unknown[] = [];
      for (const row of picked) {
        const view = hotRow(current, row);
        const size = JSON.stringify(view).length;
        if (size > budget) {
          truncated = true;
          break;
        }
        budget -= size;
        shown.push(view);
      }
      return shown;
    };
    const busiest = show(rows.slice(0, n));
    const limited = show(rows.filter((row) => row.count >= row.limit).slice(0, n));
    return {
      listsCounters: true,
      size: store.size(),
      busiest,
      limited,
      truncated,
      rules: await overLimitRules(n),
    };
  };

  /** One counter as /api/hot shows it: long values cut, at most {@link ENTRIES_MAX} entries. */
  const hotRow = (
    current: ConfigSnapshot,
    row: { key: string; count: number; limit: number; expiresInMs: number },
  ): unknown => {
    const decoded = decodeCounterKey(row.key);
    let rule: string | undefined;
    let entries: { key: string; value: string }[] | undefined;
    if (decoded !== undefined) {
      const all = decoded.entries.map(({ key, value }) => ({ key, value }));
      try {
        rule = current.getLimit(decoded.domain, {
          entries: all,
          limit: undefined,
          hitsAddend: undefined,
        })?.rule.fullKey;
      } catch {
        rule = undefined;
      }
      entries = all.slice(0, ENTRIES_MAX).map(({ key, value }) => ({
        key: cut(key),
        value: cut(value),
      }));
    }
    return {
      key: cut(row.key, KEY_MAX_CHARS),
      // A cut key names no counter: the page offers no reset by key for it.
      keyCut: row.key.length > KEY_MAX_CHARS ? true : undefined,
      domain: decoded === undefined ? undefined : cut(decoded.domain),
      entries,
      moreEntries:
        decoded !== undefined && decoded.entries.length > ENTRIES_MAX
          ? decoded.entries.length - ENTRIES_MAX
          : undefined,
      rule: rule === undefined ? undefined : cut(rule),
      algorithm: decoded?.algorithm,
      windowMs: decoded?.windowMs,
      count: row.count,
      limit: row.limit,
      remaining: Math.max(0, row.limit - row.count),
      resetMs: row.expiresInMs,
    };
  };

  /** The rules with the most over-limit hits since the start (the reference's over_limit). */
  const overLimitRules = async (n: number): Promise<OverLimitRule[]> => {
    const metric = metrics.registry.getSingleMetric('ratelimit_service_rate_limit_over_limit');
    if (metric === undefined) return [];
    // get() runs the collect hook, as a scrape does.
    const { values } = await metric.get();
    return values
      .filter((value) => value.value > 0)
      .map((value) => ({
        domain: cut(String(value.labels['domain'] ?? '')),
        key1: cut(String(value.labels['key1'] ?? '')),
        key2: cut(String(value.labels['key2'] ?? '')),
        overLimit: value.value,
      }))
      .sort((a, b) => b.overLimit - a.overLimit)
      .slice(0, n);
  };

  const tryIt = async (request: RateLimitRequest): Promise<unknown> => {
    const current = snapshot();
    const checked: RateLimitRequest = {
      ...request,
      descriptors: request.descriptors.map((descriptor) => ({ ...descriptor, hitsAddend: 0 })),
    };
    const response = await limiter.decide(current, checked);
    const known = current.domains.has(request.domain);
    let rejects = false;
    let quotaOver = 0;
    let quotaTotal = 0;
    const descriptors = request.descriptors.map((descriptor, i) => {
      const status = response.statuses[i]!;
      const hits = descriptor.hitsAddend ?? Math.max(1, request.hitsAddend);
      const match = current.getLimit(request.domain, descriptor);
      const rule = match?.rule;
      const counted = status.rule !== undefined;
      const overNow = status.code === 'OVER_LIMIT' || status.overLimit;
      const over = counted && (overNow || status.limitRemaining < hits);
      const shadow = rule?.shadowMode === true;
      const quota = counted && (status.rule?.quotaMode === true || options.quotaMode) && !shadow;
      if (quota) {
        quotaTotal++;
        if (over) quotaOver++;
      } else if (over && !shadow) {
        rejects = true;
      }
      return {
        entries: descriptor.entries,
        hits,
        path: explainPath(current, request.domain, descriptor),
        rule: rule === undefined ? undefined : ruleView(rule),
        replaced: rule !== undefined && status.currentLimit === undefined && !rule.unlimited,
        code: over && !shadow ? 'OVER_LIMIT' : 'OK',
        currentLimit: status.currentLimit,
        limitRemaining: rule?.unlimited === true ? MAX_UINT32 : counted ? status.limitRemaining : 0,
        remainingAfter: counted && !over ? status.limitRemaining - hits : undefined,
        durationUntilResetMs: status.durationUntilResetMs,
        counterKeys:
          match === undefined || !counted
            ? []
            : match.rule.limits.map((limit) =>
                counterKey(
                  request.domain,
                  descriptor.entries,
                  match,
                  limit.windowMs,
                  limit.algorithm,
                ),
              ),
      };
    });
    if (quotaTotal > 0 && quotaOver === quotaTotal) rejects = true;
    return {
      domain: request.domain,
      knownDomain: known,
      charged: false,
      overallCode: rejects && !options.shadowMode ? 'OVER_LIMIT' : 'OK',
      shadowMode: options.shadowMode,
      descriptors,
    };
  };

  /** Counter keys a reset body names: `{key}` or a request (`{domain, descriptors}`). */
  const keysToReset = (body: Buffer): string[] => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch {
      throw new SluiceError('INVALID_JSON', 'the body is not JSON');
    }
    if (parsed !== null && typeof parsed === 'object' && 'key' in parsed) {
      const key = parsed.key;
      if (typeof key !== 'string' || key === '') {
        throw new SluiceError(
          'INVALID_JSON',
          '"key" must be a counter key (as /api/hot lists them)',
        );
      }
      return [key];
    }
    const request = requestFromJson(body);
    const current = snapshot();
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
  };

  const endpoints: ConsoleEndpoint[] = [
    {
      path: '/api/now',
      help: 'console: calls, store, config status, uptime and the last 15 minutes (JSON)',
      route: (_req, res) => sendJson(res, 200, now()),
    },
    {
      path: '/api/rules',
      help: 'console: the loaded domains as trees (JSON)',
      route: (_req, res) => {
        const current = snapshot();
        const { version } = configStatus.view();
        let cached = rulesBodies.get(current);
        if (cached === undefined || cached.version !== version) {
          cached = { version, body: JSON.stringify({ version, domains: rulesView(current) }) };
          rulesBodies.set(current, cached);
        }
        res.setHeader('Cache-Control', 'no-store');
        send(res, 200, JSON_TYPE, cached.body);
      },
    },
    {
      path: '/api/hot',
      help: `console: busiest and limited counters, most limited rules (?n=N, default ${HOT_DEFAULT}, at most ${HOT_MAX}; JSON)`,
      route: async (req, res) => {
        const url = new URL(req.url ?? '/', 'http://debug');
        const asked = Number(url.searchParams.get('n') ?? HOT_DEFAULT);
        const n = Number.isInteger(asked) && asked > 0 ? Math.min(asked, HOT_MAX) : HOT_DEFAULT;
        // Pollers (the page, or a loop) share one answer per n and second: each costs a scan
        // of the store and a read of every rule's counters, off the calls' event loop time.
        const at = clock();
        let answer = hotAnswers.get(n);
        if (answer === undefined || at - answer.at >= HOT_CACHE_MS || at < answer.at) {
          answer = { at, body: JSON.stringify(await hot(n)) };
          hotAnswers.delete(n);
          hotAnswers.set(n, answer);
          if (hotAnswers.size > 4) hotAnswers.delete(hotAnswers.keys().next().value!);
        }
        res.setHeader('Cache-Control', 'no-store');
        send(res, 200, JSON_TYPE, answer.body);
      },
    },
    {
      path: '/api/try',
      help: 'console: POST a /json request body; the rule, path and answer per descriptor, nothing charged',
      route: async (req, res) => {
        const refused = refusePost(req);
        if (refused !== undefined) {
          sendJson(res, refused[0], { error: refused[1] });
          return;
        }
        const body = await readBody(req, CONSOLE_MAX_BODY_BYTES);
        if (body === undefined) {
          sendJson(res, 413, { error: `the body is larger than ${CONSOLE_MAX_BODY_BYTES} bytes` });
          return;
        }
        let request: RateLimitRequest;
        try {
          request = requestFromJson(body);
        } catch (err) {
          if (!SluiceError.is(err, 'INVALID_JSON')) throw err;
          sendJson(res, 400, { error: err.message });
          return;
        }
        if (request.domain === '' || request.descriptors.length === 0) {
          sendJson(res, 400, { error: 'give a domain and at least one descriptor' });
          return;
        }
        try {
          sendJson(res, 200, await tryIt(request));
        } catch (err) {
          const error = SluiceError.from(err);
          sendJson(res, error.code === 'STORE_UNAVAILABLE' ? 503 : 500, {
            error: error.message,
            code: error.code,
          });
        }
      },
    },
    {
      path: '/api/reset',
      help: 'console: POST {"key": K} or a /json request body to reset counters (DEBUG_CONSOLE_RESET_ENABLED)',
      route: async (req, res) => {
        const remote = remoteOf(req);
        if (!options.resetEnabled) {
          const dropped = logLimit('off');
          if (dropped !== undefined) {
            logger.info(
              { remote, dropped },
              'console: counter reset refused (DEBUG_CONSOLE_RESET_ENABLED is off)',
            );
          }
          sendJson(res, 403, {
            error:
              'counter reset is off: start sluice with DEBUG_CONSOLE_RESET_ENABLED=true to allow it',
          });
          return;
        }
        const refused = refusePost(req) ?? refuseCredential(req, tokenDigest, onLoopback);
        if (refused !== undefined) {
          if (refused[0] === 401)
            res.setHeader('WWW-Authenticate', 'Bearer realm="sluice console"');
          const dropped = logLimit(String(refused[0]));
          if (dropped !== undefined) {
            logger.info({ remote, status: refused[0], dropped }, 'console: counter reset refused');
          }
          sendJson(res, refused[0], { error: refused[1] });
          return;
        }
        if (store.reset === undefined) {
          sendJson(res, 501, {
            error: `the ${options.storeInfo.backend} store cannot reset counters`,
          });
          return;
        }
        const body = await readBody(req, CONSOLE_MAX_BODY_BYTES);
        if (body === undefined) {
          sendJson(res, 413, { error: `the body is larger than ${CONSOLE_MAX_BODY_BYTES} bytes` });
          return;
        }
        let keys: string[];
        try {
          keys = keysToReset(body);
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
    },
    {
      path: '/console/console.js',
      help: 'console: the page script',
      route: serveAsset('console.js'),
    },
    {
      path: '/console/console.css',
      help: 'console: the page style',
      route: serveAsset('console.css'),
    },
  ];

  const admit = createApiBudget(clock);
  const limited = endpoints.map((endpoint): ConsoleEndpoint => {
    if (!endpoint.path.startsWith('/api/')) return endpoint;
    const { route } = endpoint;
    return {
      ...endpoint,
      route: (req, res) => {
        if (admit()) return route(req, res);
        res.setHeader('Retry-After', '1');
        sendJson(res, 429, {
          error: `the console answers at most ${API_PER_SECOND} requests a second (all clients together); retry in a second`,
        });
      },
    };
  });

  return {
    endpoints: limited,
    page: serveAsset('index.html'),
    close: () => sampler.close(),
  };
}

/** Whether `req` asks for a page (a browser) rather than text (curl). */
export function wantsHtml(req: http.IncomingMessage): boolean {
  return (req.headers.accept ?? '').includes('text/html');
}
