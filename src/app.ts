/**
 * Composition root: wires settings, config source, store, limiter, service and servers. Building
 * the app is separate from listening so tests build it, then listen on port 0.
 */
import { systemClock, type Clock } from './clock.js';
import { loadSnapshot } from './config/load.js';
import type { ConfigSnapshot } from './config/types.js';
import { watchConfig } from './config/watch.js';
import { formatConfigProblem, ConfigError } from './errors.js';
import { createLimiter } from './limiter/limiter.js';
import type { Logger } from './logging/logger.js';
import { formatHostPort, logStartup } from './logging/startup.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import { createHealthSignal, type HealthSignal } from './service/health.js';
import { createRateLimitService, type RateLimitService } from './service/rate-limit-service.js';
import type { Settings } from './settings.js';
import { SLUICE_VERSION } from './version.js';
import type { CounterStore } from './stores/counter-store.js';
import { createStore } from './stores/index.js';
import { createServiceServer } from './transport/service-server.js';
import { createDebugServer } from './transport/http/debug.js';
import { createConfigStatus } from './transport/http/console/config-status.js';
import { createDebugConsole } from './transport/http/console/console.js';
import { createHttpServer } from './transport/http/server.js';
import { createServerTls, readTlsMaterial } from './transport/tls.js';

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
}

/** A built sluice instance. */
export interface App {
  /** Start the servers. */
  start(): Promise<AppAddresses>;
  /** Stop accepting, let in-flight calls finish (up to SHUTDOWN_GRACE_MS), release everything. */
  close(): Promise<void>;
  /** The config snapshot currently serving. */
  snapshot(): ConfigSnapshot;
  /** The transport-independent service (for in-process callers and benchmarks). */
  readonly service: RateLimitService;
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
  };
  // The store is created after the first load; the gauge reads it once it exists.
  const storeRef: { current?: CounterStore } = {};
  const metrics = createMetrics({
    nearLimitRatio: settings.nearLimitRatio,
    storeSize: () => storeRef.current?.size() ?? 0,
  });

  const logLoaded = (snapshot: ConfigSnapshot, msg: string): void => {
    configLog.info({ files: snapshot.files, domains: [...snapshot.domains.keys()] }, msg);
    if (snapshot.warnings.length > 0) {
      configLog.warn(
        { warnings: snapshot.warnings.map(formatConfigProblem) },
        'rate limit config warnings',
      );
    }
  };

  // What the debug console shows of the loads (docs/operations-console.md).
  const configStatus = createConfigStatus(clock);
  // The watcher is in place (baseline recorded, fs watchers started) before the first load, so a
  // change made during that load is seen; a snapshot it builds is never older than the first's.
  let current: ConfigSnapshot | undefined;
  const watcher =
    options.watch === false
      ? undefined
      : watchConfig({
          paths: settings.config.paths,
          mergeDomainConfigs: settings.mergeDomainConfigs,
          defaultAlgorithm: settings.defaultAlgorithm,
          pollIntervalMs: options.watchPollIntervalMs,
          onSnapshot(snapshot) {
            metrics.service.configLoadSuccess++;
            current = snapshot;
            configStatus.onSnapshot(snapshot);
            logLoaded(snapshot, 'rate limit config reloaded');
          },
          onError(error) {
            metrics.service.configLoadError++;
            configStatus.onError(error);
            const problems =
              error instanceof ConfigError
                ? error.problems.map(formatConfigProblem)
                : [error.message];
            configLog.error(
              { problems },
              'rate limit config reload failed; the previous config keeps serving',
            );
          },
        });
  try {
    await watcher?.ready;
    const initial = await loadSnapshot(settings.config.paths, loadOptions);
    metrics.service.configLoadSuccess++;
    current ??= initial;
    configStatus.onSnapshot(current);
  } catch (err) {
    watcher?.close();
    throw err;
  }
  logLoaded(current, `rate limit config loaded from ${settings.config.origin} source`);
  // Set from here on: by the first load or by a newer reload.
  const serving = (): ConfigSnapshot => current!;

  let store: CounterStore;
  try {
    store = await createStore(settings, { clock, logger, metrics: metrics.store });
  } catch (err) {
    watcher?.close();
    throw err;
  }
  const limiter = createLimiter({
    store,
    shadowMode: settings.shadowMode,
    quotaMode: settings.quotaMode,
    responseDynamicMetadata: settings.responseDynamicMetadata,
  });
  const service = createRateLimitService({
    limiter,
    config: serving,
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
  });
  storeRef.current = store;
  const health = createHealthSignal({
    configLoaded: () => current !== undefined,
    storeHealthy: () => store.healthy(),
  });
  const httpServer = createHttpServer({
    service,
    health,
    metrics,
    maxBodyBytes: settings.grpcMaxReceiveMessageBytes,
    logger: logger.child({ module: 'http' }),
  });
  const debugLog = logger.child({ module: 'debug' });
  const debugConsole = createDebugConsole({
    snapshot: serving,
    store,
    metrics,
    health,
    configStatus,
    clock,
    logger: debugLog,
    storeInfo: { backend: settings.backendType, failureMode: settings.storeFailureMode },
    shadowMode: settings.shadowMode,
    quotaMode: settings.quotaMode,
    resetEnabled: settings.debugConsoleResetEnabled,
    sampleIntervalMs: options.consoleSampleIntervalMs,
  });
  const debugServer = createDebugServer({
    snapshot: serving,
    store,
    health,
    metrics,
    logger: debugLog,
    console: debugConsole,
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
  });

  let closing: Promise<void> | undefined;
  return {
    service,
    store,
    metrics,
    health,
    snapshot: serving,
    async start() {
      const grpcPort = await grpcServer.listen(settings.grpcHost, settings.grpcPort);
      const httpPort = await httpServer.listen(settings.httpHost, settings.httpPort);
      const debugPort = await debugServer.listen(settings.debugHost, settings.debugPort);
      // Printed at every LOG_LEVEL; a new listener adds its address to `listeners`.
      logStartup(logger, {
        version: SLUICE_VERSION,
        listeners: {
          grpc: formatHostPort(settings.grpcHost, grpcPort),
          http: formatHostPort(settings.httpHost, httpPort),
          debug: formatHostPort(settings.debugHost, debugPort),
        },
        store: settings.backendType,
        grpcTls: describeTls(settings),
        configOrigin: settings.config.origin,
        snapshot: serving(),
      });
      return { grpcPort, httpPort, debugPort };
    },
    close() {
      closing ??= (async () => {
        // Health fails first (HTTP and gRPC), so probes see the drain before listeners go.
        health.drain();
        if (settings.shutdownDelayMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, settings.shutdownDelayMs));
        }
        watcher?.close();
        tls?.close();
        debugConsole.close();
        await Promise.all([
          grpcServer.close(settings.shutdownGraceMs),
          httpServer.close(settings.shutdownGraceMs),
          debugServer.close(settings.shutdownGraceMs),
        ]);
        await store.close();
      })();
      return closing;
    },
  };
}

/** How the start-up line names the gRPC port's TLS mode; `undefined` for plaintext. */
function describeTls(settings: Settings): string | undefined {
  const tls = settings.grpcTls;
  if (tls === undefined) return undefined;
  if (tls.clientCaFile === undefined) return 'tls';
  return tls.clientSan === undefined ? 'mtls' : `mtls, client SAN ${tls.clientSan}`;
}
