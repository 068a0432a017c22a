/**
 * How one bucket's global budget is split between the Envoy instances that report it: a pure
 * function of the limit and each instance's demand (docs/rlqs.md, "Fairness"). The instances with
 * demand share the whole limit: each first gets a floor (its part of a reserve), the rest is
 * filled by demand, smallest demands first (water-filling: an instance never gets more of the pool
 * than it asked for while another one is short), and what nobody asked for goes in proportion to
 * demand. An idle instance (no demand) beside busy ones keeps a standby share on top of the limit,
 * so traffic that starts there is not refused outright while its demand is measured; the busy
 * ones get the whole limit, as a lone instance would.
 */

/** Part of the limit set aside as the instances' floors, split evenly between them. */
export const DEFAULT_RESERVE_FRACTION = 0.1;

/**
 * The floor every instance gets when `instances` share `limit`: its even part of the reserve,
 * at least 1 while there are no more instances than tokens, else 0.
 */
export function shareFloor(
  limit: number,
  instances: number,
  reserveFraction = DEFAULT_RESERVE_FRACTION,
): number {
  if (instances === 0 || instances > limit) return 0;
  return Math.max(1, Math.floor((limit * reserveFraction) / instances));
}

/**
 * Integer shares of `limit` (tokens per window) for instances whose demands (requests per window,
 * allowed plus denied, >= 0) are `demands`, in the same order.
 *
 * - When every instance has demand, or none has, the shares sum to exactly `limit` (for at least
 *   one instance), each at least {@link shareFloor} of the instances counted; a lone instance gets
 *   all of it.
 * - When some have demand and some do not, those with demand split the whole `limit` as above
 *   among themselves, and each idle one gets a standby share of {@link shareFloor}`(limit, n)` (n
 *   = every instance) on top: the shares sum to at most `limit x (1 + reserveFraction)`.
 */
export function computeShares(
  limit: number,
  demands: readonly number[],
  reserveFraction = DEFAULT_RESERVE_FRACTION,
): number[] {
  const n = demands.length;
  const total = Math.max(0, Math.floor(limit));
  if (n === 0) return [];
  const clean = demands.map((d) => (Number.isFinite(d) && d > 0 ? d : 0));
  const busy: number[] = [];
  for (let i = 0; i < n; i++) if (clean[i]! > 0) busy.push(i);
  if (busy.length === 0 || busy.length === n) return split(total, clean, reserveFraction);
  const standby = shareFloor(total, n, reserveFraction);
  const out = new Array<number>(n).fill(standby);
  const busyShares = split(
    total,
    busy.map((i) => clean[i]!),
    reserveFraction,
  );
  busy.forEach((i, k) => (out[i] = busyShares[k]!));
  return out;
}

/** `total` split among instances with demands `demands` (finite, >= 0): sums to `total`. */
function split(total: number, demands: readonly number[], reserveFraction: number): number[] {
  const n = demands.length;
  const floor = shareFloor(total, n, reserveFraction);
  const pool = total - floor * n;
  const wants = demands.map((d) => Math.max(0, d - floor));
  const extra = fill(pool, wants, demands);
  return apportion(pool, extra).map((units) => floor + units);
}

/** Real-valued split of `pool`: water-filled up to each want, the surplus by demand. */
function fill(pool: number, wants: readonly number[], demands: readonly number[]): number[] {
  const n = wants.length;
  let wanted = 0;
  for (const w of wants) wanted += w;
  if (wanted >= pool) {
    // Water level: every want below it is met whole, the rest get the level.
    const order = wants.map((_, i) => i).sort((a, b) => wants[a]! - wants[b]!);
    const out = new Array<number>(n).fill(0);
    let left = pool;
    for (let k = 0; k < n; k++) {
      const i = order[k]!;
      const level = left / (n - k);
      const give = Math.min(wants[i]!, level);
      out[i] = give;
      left -= give;
    }
    return out;
  }
  const surplus = pool - wanted;
  let demandSum = 0;
  for (const d of demands) demandSum += d;
  return wants.map((w, i) => {
    const weight = demandSum > 0 ? demands[i]! / demandSum : 1 / n;
    return w + surplus * weight;
  });
}

/** Round `parts` (summing to `pool`) to integers summing to `pool`: largest remainders first. */
function apportion(pool: number, parts: readonly number[]): number[] {
  const out = parts.map((p) => Math.floor(p));
  let given = 0;
  for (const units of out) given += units;
  let left = pool - given;
  if (left <= 0) return out;
  const order = parts
    .map((p, i) => [p - Math.floor(p), i] as const)
    .sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (let k = 0; left > 0; k = (k + 1) % order.length, left--) out[order[k]![1]]!++;
  return out;
}
