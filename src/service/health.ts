/**
 * One health signal for every transport: HTTP `/healthcheck` and `grpc.health.v1.Health` both
 * read it (docs/operations-http.md). Serving means: a config is loaded, the store says it is
 * healthy, and the process is not draining. State is computed on read, so a store that goes down
 * is seen at the next probe; {@link HealthSignal.watch} polls for transports that push changes.
 */

/** Options for {@link createHealthSignal}. */
export interface HealthSignalOptions {
  /** Whether a config snapshot is serving. */
  readonly configLoaded: () => boolean;
  /** Whether the counter store can answer (`CounterStore.healthy()`). */
  readonly storeHealthy: () => boolean;
}

/** The health of this instance. */
export interface HealthSignal {
  /** True when a config is loaded, the store is healthy and the process is not draining. */
  serving(): boolean;
  /** Why the instance is not serving (`config`, `store`, `draining`), empty when serving. */
  reasons(): string[];
  /** Mark the process as draining (shutdown started); irreversible. */
  drain(): void;
  /**
   * Call `listener` with the serving state now and on every change (checked every `intervalMs`,
   * default 1000, by an unref'd timer, and at once on {@link drain}). Returns a stop function.
   */
  watch(listener: (serving: boolean) => void, intervalMs?: number): () => void;
}

/** Create the signal. */
export function createHealthSignal(options: HealthSignalOptions): HealthSignal {
  let draining = false;
  const listeners = new Set<() => void>();
  const reasons = (): string[] => {
    const out: string[] = [];
    if (!options.configLoaded()) out.push('config');
    let storeOk: boolean;
    try {
      storeOk = options.storeHealthy();
    } catch {
      storeOk = false;
    }
    if (!storeOk) out.push('store');
    if (draining) out.push('draining');
    return out;
  };
  const serving = (): boolean => reasons().length === 0;
  return {
    serving,
    reasons,
    drain() {
      draining = true;
      for (const check of listeners) check();
    },
    watch(listener, intervalMs = 1000) {
      let last = serving();
      listener(last);
      const check = (): void => {
        const now = serving();
        if (now !== last) {
          last = now;
          listener(now);
        }
      };
      listeners.add(check);
      const timer = setInterval(check, intervalMs);
      timer.unref();
      return () => {
        clearInterval(timer);
        listeners.delete(check);
      };
    },
  };
}
