/**
 * The one rule for suites that need something installed (redis-server, Envoy, openssl, Go, ...):
 * missing locally, the suite is skipped and a visible line says what is missing and how to
 * install it; missing under CI (`CI=true`, see {@link inCi}), the suite runs and fails, so the gap
 * is seen. Each helper (redis.ts, envoy.ts, certs.ts, ...) only says what it needs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { inCi } from './processes.js';

/** One thing a suite needs. */
export interface Needed {
  /** What it is, for the message (e.g. `redis-server`, `Envoy 1.37`). */
  readonly name: string;
  /**
   * Why it is missing, or `undefined` when it is there. Default: `name` is a command on the
   * PATH. See {@link onPath} and {@link fileAt} for the usual checks.
   */
  readonly missing?: () => string | undefined;
  /** How to install it (a command, or where it comes from). */
  readonly install: string;
}

/** Whether a suite runs, is skipped (locally), or must fail (under CI). */
export interface Requirement {
  /** True when something is missing and CI is not set: skip the suite. */
  readonly skip: boolean;
  /** What is missing and how to install it; `undefined` when everything is there. */
  readonly reason: string | undefined;
}

/** Why `command` is missing: `undefined` when it is on the PATH. */
export function onPath(command: string): string | undefined {
  const found = spawnSync('sh', ['-c', `command -v '${command}'`], { stdio: 'ignore' });
  return found.status === 0 ? undefined : `${command} not found on the PATH`;
}

/** Why the file at `path` is missing: `undefined` when it exists. */
export function fileAt(path: string): string | undefined {
  return existsSync(path) ? undefined : `${path} not found`;
}

/**
 * Check everything `suite` needs, when the suite is collected: `describe.skipIf(r.skip)`. Prints
 * what is missing either way (a skip locally, a coming failure under CI).
 */
export function requireBinaries(suite: string, needed: readonly Needed[]): Requirement {
  const problems: string[] = [];
  const installs = new Set<string>();
  for (const item of needed) {
    const why = item.missing ? item.missing() : onPath(item.name);
    if (why === undefined) continue;
    problems.push(why);
    installs.add(item.install);
  }
  if (problems.length === 0) return { skip: false, reason: undefined };
  const reason = `${problems.join('; ')} (install: ${[...installs].join('; ')}; .ci/run installs it)`;
  const ci = inCi();
  console.warn(`[${suite}] ${ci ? 'MISSING under CI, the suite fails' : 'SKIPPED'}: ${reason}`);
  return { skip: !ci, reason };
}

/**
 * Fail now when something is missing (call it where the suite would first use the binary, e.g.
 * in `beforeAll`): under CI the suite ran despite the gap and must fail with the reason.
 */
export function assertPresent(requirement: Requirement, what: string): void {
  if (requirement.reason !== undefined) {
    throw new Error(`${requirement.reason} (under CI a missing ${what} fails the suite)`);
  }
}
