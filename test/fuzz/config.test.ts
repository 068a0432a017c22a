/**
 * Fuzzing the rule loader: random text, random YAML built from the format's own keys with values
 * of every type, and line- and character-level mutations of valid files (test/fixtures/config and
 * the bundled rules) go through `loadSnapshot` and `checkConfig` from a file on disk. Every file
 * loads, or fails with a ConfigError whose every problem names the file and says what is wrong
 * (never a TypeError or a stack trace); `checkConfig` agrees and never throws. Then broken files
 * written into a served rule directory: the hot reload refuses each and the loaded config and
 * the counters stay as they were.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { stringify } from 'yaml';
import { createManualClock } from '../../src/clock.js';
import { checkConfig, loadSnapshot } from '../../src/config/load.js';
import { ConfigError } from '../../src/errors.js';
import { rlsRequest } from '../helpers/envoy-rls-client.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { fcParams, timeoutFor } from './budget.js';

const REPO = path.resolve(import.meta.dirname, '../..');

/** The valid rule files the mutations start from. */
async function validSources(): Promise<string[]> {
  const files = [
    'test/fixtures/config/valid/edge.yaml',
    'test/fixtures/config/valid/internal.yml',
    'test/fixtures/config/valid/nested/messaging.yaml',
    ...(await fs.readdir(path.join(REPO, 'envoy/ratelimit')))
      .filter((name) => name.endsWith('.yaml'))
      .map((name) => `envoy/ratelimit/${name}`),
  ];
  return Promise.all(files.map((file) => fs.readFile(path.join(REPO, file), 'utf8')));
}

/** Signs of a crash leaking into a message instead of a sentence about the file. */
const CRASH =
  /TypeError|ReferenceError|RangeError|SyntaxError:|Cannot read prop|is not a function|is not iterable|undefined is not|\n\s+at /;

/** Throws unless loading `content` as `file` gives a snapshot or a clear ConfigError. */
async function checkLoad(file: string, content: string): Promise<'valid' | 'invalid'> {
  await fs.writeFile(file, content);
  let outcome: 'valid' | 'invalid';
  try {
    const snapshot = await loadSnapshot([file]);
    expect(snapshot.files).toEqual([file]);
    outcome = 'valid';
  } catch (error) {
    if (!(error instanceof ConfigError)) {
      throw new Error(`not a ConfigError: ${String(error)}`, { cause: error });
    }
    expect(error.problems.length).toBeGreaterThan(0);
    for (const problem of error.problems) {
      expect(problem.file).toBe(file);
      expect(problem.message.trim()).not.toBe('');
      expect(problem.message).not.toMatch(CRASH);
    }
    outcome = 'invalid';
  }
  const check = await checkConfig([file]);
  expect(check.ok).toBe(outcome === 'valid');
  for (const problem of check.problems) expect(problem.message).not.toMatch(CRASH);
  return outcome;
}

/** The keys of the format (the reference's and sluice's extensions) and a few near misses. */
const KEYS = [
  'domain',
  'descriptors',
  'key',
  'value',
  'rate_limit',
  'unit',
  'requests_per_unit',
  'unlimited',
  'name',
  'replaces',
  'shadow_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'algorithm',
  'unit_multiplier',
  'burst',
  'rate_limits',
  'Domain',
  'rate-limit',
  '<<',
  '',
];

const scalar = fc.oneof(
  fc.constantFrom(
    'second',
    'minute',
    'hour',
    'day',
    'week',
    'month',
    'year',
    'fortnight',
    'SECOND',
    'sliding_window',
    'token_bucket',
    'fixed_window',
    'sliding_log',
    'yes',
    'off',
    '~',
    '*',
    'a*b',
    '',
  ),
  fc.integer({ min: -5, max: 10 }),
  fc.constantFrom(0, 4294967295, 4294967296, 2 ** 53, 1e308, -0, 0.5, NaN, Infinity),
  fc.boolean(),
  fc.constant(null),
  fc.string({ maxLength: 10 }),
);

/** Random YAML trees made of the format's keys. */
const treeArb = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    scalar,
    fc.array(tie('node'), { maxLength: 3 }),
    fc.dictionary(fc.constantFrom(...KEYS), tie('node'), { maxKeys: 5 }),
  ),
})).node;

/** A config-shaped tree: a domain and descriptors whose parts are random. */
const configTreeArb = fc.record(
  {
    domain: fc.oneof(fc.constant('fz'), scalar),
    descriptors: fc.oneof(
      fc.array(fc.dictionary(fc.constantFrom(...KEYS), treeArb, { maxKeys: 6 }), { maxLength: 4 }),
      treeArb,
    ),
  },
  { requiredKeys: [] },
);

type LineEdit =
  | { readonly op: 'delete' | 'duplicate' | 'dedent' | 'indent'; readonly line: number }
  | { readonly op: 'swap'; readonly line: number; readonly other: number }
  | { readonly op: 'replace-token'; readonly line: number; readonly text: string }
  | { readonly op: 'insert-chars'; readonly at: number; readonly text: string }
  | { readonly op: 'truncate'; readonly at: number };

const editArb: fc.Arbitrary<LineEdit> = fc.oneof(
  fc.record({
    op: fc.constantFrom(
      'delete' as const,
      'duplicate' as const,
      'dedent' as const,
      'indent' as const,
    ),
    line: fc.nat(),
  }),
  fc.record({ op: fc.constant('swap' as const), line: fc.nat(), other: fc.nat() }),
  fc.record({
    op: fc.constant('replace-token' as const),
    line: fc.nat(),
    text: fc.oneof(
      fc.constantFrom(
        '&a',
        '*a',
        '*nope',
        '<<: *a',
        '[',
        ']',
        '{',
        '}',
        ':',
        '- ',
        '|',
        '>',
        '!!binary',
        '"',
        "'",
        '#',
        '\t',
        '%YAML 1.2',
        '---',
        '...',
      ),
      fc.string({ maxLength: 6 }),
      scalar.map((v) => String(v)),
    ),
  }),
  fc.record({
    op: fc.constant('insert-chars' as const),
    at: fc.nat(),
    text: fc.string({ unit: 'binary', maxLength: 4 }),
  }),
  fc.record({ op: fc.constant('truncate' as const), at: fc.nat() }),
);

/** Apply one edit to YAML text. */
function edit(text: string, e: LineEdit): string {
  const lines = text.split('\n');
  const n = lines.length;
  switch (e.op) {
    case 'delete':
      lines.splice(e.line % n, 1);
      return lines.join('\n');
    case 'duplicate':
      lines.splice(e.line % n, 0, lines[e.line % n]!);
      return lines.join('\n');
    case 'dedent':
      lines[e.line % n] = lines[e.line % n]!.replace(/^ {1,2}/, '');
      return lines.join('\n');
    case 'indent':
      lines[e.line % n] = `  ${lines[e.line % n]}`;
      return lines.join('\n');
    case 'swap': {
      const a = e.line % n;
      const b = e.other % n;
      [lines[a], lines[b]] = [lines[b]!, lines[a]!];
      return lines.join('\n');
    }
    case 'replace-token': {
      const line = lines[e.line % n]!;
      const tokens = line.split(/(\s+)/);
      const words = tokens.map((t, i) => (/\S/.test(t) ? i : -1)).filter((i) => i >= 0);
      if (words.length === 0) lines[e.line % n] = e.text;
      else tokens[words[e.line % words.length]!] = e.text;
      lines[e.line % n] = tokens.join('');
      return lines.join('\n');
    }
    case 'insert-chars': {
      const at = e.at % (text.length + 1);
      return text.slice(0, at) + e.text + text.slice(at);
    }
    case 'truncate':
      return text.slice(0, e.at % (text.length + 1));
  }
}

describe('fuzzing the rule loader', () => {
  let dir: string;
  let file: string;
  let sources: string[];
  const tally = { valid: 0, invalid: 0 };

  beforeAll(async () => {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-fuzz-config-'));
    file = path.join(dir, 'rules.yaml');
    sources = await validSources();
  });
  afterAll(async () => {
    console.info(`config fuzz: ${tally.valid} valid, ${tally.invalid} invalid files`);
    await fs.rm(dir, { recursive: true, force: true });
  });

  it(
    'random text loads or gets problems naming the file',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            fc.string({ maxLength: 200 }),
            fc.string({ unit: 'binary', maxLength: 200 }),
            fc
              .array(
                fc.constantFrom(
                  'domain: x\n',
                  'descriptors:\n',
                  '  - key: a\n',
                  '    rate_limit:\n',
                  '      unit: second\n',
                  '      requests_per_unit: 3\n',
                  '- ',
                  ':',
                  '&a ',
                  '*a',
                  '<<: *a\n',
                  '{',
                  '}',
                  '[',
                  ']',
                  '\n',
                  '  ',
                  '\t',
                  '"',
                  '#',
                ),
                { maxLength: 30 },
              )
              .map((parts) => parts.join('')),
          ),
          async (text) => {
            tally[await checkLoad(file, text)]++;
          },
        ),
        fcParams(200),
      );
    },
    timeoutFor(20_000),
  );

  it(
    'random YAML trees of the format keys with values of any type',
    async () => {
      await fc.assert(
        fc.asyncProperty(configTreeArb, async (tree) => {
          tally[await checkLoad(file, stringify(tree))]++;
        }),
        fcParams(200),
      );
    },
    timeoutFor(20_000),
  );

  it(
    'mutations of valid rule files',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.nat(),
          fc.array(editArb, { minLength: 1, maxLength: 4 }),
          async (which, edits) => {
            const source = sources[which % sources.length]!;
            tally[await checkLoad(file, edits.reduce(edit, source))]++;
          },
        ),
        fcParams(200),
      );
    },
    timeoutFor(20_000),
  );
});

describe('broken rule files written into a served directory', () => {
  let running: RunningApp;
  let dir: string;
  let scratch: string;
  const clock = createManualClock();
  const RULES =
    'domain: hot\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 10}\n';

  beforeAll(async () => {
    dir = await ruleDir({ 'hot.yaml': RULES });
    scratch = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-fuzz-scratch-'));
    running = await startApp([dir], {}, { clock: clock.now, watchPollIntervalMs: 50 });
    await running.client.shouldRateLimit(rlsRequest('hot', [{ user: 'u' }]));
  });
  afterAll(async () => {
    await running?.stop();
    await fs.rm(dir, { recursive: true, force: true });
    await fs.rm(scratch, { recursive: true, force: true });
  });

  it(
    'each is refused by the reload; the loaded config and the counters stay as they were',
    async () => {
      const loaded = running.app.snapshot();
      let refused = 0;
      let writes = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(editArb, { minLength: 1, maxLength: 4 }), async (edits) => {
          // A unique last line, so every write is a change the watcher reloads.
          const broken = `${edits.reduce(edit, RULES)}\n# write ${++writes}\n`;
          // Only files the loader refuses: a mutation that is still valid would be applied.
          if ((await checkConfig([await write(scratch, broken)])).ok) return;
          const errorsBefore = running.app.metrics.service.configLoadError;
          await fs.writeFile(path.join(dir, 'hot.yaml'), broken);
          await vi.waitFor(
            () => expect(running.app.metrics.service.configLoadError).toBeGreaterThan(errorsBefore),
            { timeout: 5_000, interval: 20 },
          );
          refused++;
          expect(running.app.snapshot()).toBe(loaded);
        }),
        fcParams(8),
      );
      expect(refused).toBeGreaterThan(0);
      const after = await running.client.shouldRateLimit(rlsRequest('hot', [{ user: 'u' }]));
      expect(after.statuses[0]).toMatchObject({ code: 'OK', limit_remaining: 8 });
      expect(running.app.snapshot()).toBe(loaded);
    },
    timeoutFor(30_000),
  );
});

async function write(dir: string, text: string): Promise<string> {
  const file = path.join(dir, 'candidate.yaml');
  await fs.writeFile(file, text);
  return file;
}
