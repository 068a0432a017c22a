/**
 * `npm run bench:redis`: only the Redis rows (bench/redis-h2load.ts), printed as a table and
 * written to `.cache/bench/redis-results.json`. `npm run bench` runs the same rows at its end.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { loadSluice, REPO_ROOT } from './dist.js';
import { benchRedisH2load, formatRedis, REDIS_BOUNDS } from './redis-h2load.js';
import { writeRules } from './workloads.js';

const t0 = performance.now();
const progress = (message: string): void =>
  void process.stderr.write(
    `bench: [${((performance.now() - t0) / 1000).toFixed(0)}s] ${message}\n`,
  );

const sluice = await loadSluice();
const rulesDir = await writeRules();
try {
  const result = await benchRedisH2load(sluice, rulesDir, REDIS_BOUNDS, progress);
  const text = formatRedis(result);
  process.stdout.write(text + '\n');
  const file = path.join(REPO_ROOT, '.cache', 'bench', 'redis-results.json');
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.writeFile(
    file,
    JSON.stringify({ date: new Date().toISOString(), result, report: text }, null, 2) + '\n',
  );
} finally {
  await fs.rm(rulesDir, { recursive: true, force: true });
}
