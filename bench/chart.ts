/**
 * Renders the latency-against-offered-load chart (SVG) from the JSON `npm run bench` writes.
 *
 * Usage: `npm run bench:chart [-- RESULTS_JSON [OUT_SVG]]`; defaults: `.cache/bench/results.json`
 * and `docs/benchmarks-latency.svg`. `npm run bench` renders it at the end of every run too.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './dist.js';
import type { H2loadResult } from './h2load.js';

/** Where `npm run bench` writes its results. */
export const RESULTS_JSON = path.join(REPO_ROOT, '.cache', 'bench', 'results.json');
/** Where the chart goes. */
export const CHART_SVG = path.join(REPO_ROOT, 'docs', 'benchmarks-latency.svg');

/** What the JSON holds (the parts the chart reads). */
export interface BenchResults {
  /** ISO date of the run. */
  readonly date: string;
  /** Machine description lines. */
  readonly machine: readonly string[];
  /** The h2load figures; `undefined` when h2load did not run. */
  readonly h2load: H2loadResult | undefined;
}

const COLORS: Readonly<Record<string, string>> = {
  'sluice lean': '#1f77b4',
  'sluice grpc-js': '#9467bd',
  'no-op grpc-js': '#7f7f7f',
  reference: '#d62728',
};

/** `text` escaped for SVG text and attribute values. */
export function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** "Nice" upper bound and tick step for an axis reaching `max`. */
export function niceScale(max: number): { top: number; step: number } {
  const raw = max / 5;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= raw)!;
  return { top: Math.ceil(max / step) * step, step };
}

/** The SVG: p99 (solid) and p50 (dashed) latency against offered calls/s, one colour a server. */
export function renderChart(results: BenchResults): string {
  const h2 = results.h2load;
  const width = 760;
  const height = 440;
  const m = { left: 70, right: 180, top: 40, bottom: 60 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const servers = h2?.servers ?? [];
  const points = servers.flatMap((s) => s.sweep);
  const x = niceScale(Math.max(1, ...points.map((p) => p.offered)));
  const y = niceScale(Math.max(0.1, ...points.map((p) => p.p99Ms)));
  const px = (v: number): number => m.left + (v / x.top) * plotW;
  const py = (v: number): number => m.top + plotH - (Math.min(v, y.top) / y.top) * plotH;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
    `<text x="${m.left}" y="22" font-size="14" font-weight="bold">ShouldRateLimit latency against offered load (h2load, ${h2 ? `${h2.bounds.latencyShape.connections}x${h2.bounds.latencyShape.streams}` : 'n/a'}, 1 descriptor)</text>`,
  );
  for (let v = 0; v <= x.top + 1e-9; v += x.step) {
    out.push(
      `<line x1="${px(v)}" y1="${m.top}" x2="${px(v)}" y2="${m.top + plotH}" stroke="#eeeeee"/>`,
      `<text x="${px(v)}" y="${m.top + plotH + 16}" text-anchor="middle">${v >= 1000 ? `${v / 1000}k` : v}</text>`,
    );
  }
  for (let v = 0; v <= y.top + 1e-9; v += y.step) {
    out.push(
      `<line x1="${m.left}" y1="${py(v)}" x2="${m.left + plotW}" y2="${py(v)}" stroke="#eeeeee"/>`,
      `<text x="${m.left - 6}" y="${py(v) + 4}" text-anchor="end">${Number(v.toPrecision(3))}</text>`,
    );
  }
  out.push(
    `<rect x="${m.left}" y="${m.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333333"/>`,
    `<text x="${m.left + plotW / 2}" y="${height - 20}" text-anchor="middle">offered load, calls/s</text>`,
    `<text x="18" y="${m.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 18 ${m.top + plotH / 2})">latency, ms</text>`,
  );
  let legendY = m.top + 10;
  for (const server of servers) {
    const color = COLORS[server.name] ?? '#000000';
    const sorted = [...server.sweep].sort((a, b) => a.offered - b.offered);
    const line = (pick: (p: (typeof sorted)[number]) => number): string =>
      sorted.map((p) => `${px(p.offered).toFixed(1)},${py(pick(p)).toFixed(1)}`).join(' ');
    out.push(
      `<polyline points="${line((p) => p.p99Ms)}" fill="none" stroke="${color}" stroke-width="2"/>`,
      `<polyline points="${line((p) => p.p50Ms)}" fill="none" stroke="${color}" stroke-width="1.5" stroke-dasharray="5 4"/>`,
    );
    for (const p of sorted) {
      out.push(`<circle cx="${px(p.offered)}" cy="${py(p.p99Ms)}" r="3" fill="${color}"/>`);
    }
    const lx = m.left + plotW + 14;
    out.push(
      `<line x1="${lx}" y1="${legendY}" x2="${lx + 24}" y2="${legendY}" stroke="${color}" stroke-width="2"/>`,
      `<text x="${lx + 30}" y="${legendY + 4}">${esc(server.name)}</text>`,
    );
    legendY += 20;
  }
  const lx = m.left + plotW + 14;
  out.push(
    `<line x1="${lx}" y1="${legendY + 10}" x2="${lx + 24}" y2="${legendY + 10}" stroke="#333333" stroke-width="2"/>`,
    `<text x="${lx + 30}" y="${legendY + 14}">p99</text>`,
    `<line x1="${lx}" y1="${legendY + 30}" x2="${lx + 24}" y2="${legendY + 30}" stroke="#333333" stroke-width="1.5" stroke-dasharray="5 4"/>`,
    `<text x="${lx + 30}" y="${legendY + 34}">p50</text>`,
    `<text x="${lx}" y="${legendY + 60}" font-size="10">${esc(results.date.slice(0, 10))}</text>`,
    '</svg>',
  );
  return out.join('\n') + '\n';
}

/** Write the chart of `results` to `file`. */
export async function writeChart(results: BenchResults, file = CHART_SVG): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(file, renderChart(results));
}

async function main(): Promise<void> {
  const input = process.argv[2] ?? RESULTS_JSON;
  const output = process.argv[3] ?? CHART_SVG;
  const results = JSON.parse(await fs.readFile(input, 'utf8')) as BenchResults;
  await writeChart(results, output);
  process.stdout.write(`wrote ${output}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await main();
