#!/usr/bin/env node
// `npm start`'s build step: runs `npm run build` only when dist/ is missing or older than what it
// is built from (a file under src/ or proto/, tsconfig.json, tsconfig.build.json, package.json),
// so a start after an unchanged checkout takes no compile (about 15 s on a small machine).
// A fresh clone (no dist/) and any edit still build first.
//
// Usage: node scripts/build-if-stale.mjs [ROOT]   (ROOT: the project folder; default this repo)
// Exit status: 0 when dist/ is current (built or not), the build's status when it fails.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(process.argv[2] ?? path.join(fileURLToPath(import.meta.url), '../..'));
const built = path.join(root, 'dist', 'main.js');

/** The newest modification time (ms) of `file`, or of any file under it; -Infinity if none. */
function newestMtimeMs(file) {
  const stat = statSync(file, { throwIfNoEntry: false });
  if (stat === undefined) return -Infinity;
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = -Infinity;
  for (const entry of readdirSync(file)) {
    newest = Math.max(newest, newestMtimeMs(path.join(file, entry)));
  }
  return newest;
}

/** Why dist/ must be rebuilt, or undefined when it is current. */
function staleReason() {
  if (!existsSync(built)) return 'dist/main.js is missing';
  const builtMs = statSync(built).mtimeMs;
  for (const source of ['src', 'proto', 'tsconfig.json', 'tsconfig.build.json', 'package.json']) {
    if (newestMtimeMs(path.join(root, source)) > builtMs) return `${source} is newer than dist/`;
  }
  return undefined;
}

const reason = staleReason();
if (reason === undefined) process.exit(0);
process.stderr.write(`build-if-stale: building (${reason})\n`);
const result = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
process.exit(result.status ?? 1);
