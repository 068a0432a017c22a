/**
 * The one place rule sets are swapped in, whatever their source: the serving snapshot, the
 * `config_load_*` counters and the log lines.
 */
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../src/config/snapshot.js';
import { createServingConfig, NO_RULES } from '../../../src/config/source.js';
import { ConfigError } from '../../../src/errors.js';
import { capturingLogger } from '../../helpers/app.js';

const rules = (limit: number) =>
  buildSnapshot([
    {
      name: 'edge-rules',
      content: `domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: ${limit}}\n`,
    },
  ]);

describe('createServingConfig', () => {
  it('serves NO_RULES until a rule set arrives, then swaps, counts and logs each one', () => {
    const { logger, lines } = capturingLogger();
    const counters = { configLoadSuccess: 0, configLoadError: 0 };
    const serving = createServingConfig({ logger, counters, origin: 'xds' });
    expect(serving.current()).toBe(NO_RULES);
    expect(serving.loaded()).toBe(false);

    serving.onError(new ConfigError([{ file: 'a', path: 'domain', message: 'bad' }]));
    expect(serving.current()).toBe(NO_RULES);
    expect(counters).toEqual({ configLoadSuccess: 0, configLoadError: 1 });

    const first = rules(1);
    serving.onSnapshot(first);
    expect(serving.current()).toBe(first);
    expect(serving.loaded()).toBe(true);

    serving.onError(new ConfigError([{ file: 'b', path: '', message: 'worse' }]));
    expect(serving.current()).toBe(first);

    const second = rules(2);
    serving.onSnapshot(second);
    expect(serving.current()).toBe(second);
    expect(counters).toEqual({ configLoadSuccess: 2, configLoadError: 2 });
    expect(lines.map((line) => [line['msg'], line['problems'] ?? line['domains']])).toEqual([
      ['rate limit config refused; no rules are serving yet', ['a: domain: bad']],
      ['rate limit config loaded from xds source', ['edge']],
      ['rate limit config reload failed; the previous config keeps serving', ['b: worse']],
      ['rate limit config reloaded', ['edge']],
    ]);
  });
});
