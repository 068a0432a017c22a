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
import type { Logger } from '../../../logging/logger.js';
import type { Metrics } from '../../../metrics/metrics.js';
import { MAX_UINT32, type RateLimitRequest } from '../../../model.js';
import type { HealthSignal } from '../../../service/health.js';
import type { CounterStore } from '../../../stores/counter-store.js';
import { SLUICE_VERSION } from '../../../version.js';
import { requestFromJson } from '../json.js';
import { send, type Route } from '../server.js';
import type { ConfigStatus } from './config-status.js';
import { decodeCounterKey } from './counter-keys.js';
import { explainPath, ruleView, rulesView } from './rules.js';
import { createSampler, type Sampler } from './sampler.js';

/** Default and largest `n` of `/api/hot?n=`. */
const HOT_DEFAULT = 20;
const HOT_MAX = 200;
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

/**
 * Why a state-changing or body-carrying request is refused, or `undefined` when it may go on:
 * only POST with a JSON body, and no cross-site origin, so a web page elsewhere cannot make the
 * operator's browser call it (a JSON content type needs a CORS preflight, never answered here).
 */
function refusePost(req: http.IncomingMessage): [number, string] | undefined {
  if (req.method !== 'POST') return [405, 'use POST with a JSON body'];
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/json') return [415, 'the body must be application/json'];
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return [403, 'unreadable Origin header'];
    }
    if (host !== req.headers.host) return [403, `cross-origin request from ${origin} refused`];
  } else if (origin === 'null') {
    return [403, 'cross-origin request refused'];
  }
  return undefined;
}

/** Where a request came from, for the log. */
function remoteOf(req: http.IncomingMessage): string {
  const { remoteAddress, remotePort } = req.socket;
  return `${remoteAddress ?? '?'}:${remotePort ?? '?'}`;
}

/** Create the console (its sampler starts now). */
export function createDebugConsole(options: ConsoleOptions): DebugConsole {
  const { snapshot, store, metrics, health, configStatus, clock, logger } = options;
  const startedAt = clock();
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
        domains: current.domains.size,
        rules: current.dump().length,
        files: current.files,
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
    const rows = store.top(Math.min(HOT_MAX * 5, n * 5)).map((row) => {
      const decoded = decodeCounterKey(row.key);
      let rule: string | undefined;
      let domain: string | undefined;
      let entries: { key: string; value: string }[] | undefined;
      if (decoded !== undefined) {
        domain = decoded.domain;
        entries = decoded.entries.map(({ key, value }) => ({ key, value }));
        try {
          rule = current.getLimit(decoded.domain, {
            entries,
            limit: undefined,
            hitsAddend: undefined,
          })?.rule.fullKey;
        } catch {
          rule = undefined;
        }
      }
      return {
        key: row.key,
        domain,
        entries,
        rule,
        algorithm: decoded?.algorithm,
        windowMs: decoded?.windowMs,
        count: row.count,
        limit: row.limit,
        remaining: Math.max(0, row.limit - row.count),
        resetMs: row.expiresInMs,
      };
    });
    return {
      listsCounters: true,
      size: store.size(),
      busiest: rows.slice(0, n),
      limited: rows.filter((row) => row.remaining <= 0).slice(0, n),
      rules: await overLimitRules(n),
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
        domain: String(value.labels['domain'] ?? ''),
        key1: String(value.labels['key1'] ?? ''),
        key2: String(value.labels['key2'] ?? ''),
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
        const view = configStatus.view();
        sendJson(res, 200, { version: view.version, domains: rulesView(snapshot()) });
      },
    },
    {
      path: '/api/hot',
      help: `console: busiest and limited counters, most limited rules (?n=N, default ${HOT_DEFAULT}, at most ${HOT_MAX}; JSON)`,
      route: async (req, res) => {
        const url = new URL(req.url ?? '/', 'http://debug');
        const asked = Number(url.searchParams.get('n') ?? HOT_DEFAULT);
        const n = Number.isInteger(asked) && asked > 0 ? Math.min(asked, HOT_MAX) : HOT_DEFAULT;
        sendJson(res, 200, await hot(n));
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
          logger.info(
            { remote },
            'console: counter reset refused (DEBUG_CONSOLE_RESET_ENABLED is off)',
          );
          sendJson(res, 403, {
            error:
              'counter reset is off: start sluice with DEBUG_CONSOLE_RESET_ENABLED=true to allow it',
          });
          return;
        }
        const refused = refusePost(req);
        if (refused !== undefined) {
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
        logger.warn({ remote, keys, reset: reset.length }, 'console: counters reset');
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

  return {
    endpoints,
    page: serveAsset('index.html'),
    close: () => sampler.close(),
  };
}

/** Whether `req` asks for a page (a browser) rather than text (curl). */
export function wantsHtml(req: http.IncomingMessage): boolean {
  return (req.headers.accept ?? '').includes('text/html');
}
