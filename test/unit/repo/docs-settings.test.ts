/**
 * The documents a new user reads first stay true to the code (issue 32, item 3): every variable
 * settings.ts reads has a row in the README's settings table that says what it means, and the
 * migration guide names no supported feature as unsupported.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadCheckSettings, loadSettings } from '../../../src/settings.js';

const read = (file: string): string =>
  readFileSync(new URL(`../../../${file}`, import.meta.url), 'utf8');

/** Markdown with line breaks and repeated spaces folded, so a wrapped sentence reads as one. */
const flat = (text: string): string => text.replace(/\s+/g, ' ');

/**
 * The names `load` reads from its environment, recorded as it reads them. Each environment of
 * `envs` turns on a part that reads more (TLS files, the xDS client's TLS, tracing, ...).
 */
function namesRead(envs: readonly Record<string, string>[]): Set<string> {
  const names = new Set<string>();
  for (const values of envs) {
    const env = new Proxy(values, {
      get(target, name) {
        if (typeof name === 'string') names.add(name);
        return target[name as string];
      },
    });
    try {
      loadSettings(env);
    } catch {
      // Only the names read matter, not whether this combination is valid.
    }
    loadCheckSettings(env);
  }
  return names;
}

/** Every part that reads more variables when it is on. */
const EVERYTHING_ON: Record<string, string> = {
  BACKEND_TYPE: 'redis',
  REDIS_URL: 'localhost:6379',
  REDIS_PERSECOND: 'true',
  GRPC_SERVER_USE_TLS: 'true',
  CONFIG_TYPE: 'GRPC_XDS_SOTW',
  CONFIG_GRPC_XDS_SERVER_USE_TLS: 'true',
  TRACING_ENABLED: 'true',
  USE_STATSD: 'false',
  USE_DOG_STATSD: 'true',
  USE_DOG_STATSD_MOGRIFIERS: 'NAME',
};

/**
 * Variables read but not given a row of their own, each with the reason. Nothing else may be
 * missing from the table.
 */
const NOT_IN_TABLE: Readonly<Record<string, string>> = {
  // Read only to warn that it does nothing (docs/envoy-gateway.md explains it).
  GRPC_SERVER_TLS_CA_CERT: 'a notice, not a setting',
  // Accepted and not applied; the PROMETHEUS_* row says so in its meaning.
  PROMETHEUS_MAPPER_YAML: 'named in the USE_PROMETHEUS row',
};

/** The README's settings table: each row's variable cell and meaning cell. */
function settingsRows(): { variables: string; meaning: string }[] {
  const readme = read('README.md');
  const start = readme.indexOf('## Settings');
  const table = readme.slice(start, readme.indexOf('\n## ', start + 1));
  return table
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const cells = line.split('|').map((cell) => cell.trim());
      return { variables: cells[1] ?? '', meaning: cells[3] ?? '' };
    });
}

/**
 * Whether a row's variable cell names `name`: in full (`REDIS_URL`), as a suffix of the name
 * before it (`XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`, `_MAX_INTERVAL`), or by a pattern
 * (`REDIS_PERSECOND_*`, `DOG_STATSD_MOGRIFIER_<NAME>_PATTERN`).
 */
function cellNames(cell: string, name: string): boolean {
  const tokens = [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
  const matches = (written: string): boolean =>
    new RegExp(`^${written.replace(/\*|<[A-Z]+>/g, '[A-Z0-9_]+')}$`).test(name);
  let full = '';
  for (const token of tokens) {
    if (!token.startsWith('_')) {
      full = token;
      if (matches(token)) return true;
      continue;
    }
    // A suffix replaces the tail of the last full name after one of its underscores.
    const parts = full.split('_');
    for (let i = 1; i < parts.length; i++) {
      if (matches(parts.slice(0, i).join('_') + token)) return true;
    }
  }
  return false;
}

describe("the README's settings table", () => {
  const rows = settingsRows();

  it('has a meaning in every row', () => {
    expect(rows.length).toBeGreaterThan(40);
    const empty = rows.filter((row) => row.meaning === '').map((row) => row.variables);
    expect(empty).toEqual([]);
  });

  it('has a row for every variable settings.ts reads', () => {
    const names = namesRead([{}, EVERYTHING_ON]);
    // A sanity check that the recording saw the parts that are off by default.
    for (const name of [
      'REDIS_TIMEOUT',
      'GRPC_SERVER_TLS_CERT',
      'CONFIG_GRPC_XDS_SERVER_TLS_SAN',
    ]) {
      expect(names).toContain(name);
    }
    const missing = [...names]
      .filter((name) => /^[A-Z][A-Z0-9_]*$/.test(name) && NOT_IN_TABLE[name] === undefined)
      .filter((name) => !rows.some((row) => cellNames(row.variables, name)));
    expect(missing).toEqual([]);
  });
});

describe('docs/migrating.md', () => {
  const guide = flat(read('docs/migrating.md'));

  // Each is read by sluice under the reference's names (README, "Drop-in").
  it.each([
    ['statsd', /statsd/i],
    ['xDS config', /xDS/],
    ['tracing', /tracing/i],
    ['Prometheus on PROMETHEUS_ADDR', /USE_PROMETHEUS/],
  ])('does not call %s unsupported', (_feature, word) => {
    const sentences = guide.split(/(?<=[.;:])\s+/).filter((s) => word.test(s));
    for (const sentence of sentences) {
      expect(sentence).not.toMatch(
        /\b(not read|does not read|do not read|not supported|unsupported|ignored|switch to scraping)\b/i,
      );
    }
  });
});
