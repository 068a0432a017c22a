/**
 * The real grpcurl for reflection tests: installed at a pinned version by
 * `scripts/install-grpcurl.sh` (`go install` into the git-ignored .cache/go-bin). Without Go the
 * suite is skipped with a visible reason locally and fails under CI (see `inCi`).
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT } from './processes.js';
import { onPath, requireBinaries, type Requirement } from './require-binaries.js';

/** The command that installs the pinned grpcurl. */
const GRPCURL_INSTALL_COMMAND = 'bash scripts/install-grpcurl.sh';

/**
 * Decide, while collecting a suite, whether it can get grpcurl: `GRPCURL_BIN` names a binary to
 * use as is (e.g. another grpcurl version), else `go` must be on the PATH (the install itself runs
 * in {@link installGrpcurl}, inside a hook with a long timeout).
 */
export function requireGrpcurl(suite: string): Requirement {
  if (process.env['GRPCURL_BIN']) return { skip: false, reason: undefined };
  return requireBinaries(suite, [
    {
      name: 'go',
      missing: () => onPath('go') && 'Go not found (needed to install grpcurl)',
      install: `Go 1.19 or later, then: ${GRPCURL_INSTALL_COMMAND}`,
    },
  ]);
}

/**
 * `GRPCURL_BIN` when set; else run the install script (a no-op when the pinned version is
 * installed) and return the binary's absolute path; throws with the script's output (and the reason, under CI) on failure.
 */
export function installGrpcurl(requirement: Requirement): string {
  const override = process.env['GRPCURL_BIN'];
  if (override) return override;
  if (requirement.reason !== undefined) {
    throw new Error(`${requirement.reason} (under CI a missing grpcurl fails)`);
  }
  const result = spawnSync('bash', [path.join(REPO_ROOT, 'scripts', 'install-grpcurl.sh')], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    timeout: 600_000,
  });
  const binary = result.stdout.trim().split('\n').pop() ?? '';
  if (result.status !== 0 || binary === '') {
    throw new Error(
      `${GRPCURL_INSTALL_COMMAND} failed (status ${String(result.status)}):\n${result.stdout}\n${result.stderr}`,
    );
  }
  return binary;
}

/** The outcome of one grpcurl run. */
export interface GrpcurlResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Run `grpcurl -plaintext <args...>` with no proto files (everything comes from reflection);
 * killed after `timeoutMs`. No `-proto` or `-import-path` is ever passed, so only server reflection
 * can supply the descriptors.
 */
export async function grpcurl(
  binary: string,
  args: readonly string[],
  timeoutMs = 15_000,
): Promise<GrpcurlResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(binary, ['-plaintext', '-max-time', String(timeoutMs / 1000), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs + 5_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
