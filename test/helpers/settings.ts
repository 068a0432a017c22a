/**
 * The settings' refusals as tests see them: the one message `loadSettings` throws (a
 * `SluiceError`, which `sluice serve` prints and exits on).
 */
import { expect } from 'vitest';
import { SluiceError } from '../../src/errors.js';
import { loadSettings } from '../../src/settings.js';

/** The message `loadSettings(env)` throws; fails the test when it accepts `env`. */
export function settingsProblems(env: NodeJS.ProcessEnv): string {
  try {
    loadSettings(env);
  } catch (error) {
    expect(error).toBeInstanceOf(SluiceError);
    return (error as Error).message;
  }
  throw new Error(`expected loadSettings to refuse ${JSON.stringify(env)}`);
}
