/**
 * sluice's version, read once from the package.json shipped next to `dist/` (and `src/`).
 */
import { readFileSync } from 'node:fs';

/** The `version` field of sluice's package.json (e.g. `0.1.0`). */
export const SLUICE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string;
  }
).version;
