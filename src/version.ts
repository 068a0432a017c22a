/**
 * sluice's version and the Node.js versions it supports, read once from the package.json shipped
 * next to `dist/` (and `src/`).
 */
import { readFileSync } from 'node:fs';

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
  engines: { node: string };
};

/** The `version` field of sluice's package.json (e.g. `0.1.0`). */
export const SLUICE_VERSION: string = pkg.version;

/** `engines.node` of package.json: the Node.js versions sluice supports (`^22.13.0 || >=24`). */
export const SUPPORTED_NODE: string = pkg.engines.node;

/**
 * Whether Node.js `version` (`22.13.1`, with or without a leading `v`) is in `range`: clauses
 * joined by `||`, each `^X.Y.Z` (major X, at least X.Y.Z) or `>=X[.Y[.Z]]`, the forms `engines`
 * uses. A clause of another form matches nothing, so a range this cannot read warns rather
 * than passes silently.
 */
export function nodeSupported(version: string, range: string = SUPPORTED_NODE): boolean {
  const have = parseVersion(version);
  if (have === undefined) return false;
  return range.split('||').some((clause) => {
    const text = clause.trim();
    const caret = /^\^(\d+\.\d+\.\d+)$/.exec(text);
    if (caret !== null) {
      const want = parseVersion(caret[1]!)!;
      return have[0] === want[0] && compare(have, want) >= 0;
    }
    const atLeast = /^>=\s*(\d+(?:\.\d+){0,2})$/.exec(text);
    if (atLeast !== null) return compare(have, parseVersion(atLeast[1]!)!) >= 0;
    return false;
  });
}

/** `[major, minor, patch]` of `1.2.3`, `v1.2`, `1`; `undefined` when it is not one. */
function parseVersion(text: string): [number, number, number] | undefined {
  const match = /^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text.trim());
  if (match === null) return undefined;
  return [Number(match[1]), Number(match[2] ?? 0), Number(match[3] ?? 0)];
}

function compare(a: readonly number[], b: readonly number[]): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
