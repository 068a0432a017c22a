/**
 * The supported Node.js lines are named once and agree everywhere: package.json's `engines`,
 * `@types/node` (the oldest supported line, so code cannot use an API that line lacks), the pins
 * of scripts/install-node.sh, and the lines .ci/run tests on.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (file: string): string =>
  readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8');
const pkg = JSON.parse(read('package.json')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};
const installer = read('scripts/install-node.sh');
const ci = read('.ci/run');

/** The versions scripts/install-node.sh pins, by major. */
const pins = new Map(
  [...installer.matchAll(/^\s*(\d+)\) version="(\d+\.\d+\.\d+)" ;;$/gm)].map((m) => [m[1]!, m[2]!]),
);

/** Whether `version` satisfies the `engines` range (`^A.B.C || >=N` forms only). */
function satisfies(range: string, version: string): boolean {
  const [major, minor, patch] = version.split('.').map(Number) as [number, number, number];
  return range.split('||').some((part) => {
    const caret = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(part);
    if (caret !== null) {
      const [, a, b, c] = caret.map(Number) as [number, number, number, number];
      return major === a && (minor > b || (minor === b && patch >= c));
    }
    const atLeast = /^\s*>=\s*(\d+)\s*$/.exec(part);
    if (atLeast !== null) return major >= Number(atLeast[1]);
    throw new Error(`engines part ${JSON.stringify(part)} is not understood by this test`);
  });
}

describe('supported Node.js lines', () => {
  it('install-node.sh pins Node 22 and 24, and engines accepts both pins', () => {
    expect([...pins.keys()].sort()).toEqual(['22', '24']);
    for (const version of pins.values()) expect(satisfies(pkg.engines.node, version)).toBe(true);
  });

  it('engines refuses the end-of-life Node 20 and the odd line 23', () => {
    expect(satisfies(pkg.engines.node, '20.19.0')).toBe(false);
    expect(satisfies(pkg.engines.node, '23.11.0')).toBe(false);
    expect(satisfies(pkg.engines.node, '22.0.0')).toBe(false);
  });

  it('@types/node is the oldest supported line', () => {
    expect(pkg.devDependencies['@types/node']).toMatch(/^\^22\./);
  });

  it('.ci/run runs the whole suite on Node 24 and the unit and integration tiers on 22', () => {
    expect(ci).toMatch(/node24_dir="\$\(node_dir_for 24\)"/);
    expect(ci).toMatch(/node22_dir="\$\(node_dir_for 22\)"/);
    expect(ci).toMatch(/export PATH="\$\{node24_dir\}:\$\{PATH\}"[\s\S]*\nnpm test\n/);
    expect(ci).toMatch(/PATH="\$\{node22_dir\}:\$\{PATH\}" npm run --silent test:unit\n/);
    expect(ci).toMatch(/PATH="\$\{node22_dir\}:\$\{PATH\}" npm run --silent test:integration\n/);
  });
});
