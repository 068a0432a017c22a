/**
 * The contract every suite that needs an installed tool relies on: missing locally, skipped with
 * a visible reason; missing under CI, run (and so failed) with the same reason.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { assertPresent, fileAt, onPath, requireBinaries } from '../../helpers/require-binaries.js';

const ABSENT = 'sluice-no-such-command-7f3a';

afterEach(() => {
  vi.unstubAllEnvs();
  vi.restoreAllMocks();
});

describe('requireBinaries', () => {
  it('runs the suite, silently, when everything is there', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    vi.stubEnv('CI', '');
    const requirement = requireBinaries('suite', [{ name: 'sh', install: 'none' }]);
    expect(requirement).toEqual({ skip: false, reason: undefined });
    expect(() => assertPresent(requirement, 'sh')).not.toThrow();
    expect(warn).not.toHaveBeenCalled();
  });

  it('missing locally: skipped, with the reason and the install command printed', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    vi.stubEnv('CI', '');
    const requirement = requireBinaries('my suite', [
      { name: 'sh', install: 'unused' },
      { name: ABSENT, install: 'apt-get install it' },
    ]);
    expect(requirement.skip).toBe(true);
    expect(requirement.reason).toBe(
      `${ABSENT} not found on the PATH (install: apt-get install it; .ci/run installs it)`,
    );
    expect(warn).toHaveBeenCalledWith(`[my suite] SKIPPED: ${requirement.reason}`);
  });

  it('missing under CI=true: not skipped, and assertPresent fails the suite with the reason', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    vi.stubEnv('CI', 'true');
    const requirement = requireBinaries('ci suite', [
      { name: 'file', missing: () => fileAt('/nonexistent/sluice'), install: 'make it' },
    ]);
    expect(requirement.skip).toBe(false);
    expect(requirement.reason).toMatch(/^\/nonexistent\/sluice not found \(install: make it;/);
    expect(warn).toHaveBeenCalledWith(
      `[ci suite] MISSING under CI, the suite fails: ${requirement.reason}`,
    );
    expect(() => assertPresent(requirement, 'file')).toThrow(requirement.reason);
  });

  it('CI=false and CI=0 count as local', () => {
    vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    for (const value of ['false', '0']) {
      vi.stubEnv('CI', value);
      expect(requireBinaries('s', [{ name: ABSENT, install: 'x' }]).skip, value).toBe(true);
    }
  });

  it('onPath and fileAt say why, or nothing', () => {
    expect(onPath('sh')).toBeUndefined();
    expect(onPath(ABSENT)).toBe(`${ABSENT} not found on the PATH`);
    expect(fileAt('/')).toBeUndefined();
  });
});
