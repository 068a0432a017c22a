/**
 * Rendering `/metrics` without letting scrapes starve the calls (issue 31): one render shared by
 * concurrent scrapers, paced by its own cost, yielding to I/O between metrics. Used by each
 * process's metrics (metrics.ts) and by the primary's sum over workers (cluster.ts).
 */
import { setImmediate as yieldToIo } from 'node:timers/promises';
import type { Registry } from 'prom-client';

/**
 * After a render of `d` ms, the next starts no sooner than this many times `d` after it ended:
 * renders then use at most 1 / (1 + ratio) of the process (20%), however many scrape.
 */
export const RENDER_PAUSE_RATIO = 4;

/**
 * `render` made safe to call from any number of scrapers: callers that arrive while a render runs
 * (or waits its turn) share it, and a render starts at the earliest {@link RENDER_PAUSE_RATIO}
 * times the previous one's duration after that one ended, so a scrape loop cannot take the event
 * loop from the calls. No answer is older than its question: a caller gets a render that was
 * running when it asked, or one that starts after. `waitedMs` gives how long the last render
 * waited on something else (not counted as its cost; default 0).
 */
export function pacedRender(
  render: () => Promise<string>,
  now: () => number,
  waitedMs: () => number = () => 0,
): () => Promise<string> {
  let running: Promise<string> | undefined;
  let nextStart = -Infinity;
  const run = async (wait: number): Promise<string> => {
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const started = now();
    try {
      return await render();
    } finally {
      const ended = now();
      // Time the render spent waiting on others (workers' reports) is not its cost.
      const busy = Math.max(0, ended - started - waitedMs());
      nextStart = ended + RENDER_PAUSE_RATIO * busy;
      running = undefined;
    }
  };
  return () => {
    running ??= run(nextStart - now());
    return running;
  };
}

/**
 * Every metric of `registry` in the Prometheus text format, each on its own (one that fails is
 * left out and `onError` called; the others are served), yielding to I/O between metrics so a
 * large render does not hold the calls back for its whole length.
 */
export async function renderEach(registry: Registry, onError: () => void): Promise<string> {
  const parts: string[] = [];
  for (const metric of registry.getMetricsAsArray()) {
    try {
      parts.push(await registry.getSingleMetricAsString(metric.name));
    } catch {
      onError();
    }
    await yieldToIo();
  }
  return `${parts.join('\n\n')}\n`;
}
