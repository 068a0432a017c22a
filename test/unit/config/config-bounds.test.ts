/**
 * Issue 22, item 4: rule files are bounded. A few kilobytes of YAML aliases that expand to a
 * million rules are refused in time proportional to the file's text (not its expansion), and so
 * are files with more rules than CONFIG_MAX_RULES_PER_FILE, sets with more than CONFIG_MAX_RULES,
 * and files longer than 8 MiB. `sluice check` refuses them with a clear message.
 */
import { mkdtemp, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { checkConfig } from '../../../src/config/load.js';
import { MAX_YAML_NODES } from '../../../src/config/parse.js';
import {
  DEFAULT_MAX_RULES,
  DEFAULT_MAX_RULES_PER_FILE,
  MAX_RULE_FILE_LENGTH,
  validateFiles,
} from '../../../src/config/validate.js';
import { aliasBomb } from '../../helpers/config-bombs.js';

function rulesFile(count: number, domain = 'd'): string {
  let text = `domain: ${domain}\ndescriptors:\n`;
  for (let i = 0; i < count; i++) {
    text += `  - {key: k${i}, rate_limit: {unit: second, requests_per_unit: 1}}\n`;
  }
  return text;
}

describe('rule file bounds', () => {
  it('defaults', () => {
    expect(MAX_YAML_NODES).toBe(1_000_000);
    expect(DEFAULT_MAX_RULES_PER_FILE).toBe(20_000);
    expect(DEFAULT_MAX_RULES).toBe(100_000);
    expect(MAX_RULE_FILE_LENGTH).toBe(8 * 1_048_576);
  });

  it('an alias bomb of a few kilobytes (10^6 rules) is refused by its expanded size', () => {
    const bomb = aliasBomb(6);
    expect(bomb.length).toBeLessThan(4_000);
    const { problems, configs } = validateFiles([{ name: 'bomb.yaml', content: bomb }]);
    expect(configs).toEqual([undefined]);
    expect(problems).toEqual([
      {
        file: 'bomb.yaml',
        path: '',
        message:
          'error loading config file: the file expands to more than 1000000 YAML nodes (each ' +
          'alias counts as a copy of what it names); split it into several files or use fewer aliases',
      },
    ]);
  });

  it('a 10^30 bomb is refused as fast (the count is memoised per node)', () => {
    const { problems } = validateFiles([{ name: 'b.yaml', content: aliasBomb(30) }]);
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringContaining('expands to more than 1000000 YAML nodes'),
    ]);
  });

  it('a file using aliases moderately is not refused for its size', () => {
    // (The anchors sit under keys sluice does not know; only those are reported.)
    const { problems } = validateFiles([{ name: 'ok.yaml', content: aliasBomb(2) }]);
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/^config error, unknown key 'l0'/),
      expect.stringMatching(/^config error, unknown key 'l1'/),
      expect.stringMatching(/^config error, unknown key 'l2'/),
    ]);
  });

  it('rules per file: at the bound loads, one more is refused', () => {
    const at = validateFiles([{ name: 'a.yaml', content: rulesFile(50) }], {
      maxRulesPerFile: 50,
    });
    expect(at.problems).toEqual([]);
    const over = validateFiles([{ name: 'a.yaml', content: rulesFile(51) }], {
      maxRulesPerFile: 50,
    });
    expect(over.problems).toEqual([
      {
        file: 'a.yaml',
        path: '',
        message:
          'the file holds more than 50 rules (descriptors, nested ones included); split it into ' +
          'several files or raise CONFIG_MAX_RULES_PER_FILE',
      },
    ]);
    // The walk stopped one past the bound.
    expect(over.configs[0]!.descriptors).toHaveLength(51);
    const far = validateFiles([{ name: 'a.yaml', content: rulesFile(500) }], {
      maxRulesPerFile: 50,
    });
    expect(far.configs[0]!.descriptors).toHaveLength(51);
  });

  it('nested rules count too', () => {
    // 10 + 100 + 100 leaves = 210 descriptor nodes.
    const nested = aliasBomb(2);
    const count = (max: number) =>
      validateFiles([{ name: 'n.yaml', content: nested }], {
        maxRulesPerFile: max,
      }).problems.filter((p) => p.message.includes('CONFIG_MAX_RULES_PER_FILE')).length;
    expect(count(210)).toBe(0);
    expect(count(209)).toBe(1);
  });

  it('rules in total: the file that passes the total is named, later files are not read', () => {
    const files = [
      { name: 'a.yaml', content: rulesFile(30, 'a') },
      { name: 'b.yaml', content: rulesFile(30, 'b') },
      { name: 'c.yaml', content: rulesFile(30, 'c') },
      { name: 'd.yaml', content: 'not: [valid' },
    ];
    expect(validateFiles(files.slice(0, 2), { maxRules: 60 }).problems).toEqual([]);
    const over = validateFiles(files, { maxRules: 60 });
    expect(over.problems).toEqual([
      {
        file: 'c.yaml',
        path: '',
        message:
          'the rule files hold more than 60 rules in all (descriptors, nested ones included) ' +
          'with this file; remove rules or raise CONFIG_MAX_RULES',
      },
    ]);
    expect(over.configs[3]).toBeUndefined();
    // The file that passed the total was walked only as far as the total allowed.
    expect(over.configs[2]!.descriptors).toHaveLength(1);
    const generous = validateFiles(files, { maxRules: 60, maxRulesPerFile: 1_000 });
    expect(generous.configs[2]!.descriptors).toHaveLength(1);
  });

  it('a text longer than 8 MiB is refused without parsing', () => {
    const { problems } = validateFiles([
      { name: 'big.yaml', content: 'x'.repeat(MAX_RULE_FILE_LENGTH + 1) },
    ]);
    expect(problems).toEqual([
      {
        file: 'big.yaml',
        path: '',
        message: `error loading config file: the file is ${MAX_RULE_FILE_LENGTH + 1} characters long; at most ${MAX_RULE_FILE_LENGTH} are allowed; split it into several files`,
      },
    ]);
    expect(
      validateFiles([
        { name: 'edge.yaml', content: `${rulesFile(1)}#`.padEnd(MAX_RULE_FILE_LENGTH, '#') },
      ]).problems,
    ).toEqual([]);
  });

  it('sluice check refuses a bomb and a huge file on disk with clear messages', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-bounds-'));
    try {
      await writeFile(join(dir, 'bomb.yaml'), aliasBomb(7));
      await writeFile(join(dir, 'big.yaml'), '');
      await truncate(join(dir, 'big.yaml'), MAX_RULE_FILE_LENGTH + 1);
      const result = await checkConfig([dir]);
      expect(result.ok).toBe(false);
      expect(result.problems.map((p) => [p.file, p.message])).toEqual([
        [
          join(dir, 'big.yaml'),
          `error reading config file: the file is ${MAX_RULE_FILE_LENGTH + 1} bytes long; at most ${MAX_RULE_FILE_LENGTH} are allowed; split it into several files`,
        ],
        [
          join(dir, 'bomb.yaml'),
          expect.stringContaining('expands to more than 1000000 YAML nodes'),
        ],
      ]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
