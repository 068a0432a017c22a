/**
 * sluice names an unsupported Node.js at start (issue 32, item 8): npm's EBADENGINE warning is
 * easy to miss, and Node 20 runs sluice mostly but untested. The rule is package.json's engines.
 */
import { describe, expect, it } from 'vitest';
import { nodeSupported, SUPPORTED_NODE } from '../../src/version.js';

describe('nodeSupported', () => {
  it("reads package.json's engines", () => {
    expect(SUPPORTED_NODE).toBe('^22.13.0 || >=24');
  });

  it.each([
    ['v20.20.2', false],
    ['20.20.2', false],
    ['22.12.0', false],
    ['22.13.0', true],
    ['v22.23.3', true],
    ['23.11.0', false],
    ['24.0.0', true],
    ['v24.21.0', true],
    ['26.1.0', true],
    ['not a version', false],
  ])('%s: %s', (version, supported) => {
    expect(nodeSupported(version)).toBe(supported);
  });

  it('matches nothing on a clause it cannot read', () => {
    expect(nodeSupported('24.0.0', '~24')).toBe(false);
    expect(nodeSupported('24.0.0', '~24 || >=22')).toBe(true);
  });
});
