/**
 * The performance targets of the lean transport work, each judged from figures of the same run:
 * met or missed, with the figure. Ratios only, so they mean the same on any machine.
 */
import type { H2loadResult } from './h2load.js';
import type { Row } from './report.js';

/** One target and how this run did. */
export interface TargetResult {
  readonly target: string;
  /** The measured figure, formatted; `n/a` when it could not be measured. */
  readonly figure: string;
  /** `met`, `missed`, or `not measured`. */
  readonly verdict: 'met' | 'missed' | 'not measured';
}

/** The number in a table cell such as `0.074`, `261 B` or `1.05`; NaN when there is none. */
function cellNumber(cell: string | undefined): number {
  const match = /-?\d+(\.\d+)?(e-?\d+)?/i.exec(cell ?? '');
  return match === null ? NaN : Number(match[0]);
}

function judge(
  target: string,
  value: number,
  ok: (v: number) => boolean,
  fmt: (v: number) => string,
): TargetResult {
  if (!Number.isFinite(value)) return { target, figure: 'n/a', verdict: 'not measured' };
  return { target, figure: fmt(value), verdict: ok(value) ? 'met' : 'missed' };
}

/** Judge every target from the table rows and the h2load figures. */
export function judgeTargets(rows: readonly Row[], h2: H2loadResult | undefined): TargetResult[] {
  const row = (id: string): Row | undefined => rows.find((r) => r.id === id);
  const key = h2 ? `${h2.bounds.latencyShape.connections}x${h2.bounds.latencyShape.streams}` : '';
  const sat = (name: string) => h2?.servers.find((s) => s.name === name)?.saturation[key];
  const lean = sat('sluice lean');
  const ref = sat('reference');
  const noop = sat('no-op grpc-js');
  const at80 = h2?.servers
    .find((s) => s.name === 'sluice lean')
    ?.sweep.find((p) => Math.abs(p.fraction - 0.8) < 1e-9);
  const x = (v: number): string => `${v.toFixed(2)} x`;
  return [
    judge(
      `calls/s at ${key || '4x32'}, 1 descriptor: sluice (lean) >= 1.3 x envoyproxy/ratelimit`,
      lean && ref ? lean.callsPerSec / ref.callsPerSec : NaN,
      (v) => v >= 1.3,
      x,
    ),
    judge(
      `calls/s at ${key || '4x32'}, 1 descriptor: sluice (lean) >= 1.5 x the no-op grpc-js handler`,
      lean && noop ? lean.callsPerSec / noop.callsPerSec : NaN,
      (v) => v >= 1.5,
      x,
    ),
    judge(
      `server CPU per call at ${key || '4x32'}: sluice (lean) <= 0.6 x the reference (process + Redis)`,
      lean && ref ? lean.cpuUsPerCall / ref.cpuUsPerCall : NaN,
      (v) => v <= 0.6,
      x,
    ),
    judge(
      'p99.9 at 80% of the maximum (sluice lean) < 5 ms',
      at80?.p999Ms ?? NaN,
      (v) => v < 5,
      (v) => `${v.toFixed(2)} ms`,
    ),
    judge(
      'in-process decisions/s, 1 descriptor, hot key: >= 0.3 x the Map baseline (row 1a)',
      cellNumber(row('1a')?.ratio),
      (v) => v >= 0.3,
      x,
    ),
    judge(
      'in-process decisions/s, 1 descriptor, 100k keys: >= 0.3 x the Map baseline (row 1c)',
      cellNumber(row('1c')?.ratio),
      (v) => v >= 0.3,
      x,
    ),
    judge(
      'heap per live counter, 1M quiet keys: <= 120 bytes (row 3a)',
      cellNumber(row('3a')?.sluice),
      (v) => v <= 120,
      (v) => `${v} B`,
    ),
  ];
}

/** The targets as lines for the report. */
export function formatTargets(results: readonly TargetResult[]): string {
  return results.map((t) => `  [${t.verdict}] ${t.target}: ${t.figure}`).join('\n');
}
