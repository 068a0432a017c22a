/**
 * `BENCH_CONSOLE=1 npm run bench`: keep the debug console "open" on every sluice the bench starts,
 * polling what the page polls (`/api/now` and `/api/hot?n=10` every 2 s), so the throughput can be
 * compared with and without a console watching (docs/operations-console.md, "Cost").
 */

/** Whether the bench runs with a console poller (`BENCH_CONSOLE=1`). */
export const CONSOLE_POLLING = process.env['BENCH_CONSOLE'] === '1';

/** The page's polling period, ms. */
const PERIOD_MS = 2_000;

/** Poll the console of the sluice whose debug port is `debugPort`; returns the stop function. */
export function startConsolePoller(debugPort: number): () => void {
  process.stderr.write(`bench: console poller on debug port ${debugPort} (BENCH_CONSOLE=1)\n`);
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const base = `http://127.0.0.1:${debugPort}`;
  const poll = async (): Promise<void> => {
    try {
      await Promise.all(
        ['/api/now', '/api/hot?n=10'].map(async (p) => (await fetch(`${base}${p}`)).arrayBuffer()),
      );
    } catch {
      // Not listening yet, or stopping: the next tick tries again.
    }
    if (!stopped) timer = setTimeout(() => void poll(), PERIOD_MS);
  };
  void poll();
  return () => {
    stopped = true;
    if (timer !== undefined) clearTimeout(timer);
  };
}
