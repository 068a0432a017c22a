import { describe, expect, it } from 'vitest';
import type { LimitMatch } from '../../../src/config/types.js';
import { counterKey, escapeKeyPart } from '../../../src/limiter/keys.js';
import type { DescriptorEntry } from '../../../src/model.js';
import { makeRule } from '../../helpers/rules.js';
import { mulberry32 } from '../../helpers/sliding-model.js';

const RULE = makeRule({ requestsPerUnit: 10, fullKey: 'edge.remote_address' });

/** A match whose entry at `sharedEntryIndex` is shared under `sharedPattern` (none by default). */
function match(sharedPattern?: string, sharedEntryIndex = -1): LimitMatch {
  if (sharedPattern === undefined || sharedEntryIndex < 0)
    return { rule: RULE, sharedPatterns: undefined };
  const sharedPatterns: (string | undefined)[] = new Array<string | undefined>(
    sharedEntryIndex + 1,
  ).fill(undefined);
  sharedPatterns[sharedEntryIndex] = sharedPattern;
  return { rule: RULE, sharedPatterns };
}

function entries(...pairs: [string, string][]): DescriptorEntry[] {
  return pairs.map(([key, value]) => ({ key, value }));
}

function key(domain: string, pairs: [string, string][], windowMs = 60_000): string {
  return counterKey(domain, entries(...pairs), match(), windowMs);
}

describe('counterKey', () => {
  it('is readable when nothing needs escaping', () => {
    expect(key('edge', [['remote_address', '1.2.3.4']])).toBe(
      'sw|60000|edge|remote_address=1.2.3.4',
    );
    expect(
      key('edge', [
        ['a', 'b'],
        ['c', ''],
      ]),
    ).toBe('sw|60000|edge|a=b|c=');
    expect(key('edge', [])).toBe('sw|60000|edge');
  });

  it('escapes the separators and the escape character', () => {
    expect(escapeKeyPart('plain')).toBe('plain');
    expect(escapeKeyPart('a|b=c#d\\e')).toBe('a\\|b\\=c\\#d\\\\e');
    expect(key('d|x', [['k=', 'v|#\\']])).toBe('sw|60000|d\\|x|k\\==v\\|\\#\\\\');
  });

  it('keeps the classic look-alike descriptors apart', () => {
    const distinct = [
      key('edge', [['a', 'b_c']]),
      key('edge', [['a_b', 'c']]),
      key('edge', [['a', 'b|c=d']]),
      key('edge', [
        ['a', 'b'],
        ['c', 'd'],
      ]),
      key('edge', [['a=b', 'c']]),
      key('edge', [['a', 'b=c']]),
      key('edge', [['a', '']]),
      key('edge', [
        ['a', ''],
        ['', ''],
      ]),
      key('edge', [['', 'a']]),
      key('edge', []),
      key('edge|a=b', []),
      key('edge', [['a', 'b']]),
      key('edge', [['a', 'b\\']]),
      key('edge', [
        ['a', 'b\\'],
        ['c', 'd'],
      ]),
      key('edge', [['a', 'b\\|c=d']]),
      key('', [['', '']]),
      key('', []),
      key('edge', [['a', 'b']], 1_000),
    ];
    expect(new Set(distinct).size).toBe(distinct.length);
  });

  it('never maps two distinct descriptors to one key (random strings full of separators)', () => {
    const rand = mulberry32(20_240_601);
    const alphabet = ['a', 'b', '_', '|', '=', '#', '\\', '*', '.', ':'];
    const text = (): string => {
      let s = '';
      const length = Math.floor(rand() * 4);
      for (let k = 0; k < length; k++) s += alphabet[Math.floor(rand() * alphabet.length)]!;
      return s;
    };
    const byKey = new Map<string, string>();
    const byIdentity = new Map<string, string>();
    for (let n = 0; n < 30_000; n++) {
      const domain = text();
      const list = Array.from({ length: Math.floor(rand() * 3) }, () => ({
        key: text(),
        value: text(),
      }));
      const windowMs = rand() < 0.5 ? 1_000 : 60_000;
      const sharedIndex = list.length > 0 && rand() < 0.3 ? Math.floor(rand() * list.length) : -1;
      const pattern = sharedIndex >= 0 ? text() : undefined;
      const k = counterKey(domain, list, match(pattern, sharedIndex), windowMs);
      // What the counter must be identified by: a shared entry's value does not matter.
      const identity = JSON.stringify([
        windowMs,
        domain,
        list.map((e, i) => (i === sharedIndex ? [e.key, 'pattern', pattern] : [e.key, e.value])),
      ]);
      const seenIdentity = byKey.get(k);
      if (seenIdentity !== undefined && seenIdentity !== identity) {
        expect.fail(`${seenIdentity} and ${identity} share the key ${k}`);
      }
      const seenKey = byIdentity.get(identity);
      if (seenKey !== undefined && seenKey !== k)
        expect.fail(`${identity} got ${seenKey} and ${k}`);
      byKey.set(k, identity);
      byIdentity.set(identity, k);
    }
    // Short strings over a small alphabet: many identities must have repeated.
    expect(byIdentity.size).toBeLessThan(30_000);
    expect(byKey.size).toBe(byIdentity.size);
  });

  it('share_threshold: every value matching the wildcard shares one counter', () => {
    const shared = match('user_*', 1);
    const a = counterKey('edge', entries(['path', '/x'], ['user', 'user_1']), shared, 60_000);
    const b = counterKey('edge', entries(['path', '/x'], ['user', 'user_2']), shared, 60_000);
    expect(a).toBe(b);
    expect(a).toBe('sw|60000|edge|path=/x|user#user_*');
    // Other entries still count per value.
    const c = counterKey('edge', entries(['path', '/y'], ['user', 'user_1']), shared, 60_000);
    expect(c).not.toBe(a);
  });

  it('share_threshold: a pattern never collides with a value spelled like it', () => {
    const viaPattern = counterKey('edge', entries(['user', 'user_1']), match('user_*', 0), 60_000);
    const literal = counterKey('edge', entries(['user', 'user_*']), match(), 60_000);
    expect(viaPattern).not.toBe(literal);
  });

  it('share_threshold: keeps the value where the slot holds no pattern', () => {
    const m: LimitMatch = { rule: RULE, sharedPatterns: [undefined] };
    expect(counterKey('edge', entries(['user', 'u1']), m, 60_000)).toBe('sw|60000|edge|user=u1');
  });

  it('share_threshold: honours sharedPatterns at several levels', () => {
    const m: LimitMatch = {
      rule: RULE,
      sharedPatterns: ['a*', undefined, 'b*'],
    };
    const list = entries(['k1', 'a1'], ['k2', 'v'], ['k3', 'b1']);
    expect(counterKey('edge', list, m, 60_000)).toBe('sw|60000|edge|k1#a*|k2=v|k3#b*');
  });

  it('includes the window and the algorithm', () => {
    const a = counterKey('edge', entries(['k', 'v']), match(), 1_000);
    const b = counterKey('edge', entries(['k', 'v']), match(), 60_000);
    expect(a).not.toBe(b);
    expect(a.startsWith('sw|1000|')).toBe(true);
  });
});
