/**
 * Composition root: wires settings, config source, store, limiter, service and servers. Building
 * the app is separate from listening so tests build it, then listen on port 0.
 */
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from './clock.js';
import {
  createFileSource,
  createServingConfig,
  type RuleSource,
  type RuleSourceListener,
} from './config/source.js';
import type { ConfigSnapshot } from './config/types.js';
import { createLimiter } from './limiter/limiter.js';
import type { Logger } from './logging/logger.js';
import { formatHostPort, logStartup } from './logging/startup.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { createLatencyReservoir, createStatsdSink, type StatsdSink } from './metrics/statsd.js';
import { createConfigStatus } from './console/config-status.js';
import { createDebugConsole } from './console/console.js';
import { createHealthSignal, type HealthSignal } from './service/health.js';
import {
  createRateLimitService,
  type Explainer,
  type RateLimitService,
} from './service/rate-limit-service.js';
import { storeOptions, type Settings } from './settings.js';
import { SLUICE_VERSION } from './version.js';
import type { CounterStore } from './stores/counter-store.js';
import { createStore } from './stores/index.js';
import { createServiceServer } from './transport/service-server.js';
import { createRedisDemandExchange } from './rlqs/demand-exchange.js';
import { QuotaService } from './rlqs/quota-service.js';
import { createRedisClient } from './stores/redis/connect.js';
import { createDebugServer } from './transport/http/debug.js';
import { createHostCheck } from './transport/http/host-check.js';
import { createHttpServer } from './transport/http/server.js';
import { createPrometheusServer } from './transport/http/prometheus.js';
import { createRequestBudget } from './transport/limits.js';
import { createServerTls, readTlsMaterial } from './transport/tls.js';
import { createTracing } from './tracing/tracing.js';
import { createXdsSource } from './transport/xds/source.js';
import { SluiceError } from './errors.js';

/** Options for {@link createApp}. */
export interface AppOptions {
  /** Validated settings. */
  readonly settings: Settings;
  /** Root logger. */
  readonly logger: Logger;
  /** Time source for the memory store; default the system clock. */
  readonly clock?: Clock;
  /** Watch the config files and reload on change (default true). */
  readonly watch?: boolean;
  /**
   * The watcher's safety-net poll, in ms (default 5000; 0 turns it off, which tests use to show
   * that file system events alone apply a change).
   */
  readonly watchPollIntervalMs?: number;
  /**
   * A worker process (src/workers.ts): given the app's own metrics, what `/metrics` renders
   * instead of it (the whole service's sum). `undefined`: this process's metrics.
   */
  readonly metricsRender?: (metrics: Metrics) => () => Promise<string>;
  /** Server processes of the service (the start-up line's `workers`; default 1). */
  readonly workers?: number;
  /** Whether `start()` writes the start-up line (default true; workers other than 1: false). */
  readonly logStartup?: boolean;
  /** Time between two samples of the debug console's charts, ms (default 5000). */
  readonly consoleSampleIntervalMs?: number;
}

/** Where the app listens once started. */
export interface AppAddresses {
  /** The bound gRPC port (useful when the setting was 0). */
  readonly grpcPort: number;
  /** The bound HTTP port (`/healthcheck`, `/json`, `/metrics`). */
  readonly httpPort: number;
  /** The bound debug port (`/rlconfig`, `/counters`, ...). */
  readonly debugPort: number;
  /** The bound `PROMETHEUS_ADDR` port; `undefined` unless `USE_PROMETHEUS=true`. */
  readonly prometheusPort: number | undefined;
}

/** A built sluice instance. */
export interface App {
  /** Start the servers. */
  start(): Promise<AppAddresses>;
  /** Stop accepting, let in-flight calls finish (up to SHUTDOWN_GRACE_MS), release everything. */
  close(): Promise<void>;
  /** The config snapshot currently serving. */
  snapshot(): ConfigSnapshot;
  /** The Rate Limit Quota Service: its buckets and shares (docs/rlqs.md). */
  readonly quota: QuotaService;
  /** The transport-independent service (for in-process callers and benchmarks). */
  readonly service: RateLimitService & Explainer;
  /** The counter store. */
  readonly store: CounterStore;
  /** The metrics `/metrics` renders. */
  readonly metrics: Metrics;
  /** The health every transport reports. */
  readonly health: HealthSignal;
}

/**
 * Build the app: load and validate the rules (a ConfigError here stops the start), create the
 * store, limiter and service. Nothing listens until `start()`.
 */
// eslint-disable-next-line max-lines-per-function -- the composition root stays one linear function (CONTRIBUTING.md, "Code shape")
export async function createApp(options: AppOptions): Promise<App> {
  const { settings, logger } = options;
  const clock = options.clock ?? systemClock;
  // Unreadable or invalid TLS files stop the start before anything else is set up.
  const tlsMaterial =
    settings.grpcTls === undefined ? undefined : await readTlsMaterial(settings.grpcTls);
  const configLog = logger.child({ module: 'config' });
  const loadOptions = {
    mergeDomainConfigs: settings.mergeDomainConfigs,
    defaultAlgorithm: settings.defaultAlgorithm,
    maxRulesPerFile: settings.configMaxRulesPerFile,
    maxRules: settings.configMaxRules,
    algorithmRefusal: settings.algorithmRefusal,
  };
  // The store is created after the first load; the gauge reads it once it exists.
  const storeRef: { current?: CounterStore } = {};
  const stats = settings.stats;
  const pushesStats = stats.sink === 'statsd' || stats.sink === 'dogstatsd';
  const latencies = pushesStats ? createLatencyReservoir() : undefined;
  // Bytes held by unfinished requests of the gRPC port and /json together.
  const requestBudget = createRequestBudget(settings.maxRequestBufferBytes);
  const local = createMetrics({
    nearLimitRatio: settings.nearLimitRatio,
    storeSize: () => storeRef.current?.size() ?? 0,
    maxSeriesPerRule: settings.metricsMaxSeriesPerRule,
    maxSeries: settings.metricsMaxSeries,
    latencyTap: latencies,
    latencyInMilliseconds: stats.sink === 'prometheus' && stats.responseTimeAsMilliseconds,
    requestBufferBytes: () => requestBudget.heldBytes,
    configDomains: () => serving.current().domains.size,
  });
  const metrics: Metrics =
    options.metricsRender === undefined
      ? local
      : { ...local, render: options.metricsRender(local) };

  for (const notice of settings.notices) logger.warn(notice);

  // What the debug console shows of the loads (docs/operations-console.md).
  const configStatus = createConfigStatus(clock);
  // The rules: from files (loaded now; an invalid set stops the start) or from an xDS server
  // (its first update is awaited by start(), unless FORCE_START_WITHOUT_INITIAL_CONFIG).
  const serving = createServingConfig({
    logger: configLog,
    counters: metrics.service,
    paths: settings.configType === 'GRPC_XDS_SOTW' ? undefined : settings.config.paths,
    origin: settings.configType === 'GRPC_XDS_SOTW' ? 'xds' : settings.config.origin,
  });
  const source: RuleSource =
    settings.configType === 'GRPC_XDS_SOTW' && settings.xds !== undefined
      ? await createXdsSource({
          ...loadOptions,
          xds: settings.xds,
          logger: logger.child({ module: 'xds' }),
        })
      : createFileSource({
          ...loadOptions,
          paths: settings.config.paths,
          watch: options.watch,
          pollIntervalMs: options.watchPollIntervalMs,
        });
  // Every load also goes to the console's status, next to the swap, count and log.
  const configListener: RuleSourceListener = {
    onSnapshot(snapshot) {
      serving.onSnapshot(snapshot);
      configStatus.onSnapshot(snapshot);
    },
    onError(error) {
      serving.onError(error);
      configStatus.onError(error);
    },
  };
  let firstUpdate: Promise<void> | undefined;
  if (source.kind === 'file') {
    await source.start(configListener);
  } else {
    firstUpdate = source.start(configListener);
  }
  const current = (): ConfigSnapshot => serving.current();

  let store: CounterStore;
  try {
    store = await createStore(storeOptions(settings), { clock, logger, metrics: metrics.store });
  } catch (err) {
    source.close();
    throw err;
  }
  // The SDK is loaded only when tracing is on; off, nothing below does any work for it.
  const tracing =
    settings.tracing === undefined
      ? undefined
      : await createTracing({
          settings: settings.tracing,
          logger: logger.child({ module: 'tracing' }),
          metrics: metrics.tracing,
        });
  const limiter = createLimiter({
    store:
      // Cached mode answers from local counters, so a call has no Redis work to show as a span.
      tracing !== undefined && settings.backendType === 'redis' && settings.redis?.mode !== 'cached'
        ? tracing.traceStore(store, settings.redis?.perSecond !== undefined)
        : store,
    shadowMode: settings.shadowMode,
    quotaMode: settings.quotaMode,
    responseDynamicMetadata: settings.responseDynamicMetadata,
  });
  const service = createRateLimitService({
    limiter,
    config: current,
    bounds: {
      maxDescriptors: settings.maxDescriptorsPerRequest,
      maxEntries: settings.maxEntriesPerDescriptor,
      maxEntryLength: settings.maxEntryLength,
    },
    logger: logger.child({ module: 'service' }),
    metrics,
    headers: settings.responseHeadersEnabled
      ? {
          format: settings.responseHeadersFormat,
          limitHeader: settings.limitHeader,
          remainingHeader: settings.remainingHeader,
          resetHeader: settings.resetHeader,
        }
      : undefined,
    problemJson: settings.problemJsonEnabled,
    clock,
    tracing,
  });
  storeRef.current = store;
  const health = createHealthSignal({
    // As the reference: the config counts for health only with
    // HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED, and then needs at least one domain.
    configLoaded: settings.healthyWithAtLeastOneConfigLoaded
      ? () => current().domains.size > 0
      : () => true,
    storeHealthy: () => store.healthy(),
  });
  const httpServer = createHttpServer({
    service,
    health,
    metrics,
    maxBodyBytes: settings.grpcMaxReceiveMessageBytes,
    requestTimeoutMs: settings.httpRequestTimeoutMs,
    budget: requestBudget,
    logger: logger.child({ module: 'http' }),
  });
  // With Redis, RLQS usage is shared between replicas (and WORKERS) on a client of its own.
  const redisOptions = storeOptions(settings).redis;
  const exchangeClient =
    redisOptions === undefined ? undefined : createRedisClient(redisOptions.main);
  exchangeClient?.on('error', () => {});
  const quota = new QuotaService({
    snapshot: current,
    clock,
    counters: metrics.rlqs,
    logger: logger.child({ module: 'rlqs' }),
    limits: settings.rlqs,
    exchange:
      exchangeClient === undefined || redisOptions === undefined
        ? undefined
        : createRedisDemandExchange({
            client: exchangeClient,
            keyPrefix: redisOptions.keyPrefix,
            replica: randomUUID(),
            ttlMs: 5_000,
            timeoutMs: redisOptions.main.timeoutMs,
          }),
  });
  const debugLog = logger.child({ module: 'debug' });
  const debugConsole = createDebugConsole({
    snapshot: current,
    service,
    store,
    metrics,
    health,
    configStatus,
    clock,
    logger: debugLog,
    storeInfo: { backend: settings.backendType, failureMode: settings.storeFailureMode },
    shadowMode: settings.shadowMode,
    resetEnabled: settings.debugConsoleResetEnabled,
    listenHost: settings.debugHost,
    resetToken: settings.debugConsoleResetToken,
    sampleIntervalMs: options.consoleSampleIntervalMs,
    quota,
  });
  const debugServer = createDebugServer({
    snapshot: current,
    store,
    health,
    metrics,
    logger: debugLog,
    console: debugConsole,
    hostCheck: createHostCheck(settings.debugHost, settings.debugAllowedHosts),
  });
  const tls =
    settings.grpcTls === undefined || tlsMaterial === undefined
      ? undefined
      : createServerTls({
          settings: settings.grpcTls,
          initial: tlsMaterial,
          logger: logger.child({ module: 'tls' }),
          metrics: metrics.tls,
        });
  const grpcServer = createServiceServer({
    kind: settings.grpcServer,
    service,
    logger: logger.child({ module: 'grpc' }),
    maxReceiveMessageBytes: settings.grpcMaxReceiveMessageBytes,
    health,
    tls,
    connections: settings.grpcConnections,
    traceHeaders: tracing !== undefined,
    limits: settings.grpcLimits,
    budget: requestBudget,
    metrics: metrics.transport,
    quota,
  });
  const prometheusServer =
    stats.sink === 'prometheus'
      ? createPrometheusServer({
          metrics,
          path: stats.prometheusPath,
          logger: logger.child({ module: 'prometheus' }),
        })
      : undefined;
  if (stats.sink === 'prometheus' && stats.prometheusMapperYaml !== undefined) {
    logger.warn(
      { file: stats.prometheusMapperYaml },
      'PROMETHEUS_MAPPER_YAML is not applied: sluice serves the names and labels of the ' +
        "reference's default mapping (docs/operations-metrics.md)",
    );
  }
  let statsdSink: StatsdSink | undefined;

  let closing: Promise<void> | undefined;
  let closed = (): void => {};
  const closedEarly = new Promise<void>((resolve) => (closed = resolve));
  return {
    service,
    store,
    metrics,
    health,
    snapshot: current,
    quota,
    async start() {
      if (firstUpdate !== undefined && !settings.forceStartWithoutInitialConfig) {
        // As the reference: no port opens before the xDS server's first update.
        configLog.info('waiting for the first rule set from the xDS server');
        await Promise.race([firstUpdate, closedEarly]);
        if (closing !== undefined) {
          throw new SluiceError('INTERNAL', 'closed before the first rule set arrived');
        }
      }
      const grpcPort = await grpcServer.listen(settings.grpcHost, settings.grpcPort);
      quota.start();
      const httpPort = await listenAs(
        'HTTP',
        'HOST/PORT or --host/--port',
        settings.httpHost,
        settings.httpPort,
        (host, port) => httpServer.listen(host, port),
      );
      const debugPort = await listenAs(
        'the debug server',
        'DEBUG_HOST/DEBUG_PORT or --debug-host/--debug-port',
        settings.debugHost,
        settings.debugPort,
        (host, port) => debugServer.listen(host, port),
      );
      const prometheusHost = stats.prometheusHost ?? '0.0.0.0';
      const prometheusPort =
        prometheusServer === undefined
          ? undefined
          : await listenAs(
              'the Prometheus listener',
              'PROMETHEUS_ADDR',
              prometheusHost,
              stats.prometheusPort,
              (host, port) => prometheusServer.listen(host, port),
            );
      if (pushesStats && latencies !== undefined) {
        statsdSink = createStatsdSink({
          metrics,
          latencies,
          host: stats.statsdHost,
          port: stats.statsdPort,
          // DogStatsD is UDP, as the reference's datadog-go client; STATSD_PROTOCOL is gostats'.
          protocol: stats.sink === 'dogstatsd' ? 'udp' : stats.statsdProtocol,
          flushIntervalMs: stats.flushIntervalMs,
          extraTags: stats.extraTags,
          dogstatsd: stats.sink === 'dogstatsd' ? { mogrifiers: stats.mogrifiers } : undefined,
          logger: logger.child({ module: 'statsd' }),
        });
      }
      // Printed at every LOG_LEVEL; a new listener adds its address to `listeners`.
      if (options.logStartup !== false)
        logStartup(logger, {
          workers: options.workers ?? 1,
          version: SLUICE_VERSION,
          listeners: {
            grpc: formatHostPort(settings.grpcHost, grpcPort),
            http: formatHostPort(settings.httpHost, httpPort),
            debug: formatHostPort(settings.debugHost, debugPort),
            ...(prometheusPort === undefined
              ? {}
              : { prometheus: formatHostPort(prometheusHost, prometheusPort) }),
          },
          store: settings.backendType,
          grpcTls: describeTls(settings),
          configOrigin: source.kind === 'xds' ? 'xds' : settings.config.origin,
          snapshot: current(),
        });
      return { grpcPort, httpPort, debugPort, prometheusPort };
    },
    close() {
      closed();
      closing ??= (async () => {
        // Health fails first (HTTP and gRPC), so probes see the drain before listeners go.
        health.drain();
        if (settings.shutdownDelayMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, settings.shutdownDelayMs));
        }
        source.close();
        tls?.close();
        debugConsole.close();
        await Promise.all([
          grpcServer.close(settings.shutdownGraceMs).finally(() => {
            quota.stop();
            exchangeClient?.disconnect();
          }),
          httpServer.close(settings.shutdownGraceMs),
          debugServer.close(settings.shutdownGraceMs),
          prometheusServer?.close(settings.shutdownGraceMs),
        ]);
        await store.close();
        // Last, so the final flush and export carry the calls that finished while draining.
        await Promise.all([statsdSink?.close(), tracing?.shutdown(5_000)]);
      })();
      return closing;
    },
  };
}

/**
 * Listen on `host:port` with `listen`; a bind failure (port in use, address not local, ...) is
 * rethrown naming the listener and the settings that move it, as the gRPC server's message does.
 */
async function listenAs(
  what: string,
  settingNames: string,
  host: string,
  port: number,
  listen: (host: string, port: number) => Promise<number>,
): Promise<number> {
  try {
    return await listen(host, port);
  } catch (err) {
    const failure = SluiceError.from(err);
    if (failure.code !== 'INVALID_SETTINGS') throw failure;
    const reason = failure.cause instanceof Error ? failure.cause.message : failure.message;
    throw new SluiceError(
      'INVALID_SETTINGS',
      `cannot listen on ${host}:${port} for ${what} (set ${settingNames}): ${reason}`,
      { cause: failure },
    );
  }
}

/** How the start-up line names the gRPC port's TLS mode; `undefined` for plaintext. */
function describeTls(settings: Settings): string | undefined {
  const tls = settings.grpcTls;
  if (tls === undefined) return undefined;
  if (tls.clientCaFile === undefined) return 'tls';
  return tls.clientSan === undefined ? 'mtls' : `mtls, client SAN ${tls.clientSan}`;
}
