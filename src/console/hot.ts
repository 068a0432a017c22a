/**
 * The "hot" panel (`/api/hot`): the busiest and the limited counters, each with the rule it
 * counts for (its key decoded, limiter/keys.ts), and the rules with the most over-limit hits.
 */
import type { Clock } from '../clock.js';
import type { ConfigSnapshot } from '../config/types.js';
import { decodeCounterKey } from '../limiter/keys.js';
import type { Metrics } from '../metrics/metrics.js';
import type { CounterSnapshot, CounterStore } from '../stores/counter-store.js';
import { send } from '../transport/http/server.js';
import { cut, JSON_TYPE, type ConsoleEndpoint } from './http.js';

/** Default and largest `n` of `/api/hot?n=`. */
const HOT_DEFAULT = 20;
const HOT_MAX = 200;
/**
 * Most bytes of counter rows in one answer: past it the lists stop (`truncated`). Request values
 * are up to 4096 characters, and a counter key holds every entry of its descriptor, so n rows
 * alone could be megabytes.
 */
const HOT_MAX_ROW_BYTES = 192 * 1024;
/** How long an answer is reused for the same `n`, ms (the page polls every 2 s). */
const HOT_CACHE_MS = 1_000;
/** Longest counter key given whole (it is what a reset by key names); longer ones are cut. */
const KEY_MAX_CHARS = 1_024;
/** Most entries shown per counter. */
const ENTRIES_MAX = 16;

/** A rule with over-limit hits (labels as the reference's Prometheus mapping gives them). */
interface OverLimitRule {
  readonly domain: string;
  readonly key1: string;
  readonly key2: string;
  readonly overLimit: number;
}

/** What the panel reads. */
export interface HotSources {
  readonly snapshot: () => ConfigSnapshot;
  readonly store: CounterStore;
  readonly metrics: Metrics;
  readonly clock: Clock;
}

/** One counter as the panel shows it: long values cut, at most {@link ENTRIES_MAX} entries. */
function hotRow(current: ConfigSnapshot, row: CounterSnapshot): unknown {
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
}

/** The rules with the most over-limit hits since the start (the reference's over_limit). */
async function overLimitRules(metrics: Metrics, n: number): Promise<OverLimitRule[]> {
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
}

/** The `/api/hot` endpoint. */
export function hotPanel(sources: HotSources): ConsoleEndpoint {
  const { snapshot, store, metrics, clock } = sources;
  /** Recent answers by n (at most a few kept). */
  const answers = new Map<number, { at: number; body: string }>();

  const hot = async (n: number): Promise<unknown> => {
    const current = snapshot();
    const rules = await overLimitRules(metrics, n);
    if (store.top === undefined) return { listsCounters: false, busiest: [], limited: [], rules };
    // Counters with no room left are "limited now"; a wider scan finds them among the busiest.
    const rows = store.top(Math.min(HOT_MAX * 5, n * 5));
    let budget = HOT_MAX_ROW_BYTES;
    let truncated = false;
    const show = (picked: readonly CounterSnapshot[]): unknown[] => {
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
    return { listsCounters: true, size: store.size(), busiest, limited, truncated, rules };
  };

  return {
    path: '/api/hot',
    help: `console: busiest and limited counters, most limited rules (?n=N, default ${HOT_DEFAULT}, at most ${HOT_MAX}; JSON)`,
    route: async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://debug');
      const asked = Number(url.searchParams.get('n') ?? HOT_DEFAULT);
      const n = Number.isInteger(asked) && asked > 0 ? Math.min(asked, HOT_MAX) : HOT_DEFAULT;
      // Pollers (the page, or a loop) share one answer per n and second: each costs a scan
      // of the store and a read of every rule's counters, off the calls' event loop time.
      const at = clock();
      let answer = answers.get(n);
      if (answer === undefined || at - answer.at >= HOT_CACHE_MS || at < answer.at) {
        answer = { at, body: JSON.stringify(await hot(n)) };
        answers.delete(n);
        answers.set(n, answer);
        if (answers.size > 4) answers.delete(answers.keys().next().value!);
      }
      res.setHeader('Cache-Control', 'no-store');
      send(res, 200, JSON_TYPE, answer.body);
    },
  };
}
