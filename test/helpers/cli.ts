/**
 * Runs one-shot CLI commands (`check`, `query`, a failing `serve`) of the built `dist/main.js`.
 * Long-running servers use `startSluice` from processes.ts.
 */
import { spawnManaged, serverUnderTest, REPO_ROOT, SLUICE_MAIN } from './processes.js';

/** Result of a finished CLI run. */
export interface CliResult {
  code: number | string;
  stdout: string;
  stderr: string;
}

/**
 * Run `node dist/main.js ...args` to completion with only PATH and `env` in its environment;
 * killed (and the test failed) after `timeoutMs`.
 */
export async function runCli(
  args: string[],
  env: Record<string, string> = {},
  timeoutMs = 20_000,
): Promise<CliResult> {
  const proc = spawnManaged('sluice', process.execPath, [SLUICE_MAIN, ...args], {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      ...serverUnderTest(),
      ...env,
    },
  });
  let stdout = '';
  let stderr = '';
  proc.child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
  proc.child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      void proc.stop(0);
      reject(
        new Error(`sluice ${args.join(' ')} did not finish in ${timeoutMs} ms\n${proc.output()}`),
      );
    }, timeoutMs);
  });
  try {
    const code = await Promise.race([proc.exited, timeout]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}
