/**
 * `sluice/embedded`: sluice's limiter in the application's own process, from the same YAML rule
 * files as the server, reloaded on change as the server reloads them (docs/node.md). It is the
 * server's own composition without the listeners: settings from the server's variable names, the
 * file rule source and its watcher, `createStore` (memory, or Redis for several app instances),
 * the limiter and the rate limit service. Nothing here decides anything itself.
 */
import { systemClock, type Clock } from '../clock.js';
import { createFileSource, createServingConfig, type RuleSource } from '../config/source.js';
import { SluiceError } from '../errors.js';
import { createLimiter } from '../limiter/limiter.js';
import { createLogger, type Logger } from '../logging/logger.js';
import { secretsFromEnv } from '../logging/redact.js';
import {
  UNIT_MS,
  type DescriptorStatus,
  type RateLimitRequest,
  type RateLimitResponse,
  type RequestDescriptor,
} from '../model.js';
import { reportedLimit } from '../service/headers.js';
import { createRateLimitService, type RateLimitService } from '../service/rate-limit-service.js';
import { loadSettings, storeOptions } from '../settings.js';
import type { CounterStore } from '../stores/counter-store.js';
import { createStore } from '../stores/index.js';
import {
  failureDecision,
  type CallDescriptor,
  type DescriptorResult,
  type FailureMode,
  type RateLimitBackend,
  type RateLimitCall,
  type RateLimitDecision,
} from './decision.js';

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
} from './decision.js';

/** Options of {@link createEmbeddedLimiter}. */
export interface EmbeddedLimiterOptions {
  /** Rule files and directories, as `sluice serve --config` takes them. */
  readonly rules: string | readonly string[];
  /**
   * More settings by the server's variable names (README settings table), e.g.
   * `{ BACKEND_TYPE: 'redis', REDIS_URL: 'redis:6379', DEFAULT_ALGORITHM: 'fixed_window' }`.
   * Only the ones about rules, the store and the limiter mean anything here; listener settings
   * are ignored. Read from this object only, never from `process.env`. Default: none (the memory
   * store); `REDIS_WAIT_AT_START` defaults to `true` here, so a Redis limiter is connected (or
   * `REDIS_TIMEOUT` has passed) when the promise resolves.
   */
  readonly settings?: Readonly<Record<string, string>> | undefined;
  /**
   * What a call answers when the limiter fails (Redis down with `STORE_FAILURE_MODE=error`, an
   * invalid call): `open` (default) lets the request through, `closed` rejects it.
   */
  readonly failureMode?: FailureMode | undefined;
  /**
   * Reload the rules when a file changes (default true). A reload that fails validation keeps the
   * old rules and logs every problem, as the server does.
   */
  readonly watch?: boolean | undefined;
  /** A pino logger; default one at `LOG_LEVEL` (warn) writing JSON lines to stdout. */
  readonly logger?: Logger | undefined;
  /** Time source of the memory store, epoch ms; default the system clock (tests pass a fake). */
  readonly clock?: Clock | undefined;
}

/** The limiter in process. */
export interface EmbeddedLimiter extends RateLimitBackend {
  /** The domains of the rules serving now. */
  domains(): string[];
  /** Rule loads so far: `loaded` accepted (the first and every reload), `refused` rejected. */
  loads(): { readonly loaded: number; readonly refused: number };
  /** Stop watching and release the store (closes the Redis connection). */
  close(): Promise<void>;
}

/**
 * Load the rules (rejects with a SluiceError INVALID_CONFIG naming every problem when they are
 * invalid, or INVALID_SETTINGS for a bad setting) and create the store and limiter.
 */
export async function createEmbeddedLimiter(
  options: EmbeddedLimiterOptions,
): Promise<EmbeddedLimiter> {
  // An app that creates its limiter wants it counting when the promise resolves: wait up to
  // REDIS_TIMEOUT for Redis by default (the server listens at once and lets health say it).
  const env = { REDIS_WAIT_AT_START: 'true', ...options.settings };
  const paths = typeof options.rules === 'string' ? [options.rules] : [...options.rules];
  if (paths.length === 0) {
    throw new SluiceError('INVALID_SETTINGS', 'rules: give at least one rule file or directory');
  }
  const settings = loadSettings(env, { config: paths });
  const mode: FailureMode = options.failureMode ?? 'open';
  const clock = options.clock ?? systemClock;
  const logger =
    options.logger ??
    createLogger({
      level: settings.logLevel,
      format: settings.logFormat,
      secrets: secretsFromEnv(env),
    });
  const counters = { configLoadSuccess: 0, configLoadError: 0 };
  const serving = createServingConfig({
    logger: logger.child({ module: 'config' }),
    counters,
    paths: settings.config.paths,
    origin: settings.config.origin,
  });
  const source: RuleSource = createFileSource({
    paths: settings.config.paths,
    mergeDomainConfigs: settings.mergeDomainConfigs,
    defaultAlgorithm: settings.defaultAlgorithm,
    maxRulesPerFile: settings.configMaxRulesPerFile,
    maxRules: settings.configMaxRules,
    algorithmRefusal: settings.algorithmRefusal,
    watch: options.watch,
  });
  await source.start(serving);
  let store: CounterStore;
  try {
    store = await createStore(storeOptions(settings), { clock, logger });
  } catch (err) {
    source.close();
    throw err;
  }
  const service: RateLimitService = createRateLimitService({
    limiter: createLimiter({
      store,
      shadowMode: settings.shadowMode,
      quotaMode: settings.quotaMode,
    }),
    config: () => serving.current(),
    bounds: {
      maxDescriptors: settings.maxDescriptorsPerRequest,
      maxEntries: settings.maxEntriesPerDescriptor,
      maxEntryLength: settings.maxEntryLength,
    },
    logger: logger.child({ module: 'service' }),
    clock,
  });
  const what = 'the embedded sluice limiter';

  return {
    shouldRateLimit(call) {
      let request: RateLimitRequest;
      try {
        request = requestOf(call);
      } catch (err) {
        return Promise.resolve(failureDecision(mode, 'INVALID_REQUEST', what, err as Error));
      }
      return service.shouldRateLimit(request).then(decisionOf, (err: unknown) => {
        const error = SluiceError.from(err);
        return failureDecision(mode, error.code, what, error);
      });
    },
    domains: () => [...serving.current().domains.keys()],
    loads: () => ({ loaded: counters.configLoadSuccess, refused: counters.configLoadError }),
    async close() {
      source.close();
      await store.close();
    },
  };
}

/** The domain request for a call; throws a TypeError for a call that is not one. */
function requestOf(call: RateLimitCall): RateLimitRequest {
  if (!Array.isArray(call?.descriptors)) {
    throw new TypeError('a call needs a domain and a list of descriptors');
  }
  const descriptors: readonly CallDescriptor[] = call.descriptors;
  // The service checks sizes, not types the wire would have fixed: a unit a remote server would
  // refuse is refused here too.
  for (let i = 0; i < descriptors.length; i++) {
    const limit = descriptors[i]?.limit;
    if (limit !== undefined && !Object.hasOwn(UNIT_MS, limit.unit)) {
      throw new TypeError(`descriptor ${i}: limit.unit ${String(limit.unit)} is not a unit`);
    }
  }
  // A call descriptor is a request descriptor whose optional fields may be absent, which reads
  // the same: no copy per descriptor on the hot path.
  return {
    domain: typeof call.domain === 'string' ? call.domain : '',
    hitsAddend: call.hitsAddend ?? 0,
    descriptors: descriptors as readonly RequestDescriptor[],
  };
}

/** The decision for a service answer: the same fields a remote answer carries, and the window. */
function decisionOf(response: RateLimitResponse): RateLimitDecision {
  return {
    allowed: response.overallCode === 'OK',
    overallCode: response.overallCode,
    statuses: response.statuses.map(resultOf),
    responseHeaders: response.responseHeadersToAdd,
  };
}

function resultOf(status: DescriptorStatus): DescriptorResult {
  const current = status.currentLimit;
  return {
    code: status.code,
    // The same three fields: shared, not copied (both are read-only).
    limit: current,
    remaining: status.limitRemaining,
    // As on the wire: whole milliseconds.
    resetMs:
      status.durationUntilResetMs === undefined
        ? undefined
        : Math.max(0, Math.round(status.durationUntilResetMs)),
    windowMs: reportedLimit(status)?.windowMs,
  };
}
