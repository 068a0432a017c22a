/**
 * Renders docs/algorithms.svg: how each counting algorithm admits the same burst-then-steady
 * traffic, computed by the real algorithm modules through the real memory store on a manual clock
 * (docs/algorithms.md, "The picture").
 *
 * Usage: `npm run docs:algorithms [-- OUT_SVG]`; default `docs/algorithms.svg`.
 * test/unit/algorithms/algorithms-chart.test.ts checks {@link simulate} against known admissions, so the
 * picture cannot silently stop reflecting the code.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ALGORITHMS, type Algorithm } from '../src/algorithms/index.js';
import { createManualClock } from '../src/clock.js';
import type { CounterSpec } from '../src/stores/counter-store.js';
import { createMemoryStore } from '../src/stores/memory/memory-store.js';
import { REPO_ROOT } from './dist.js';

/** The traffic and limit the picture shows. */
export interface Scenario {
  /** Hits per window (token bucket: refill per window; its burst is the same number). */
  readonly limit: number;
  /** Window length, ms. */
  readonly windowMs: number;
  /** Requests sent together at t = 0. */
  readonly burst: number;
  /** Gap between the steady requests that follow, ms. */
  readonly stepMs: number;
  /** Time of the last steady request, ms after t = 0. */
  readonly endMs: number;
  /**
   * Where t = 0 falls inside an epoch-aligned window, ms; the fixed window's boundaries are at
   * `windowMs - phaseMs`, `2 windowMs - phaseMs`, ... on the picture's time axis.
   */
  readonly phaseMs: number;
}

/**
 * 10 requests per 10 s; 30 requests at once at t = 0, then one every 500 ms up to t = 30 s.
 * t = 0 sits 5 s into an aligned window, so the fixed window's boundaries fall at 5 s, 15 s, 25 s.
 */
export const SCENARIO: Scenario = {
  limit: 10,
  windowMs: 10_000,
  burst: 30,
  stepMs: 500,
  endMs: 30_000,
  phaseMs: 5_000,
};

/** One request of the simulation. */
export interface Request {
  /** ms after t = 0. */
  readonly t: number;
  /** Whether the store admitted it. */
  readonly admitted: boolean;
}

/** An epoch instant aligned to every window length used here (a multiple of 60 s). */
const EPOCH_ALIGNED_MS = 1_700_000_040_000;

/**
 * Sends the scenario's traffic, one hit per request, to a fresh memory store (manual clock, no
 * background sweep) counting with `algorithm`, and returns every request with its decision.
 */
export async function simulate(algorithm: Algorithm, scenario = SCENARIO): Promise<Request[]> {
  const startMs = EPOCH_ALIGNED_MS + scenario.phaseMs;
  const clock = createManualClock(startMs);
  const store = createMemoryStore({ clock: clock.now, sweepIntervalMs: 0 });
  const spec: CounterSpec = {
    key: `chart|${algorithm}`,
    algorithm,
    limit: scenario.limit,
    windowMs: scenario.windowMs,
    burst: scenario.limit,
    hits: 1,
    mode: 'enforced',
  };
  const times: number[] = [];
  for (let i = 0; i < scenario.burst; i++) times.push(0);
  for (let t = scenario.stepMs; t <= scenario.endMs; t += scenario.stepMs) times.push(t);
  const out: Request[] = [];
  try {
    for (const t of times) {
      clock.set(startMs + t);
      const { admitted } = await store.apply([spec]);
      out.push({ t, admitted });
    }
  } finally {
    await store.close();
  }
  return out;
}

/** Times (ms after t = 0) of the admitted requests, one entry per admitted request. */
export function admittedTimes(requests: readonly Request[]): number[] {
  return requests.filter((r) => r.admitted).map((r) => r.t);
}

/** Most admitted requests in any half-open interval of length `windowMs`. */
export function maxInAnyWindow(times: readonly number[], windowMs: number): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < times.length; hi++) {
    while (times[hi]! - times[lo]! >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

const LABELS: Readonly<Record<Algorithm, string>> = {
  sliding_window: 'sliding_window (default)',
  fixed_window: 'fixed_window (reference)',
  token_bucket: 'token_bucket (burst 10)',
  sliding_log: 'sliding_log (exact)',
};

const COLORS: Readonly<Record<Algorithm, string>> = {
  sliding_window: '#1f77b4',
  fixed_window: '#d62728',
  token_bucket: '#2ca02c',
  sliding_log: '#9467bd',
};

/** The SVG: one row per algorithm; per row, the admitted count in the trailing window over time. */
export function renderChart(
  runs: ReadonlyArray<{ algorithm: Algorithm; requests: readonly Request[] }>,
  scenario = SCENARIO,
): string {
  const width = 820;
  const rowH = 120;
  const m = { left: 240, right: 40, top: 70, bottom: 50 };
  const plotW = width - m.left - m.right;
  const height = m.top + rowH * runs.length + m.bottom;
  const yTop = scenario.limit * 2;
  const tMax = scenario.endMs;
  const px = (t: number): number => m.left + (t / tMax) * plotW;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">Same traffic, four algorithms: limit ${scenario.limit} per ${scenario.windowMs / 1000} s</text>`,
    `<text x="${width / 2}" y="42" text-anchor="middle" fill="#444">${scenario.burst} requests at t = 0, then one every ${scenario.stepMs} ms. Line: admitted in the last ${scenario.windowMs / 1000} s; dashed: the limit; ticks: admitted requests.</text>`,
  );
  runs.forEach(({ algorithm, requests }, row) => {
    const top = m.top + row * rowH;
    const base = top + rowH - 30;
    const plotH = rowH - 40;
    const py = (v: number): number => base - (v / yTop) * plotH;
    const color = COLORS[algorithm];
    const admitted = admittedTimes(requests);
    const burstAdmitted = admitted.filter((t) => t === 0).length;
    const peak = maxInAnyWindow(admitted, scenario.windowMs);
    parts.push(
      `<text x="12" y="${top + 30}" font-weight="bold" fill="${color}">${LABELS[algorithm]}</text>`,
      `<text x="12" y="${top + 48}" fill="#444">${admitted.length} of ${requests.length} admitted</text>`,
      `<text x="12" y="${top + 64}" fill="#444">burst: ${burstAdmitted} of ${scenario.burst}; peak ${peak} in ${scenario.windowMs / 1000} s</text>`,
      `<line x1="${m.left}" y1="${base}" x2="${m.left + plotW}" y2="${base}" stroke="#999"/>`,
      `<line x1="${m.left}" y1="${py(scenario.limit)}" x2="${m.left + plotW}" y2="${py(scenario.limit)}" stroke="#999" stroke-dasharray="4 3"/>`,
      `<text x="${m.left + plotW + 4}" y="${py(scenario.limit) + 4}" fill="#999" font-size="10">${scenario.limit}</text>`,
    );
    if (algorithm === 'fixed_window') {
      for (let b = scenario.windowMs - scenario.phaseMs; b < tMax; b += scenario.windowMs) {
        parts.push(
          `<line x1="${px(b)}" y1="${top + 6}" x2="${px(b)}" y2="${base}" stroke="#d62728" stroke-opacity="0.35" stroke-dasharray="2 2"/>`,
        );
      }
    }
    // Admitted in the trailing window (t - W, t], sampled every 50 ms.
    const points: string[] = [];
    for (let t = 0; t <= tMax; t += 50) {
      const n = admitted.filter((a) => a <= t && a > t - scenario.windowMs).length;
      points.push(`${px(t).toFixed(1)},${py(Math.min(n, yTop)).toFixed(1)}`);
    }
    parts.push(
      `<polyline points="${points.join(' ')}" fill="none" stroke="${color}" stroke-width="2"/>`,
    );
    for (const t of new Set(admitted)) {
      parts.push(
        `<line x1="${px(t).toFixed(1)}" y1="${base + 3}" x2="${px(t).toFixed(1)}" y2="${base + 11}" stroke="${color}" stroke-width="2"/>`,
      );
    }
  });
  const axisY = m.top + rowH * runs.length;
  for (let t = 0; t <= tMax; t += 5_000) {
    parts.push(
      `<text x="${px(t)}" y="${axisY + 6}" text-anchor="middle" fill="#444">${t / 1000} s</text>`,
    );
  }
  parts.push(
    `<text x="${m.left + plotW / 2}" y="${axisY + 28}" text-anchor="middle" fill="#444">time since the burst (fixed_window: dotted lines are its window boundaries)</text>`,
    `</svg>`,
  );
  return parts.join('\n') + '\n';
}

/** Simulates every algorithm and writes the SVG to `outPath`. */
export async function writeChart(outPath: string): Promise<void> {
  const runs = [];
  for (const algorithm of ALGORITHMS) runs.push({ algorithm, requests: await simulate(algorithm) });
  await fs.writeFile(outPath, renderChart(runs));
  for (const { algorithm, requests } of runs) {
    const admitted = admittedTimes(requests);
    console.log(
      `${algorithm.padEnd(15)} admitted ${admitted.length}/${requests.length}, peak ${maxInAnyWindow(admitted, SCENARIO.windowMs)} in any ${SCENARIO.windowMs / 1000} s`,
    );
  }
  console.log(`wrote ${outPath}`);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const out = process.argv[2] ?? path.join(REPO_ROOT, 'docs', 'algorithms.svg');
  await writeChart(out);
}
