/**
 * Worker processes (`WORKERS`, docs/operations.md "Workers"): with the Redis store, `sluice serve`
 * forks that many workers with node:cluster. Each worker is a whole sluice (createApp) on the same
 * gRPC, HTTP and debug ports, which the primary shares among them; the counters live in Redis, so
 * every guarantee holds whichever worker answers. The primary serves nothing itself:
 *
 * - `/metrics` (HTTP and debug ports) answers for the whole service: the worker that gets the
 *   scrape asks the primary, which collects every worker's report and sums them
 *   (src/metrics/cluster.ts: one series cap for the service, a dead worker's counts kept,
 *   concurrent scrapes sharing one collection);
 * - each worker watches the config and TLS files itself, so a reload reaches every worker;
 * - SIGTERM or SIGINT to the primary drains every worker (each finishes its in-flight calls, as a
 *   single process does) and the primary exits when all have; a second signal ends them at once;
 * - a worker that dies is replaced; one that fails while starting (bad rules, a busy port) stops
 *   the whole service with its error, as a single process would; a connection the primary was
 *   handing to it when it died is closed, not held (see {@link trackHandoffs});
 * - worker 1 writes the start-up line, with `workers: N`.
 */
import type { ChildProcess } from 'node:child_process';
import cluster, { type Worker } from 'node:cluster';
import { createLogLimiter } from './logging/limited.js';
import type { Logger } from './logging/logger.js';
import { onShutdownSignals, REPEATED_SIGNAL, type SignalKind } from './shutdown-signals.js';
import { createClusterMetrics, type ClusterMetrics } from './metrics/cluster.js';
import type { Metrics, MetricsReport } from './metrics/metrics.js';

/** A worker asks the primary for the whole service's metrics. */
const METRICS_REQUEST = 'sluice:metrics';
/** The primary's answer to {@link METRICS_REQUEST}. */
const METRICS_REPLY = 'sluice:metrics-reply';
/** The primary asks a worker for its {@link MetricsReport}. */
const COLLECT = 'sluice:metrics-collect';
/** A worker's answer to {@link COLLECT}. */
const REPORT = 'sluice:metrics-report';
/** A worker is listening. */
const READY = 'sluice:ready';
/** The primary tells a worker to drain and exit. */
const SHUTDOWN = 'sluice:shutdown';

/** Pause before a dead worker is replaced, ms (so a crash loop does not spin). */
const RESPAWN_DELAY_MS = 1_000;

/**
 * How long the primary waits for a worker's report, ms; past it the worker's last report is
 * summed instead (a busy or stopped worker delays a scrape this long at most, half of
 * Prometheus's default scrape timeout).
 */
const COLLECT_TIMEOUT_MS = 5_000;

interface Message {
  readonly type?: string;
  readonly id?: number;
  readonly text?: string;
  readonly error?: string;
  readonly report?: MetricsReport;
}

/** Whether this process is a worker forked by {@link runPrimary}. */
export function isWorker(): boolean {
  return cluster.isWorker;
}

/** This worker's number, from 1 (the primary and a single process: 1). */
export function workerNumber(): number {
  return Number(process.env.SLUICE_WORKER ?? 1);
}

/**
 * In a worker: what `/metrics` renders, the sum over every worker (the primary collects each
 * one's `metrics.report()`). Call once, before serving.
 */
export function workerMetricsRender(metrics: Metrics): () => Promise<string> {
  let next = 0;
  const pending = new Map<number, { resolve(text: string): void; reject(e: Error): void }>();
  process.on('message', (message: Message) => {
    if (message?.type === COLLECT && message.id !== undefined) {
      const id = message.id;
      metrics
        .report()
        .then((report) => process.send?.({ type: REPORT, id, report }))
        // The primary is gone (the channel closed): nobody to report to, and we drain anyway.
        .catch(() => {});
      return;
    }
    if (message?.type !== METRICS_REPLY || message.id === undefined) return;
    const waiter = pending.get(message.id);
    if (waiter === undefined) return;
    pending.delete(message.id);
    if (message.error !== undefined) waiter.reject(new Error(message.error));
    else waiter.resolve(message.text ?? '');
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = ++next;
      pending.set(id, { resolve, reject });
      process.send!({ type: METRICS_REQUEST, id });
    });
}

/** In a worker: tell the primary it is listening. */
export function reportReady(): void {
  process.send?.({ type: READY });
}

/** In a worker: call `stop` when the primary says to shut down. */
export function onShutdown(stop: () => void): void {
  process.on('message', (message: Message) => {
    if (message?.type === SHUTDOWN) stop();
  });
  // The primary going away (killed) leaves no one to drain us: drain on our own.
  process.on('disconnect', stop);
}

/** A connection node:cluster's primary accepted and passes to a worker (a libuv TCP handle). */
interface HandedConnection {
  close(): void;
}

/**
 * node:cluster's round-robin scheduling (the default on Linux) accepts every connection in the
 * primary and sends it to a worker with an internal `newconn` message; the primary closes its copy
 * only when the worker acknowledges it. A worker killed between the two never acknowledges, and
 * node leaves the primary's copy open for good: the client waits for an answer that cannot come
 * and the primary leaks the descriptor (issue 31). This watches those messages on the worker's
 * channel and, once the worker has exited, closes every connection still unacknowledged, so the
 * client sees the connection end, as it does for the connections the dead worker had accepted.
 * The messages are node's own; if their form ever changes, nothing matches and nothing is done.
 */
function trackHandoffs(worker: Worker): void {
  const child = worker.process as ChildProcess & {
    send(message: unknown, handle?: unknown, ...rest: unknown[]): boolean;
  };
  const unacknowledged = new Map<number, HandedConnection>();
  const send = child.send.bind(child);
  child.send = (message: unknown, handle?: unknown, ...rest: unknown[]): boolean => {
    const m = message as { cmd?: unknown; act?: unknown; seq?: unknown } | null;
    if (
      m?.cmd === 'NODE_CLUSTER' &&
      m.act === 'newconn' &&
      typeof m.seq === 'number' &&
      typeof (handle as Partial<HandedConnection> | undefined)?.close === 'function'
    ) {
      unacknowledged.set(m.seq, handle as HandedConnection);
    }
    return send(message, handle, ...rest);
  };
  child.on('internalMessage', (message: { cmd?: unknown; ack?: unknown } | null) => {
    if (message?.cmd === 'NODE_CLUSTER' && typeof message.ack === 'number') {
      unacknowledged.delete(message.ack);
    }
  });
  // On 'exit', not 'disconnect': node postpones the channel's 'disconnect' while a sent handle
  // waits for the dead worker's receipt, that is, for ever in this very case. Once the worker is
  // gone the primary's copy has no use, whether the worker had taken the connection or not (a
  // late ack makes node close it again, which does nothing).
  child.once('exit', () => {
    for (const handle of unacknowledged.values()) handle.close();
    unacknowledged.clear();
  });
}

/**
 * The primary: fork `workers` workers (this same program), serve them metrics, replace any that
 * die, and drain them all on SIGTERM/SIGINT. Resolves to the exit code.
 */
export function runPrimary(
  workers: number,
  logger: Logger,
  series: PrimaryMetricsOptions = {},
): Promise<number> {
  /** Workers that said they listen: the ones asked for metrics reports. */
  const serving = new Set<Worker>();
  const metrics = createPrimaryMetrics(series, logger, () => [...serving]);
  let stopping = false;
  let ready = 0;
  let started = false;
  const numbers = new Map<Worker, number>();

  return new Promise<number>((resolve) => {
    let exitCode = 0;
    const fork = (n: number): void => {
      const worker = cluster.fork({ SLUICE_WORKER: String(n), SLUICE_WORKERS: String(workers) });
      numbers.set(worker, n);
      metrics.cluster.join(worker.id);
      trackHandoffs(worker);
      worker.on('message', (message: Message) => {
        if (message?.type === READY) {
          serving.add(worker);
          if (!started && ++ready === workers) started = true;
          // A worker still starting when the shutdown was sent had no listener for it yet (a
          // replacement, say): tell it again now that it has one.
          if (stopping) send(worker, { type: SHUTDOWN });
        } else if (message?.type === METRICS_REQUEST) {
          metrics.cluster.render().then(
            (text) => send(worker, { type: METRICS_REPLY, id: message.id, text }),
            (error: Error) =>
              send(worker, { type: METRICS_REPLY, id: message.id, error: error.message }),
          );
        } else if (message?.type === REPORT && message.report !== undefined) {
          metrics.reported(worker, message.id, message.report);
        }
      });
    };
    const send = (worker: Worker, message: object): void => {
      if (worker.isConnected()) worker.send(message);
    };
    const living = (): Worker[] => Object.values(cluster.workers ?? {}).filter((w) => w != null);
    const finish = (): void => {
      if (living().length === 0) resolve(exitCode);
    };

    cluster.on('exit', (worker, code, signal) => {
      const n = numbers.get(worker) ?? 0;
      numbers.delete(worker);
      serving.delete(worker);
      metrics.cluster.retire(worker.id);
      if (stopping) {
        if (code !== 0) exitCode = 1;
        finish();
        return;
      }
      if (!started) {
        // A worker could not start (its error is on stderr already): stop like one process.
        logger.error({ worker: n, code, signal }, 'a worker failed to start; stopping');
        exitCode = 1;
        stopAll();
        return;
      }
      logger.error({ worker: n, code, signal }, 'a worker exited; starting another');
      setTimeout(() => {
        if (!stopping) fork(n);
      }, RESPAWN_DELAY_MS).unref();
    });

    const stopAll = (): void => {
      stopping = true;
      for (const worker of living()) send(worker, { type: SHUTDOWN });
      finish();
    };
    const onSignal = (signal: NodeJS.Signals, kind: SignalKind): void => {
      if (kind === 'repeat') {
        logger.info({ signal }, REPEATED_SIGNAL);
        return;
      }
      if (stopping) {
        logger.warn({ signal }, 'second signal: ending every worker now');
        for (const worker of living()) worker.process.kill('SIGKILL');
        resolve(1);
        return;
      }
      logger.info({ signal, workers: living().length }, 'shutting down: draining every worker');
      stopAll();
    };
    onShutdownSignals(onSignal);
    for (let n = 1; n <= workers; n++) fork(n);
  });
}

/** The series caps the primary applies to the whole service (`METRICS_MAX_SERIES*`). */
export interface PrimaryMetricsOptions {
  /** `METRICS_MAX_SERIES_PER_RULE`. */
  readonly maxSeriesPerRule?: number;
  /** `METRICS_MAX_SERIES`. */
  readonly maxSeries?: number;
}

/**
 * The primary's side of `/metrics`: the sum over workers, and the collection that feeds it (ask
 * every living worker for a report, wait at most {@link COLLECT_TIMEOUT_MS}).
 */
function createPrimaryMetrics(
  options: PrimaryMetricsOptions,
  logger: Logger,
  serving: () => Worker[],
): {
  cluster: ClusterMetrics;
  reported(worker: Worker, id: number | undefined, report: MetricsReport): void;
} {
  let next = 0;
  /** Collection id -> the workers still to answer, and what to call when none is left. */
  const waiting = new Map<number, { workers: Set<Worker>; done(): void }>();
  const logLimit = createLogLimiter();
  const collect = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const id = ++next;
      // A worker still starting has no listener for the question yet: it is asked once ready.
      const workers = new Set(serving().filter((w) => w.isConnected()));
      const done = (): void => {
        clearTimeout(timer);
        waiting.delete(id);
        resolve();
      };
      const timer = setTimeout(() => {
        if (logLimit('slow') !== undefined) {
          logger.warn(
            { workers: workers.size, timeoutMs: COLLECT_TIMEOUT_MS },
            '/metrics: a worker did not report in time; its last report is summed',
          );
        }
        done();
      }, COLLECT_TIMEOUT_MS);
      if (workers.size === 0) {
        done();
        return;
      }
      waiting.set(id, { workers, done });
      for (const worker of workers) worker.send({ type: COLLECT, id });
    });
  const metricsCluster = createClusterMetrics({ ...options, collect });
  return {
    cluster: metricsCluster,
    reported(worker, id, report) {
      metricsCluster.report(worker.id, report);
      const collection = id === undefined ? undefined : waiting.get(id);
      if (collection === undefined) return;
      collection.workers.delete(worker);
      if (collection.workers.size === 0) collection.done();
    },
  };
}
