/**
 * The reference (envoyproxy/ratelimit's `service_cmd`) and the redis-server it counts in, started
 * for the differential tier on free loopback ports, always stopped with the test.
 */
import { existsSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  REPO_ROOT,
  canConnect,
  freePort,
  waitFor,
  WaitAborted,
  type ManagedProcess,
  type ProcessGroup,
} from '../helpers/processes.js';

const MASTER_BUILD = path.join(REPO_ROOT, '.cache', 'reference', 'service_cmd');
const PINNED_INSTALL = path.join(REPO_ROOT, '.cache', 'go-bin', 'service_cmd');

/**
 * The reference binary: `SLUICE_REFERENCE_BIN` (scripts/test-differential.sh sets it from
 * scripts/reference.sh), else the master build in .cache/reference, else the pinned install in
 * .cache/go-bin.
 */
export const REFERENCE_BIN =
  process.env['SLUICE_REFERENCE_BIN'] ?? (existsSync(MASTER_BUILD) ? MASTER_BUILD : PINNED_INSTALL);

/**
 * Which reference that is (its commit), for the run's summary: `SLUICE_REFERENCE_COMMIT`, else
 * what the build records (`.source` beside the master build) or `go version -m` reports.
 */
export function referenceCommit(): string {
  const given = process.env['SLUICE_REFERENCE_COMMIT'];
  if (given !== undefined && given !== '') return given;
  const source = path.join(path.dirname(REFERENCE_BIN), '.source');
  if (existsSync(source)) return `${readFileSync(source, 'utf8').trim()} (master build)`;
  const info = spawnSync('go', ['version', '-m', REFERENCE_BIN], { encoding: 'utf8' });
  const version = /\bmod\s+github\.com\/envoyproxy\/ratelimit\s+(\S+)/.exec(info.stdout ?? '');
  return version?.[1] ?? 'unknown';
}

/** Why the tier cannot run here (`undefined` when it can). */
export function missingBinaries(): string | undefined {
  const missing: string[] = [];
  if (!existsSync(REFERENCE_BIN)) missing.push(`the reference binary (${REFERENCE_BIN})`);
  if (spawnSync('redis-server', ['--version']).status !== 0) missing.push('redis-server');
  return missing.length === 0 ? undefined : `missing ${missing.join(' and ')}`;
}

/** A running reference with a set of rule files loaded. */
export interface RunningReference {
  /** gRPC address. */
  readonly address: string;
  /** Files it refused, with its message (it names only the first problem of a load). */
  readonly refused: ReadonlyMap<string, string>;
  /** Stop the process. */
  stop(): Promise<void>;
}

/**
 * Start the reference on `files` (name -> text). It refuses a whole file set when one file is
 * bad and names that file, so a refused file is recorded, removed and the reference started again
 * until the rest loads; one start per refused file.
 */
export async function startReference(
  group: ProcessGroup,
  redisPort: number,
  files: ReadonlyMap<string, string>,
  env: Readonly<Record<string, string>> = {},
): Promise<RunningReference> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-diff-ref-'));
  const configDir = path.join(root, 'app', 'config');
  await fs.mkdir(configDir, { recursive: true });
  for (const [name, text] of files) await fs.writeFile(path.join(configDir, name), text);
  const refused = new Map<string, string>();
  try {
    for (;;) {
      const grpcPort = await freePort();
      const proc = group.spawn('reference', REFERENCE_BIN, [], {
        env: {
          PATH: process.env['PATH'] ?? '',
          BACKEND_TYPE: 'redis',
          REDIS_SOCKET_TYPE: 'tcp',
          REDIS_URL: `127.0.0.1:${redisPort}`,
          USE_STATSD: 'false',
          LOG_LEVEL: 'warn',
          RUNTIME_ROOT: root,
          RUNTIME_SUBDIRECTORY: 'app',
          RUNTIME_WATCH_ROOT: 'false',
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(grpcPort),
          HOST: '127.0.0.1',
          PORT: String(await freePort()),
          DEBUG_HOST: '127.0.0.1',
          DEBUG_PORT: String(await freePort()),
          ...env,
        },
      });
      // The rule files are loaded before the gRPC listener opens.
      await waitFor(
        'the reference gRPC port',
        () => alive(proc) && canConnect('127.0.0.1', grpcPort),
        {
          timeoutMs: 15_000,
          intervalMs: 50,
          onTimeout: () => proc.output(),
        },
      );
      const error =
        /Error loading new configuration: (?:[^\s:]*\/)?([^\s/:]+\.yaml): ([^\n"]*)/.exec(
          proc.output(),
        );
      if (error === null) {
        return {
          address: `127.0.0.1:${grpcPort}`,
          refused,
          stop: async () => {
            await proc.stop();
            await fs.rm(root, { recursive: true, force: true });
          },
        };
      }
      await proc.stop();
      const name = error[1]!;
      if (refused.has(name) || !files.has(name)) {
        throw new Error(
          `the reference refused ${name} again or an unknown file:\n${proc.output()}`,
        );
      }
      refused.set(name, error[2]!);
      await fs.rm(path.join(configDir, name));
    }
  } catch (error) {
    await fs.rm(root, { recursive: true, force: true });
    throw error;
  }
}

function alive(proc: ManagedProcess): boolean {
  if (proc.hasExited()) throw new WaitAborted(`${proc.name} exited early:\n${proc.output()}`);
  return true;
}
