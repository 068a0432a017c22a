import dgram from 'node:dgram';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../../src/logging/logger.js';
import { createMetrics, sanitizeStatName } from '../../../src/metrics/metrics.js';
import { RULE_SERIES } from '../../../src/metrics/rule-series.js';
import {
  compileGoPattern,
  formatLine,
  mogrify,
  safeStatsKey,
  tagSuffix,
  type Mogrifier,
} from '../../../src/metrics/statsd-format.js';
import { propertyRuns } from '../../helpers/property-budget.js';
import {
  collectLines,
  createLatencyReservoir,
  createStatsdSink,
} from '../../../src/metrics/statsd.js';

const rlMogrifier: Mogrifier = {
  label: 'RL',
  pattern: compileGoPattern(
    String.raw`^ratelimit\.service\.rate_limit\.(?P<domain>[^.]+)\.(.*)\.([^.]+)$`,
  ),
  name: 'ratelimit.service.rate_limit.$3',
  tags: [
    { key: 'domain', value: '$1' },
    { key: 'descriptor', value: '$2' },
    { key: 'missing', value: '$9' },
  ],
};

describe('statsd line format', () => {
  it('serialises EXTRA_TAGS the gostats way: sorted, cleaned, empty pairs dropped', () => {
    expect(
      tagSuffix([
        { key: 'zone', value: 'eu.west:1|a' },
        { key: 'env', value: 'prod' },
        { key: 'skip', value: '' },
      ]),
    ).toBe('.__env=prod.__zone=eu_west_1_a');
    expect(tagSuffix([])).toBe('');
  });

  it('writes statsd and DogStatsD lines, with the sample rate only when sampled', () => {
    expect(formatLine('a.b.__env=prod', 3, 'c', 1, undefined)).toBe('a.b.__env=prod:3|c');
    expect(formatLine('a.b', 1.25, 'ms', 0.5, undefined)).toBe('a.b:1.25|ms|@0.5');
    expect(formatLine('a.b.__env=prod', 3, 'c', 1, { mogrifiers: [] })).toBe('a.b:3|c|#env:prod');
    expect(formatLine('a.b', 2, 'ms', 0.25, { mogrifiers: [] })).toBe('a.b:2|ms|@0.25');
  });

  it("applies the first matching mogrifier, the reference's $n rules included", () => {
    expect(
      mogrify('ratelimit.service.rate_limit.edge.api_key.over_limit.__env=prod', [rlMogrifier]),
    ).toEqual({
      name: 'ratelimit.service.rate_limit.over_limit',
      tags: ['env:prod', 'domain:edge', 'descriptor:api_key', 'missing:$9'],
    });
    expect(mogrify('ratelimit_server.ShouldRateLimit.total_requests', [rlMogrifier])).toEqual({
      name: 'ratelimit_server.ShouldRateLimit.total_requests',
      tags: [],
    });
  });
});

describe('collectLines', () => {
  it('sends what grew since the last committed flush, and keeps growth a failed send left', () => {
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const stats = metrics.statsFor('edge.api_key');
    stats.totalHits = 5;
    stats.overLimit = 2;
    metrics.service.callsOk = 3;
    metrics.service.callsOverLimit = 2;
    metrics.service.configLoadSuccess = 1;
    const sent = new Map<string, number>();
    const none = { samples: new Float64Array(0), rate: 1 };
    const first = collectLines(metrics, sent, none, '.__env=prod', undefined);
    expect(first.lines).toEqual([
      'ratelimit.service.rate_limit.edge.api_key.total_hits.__env=prod:5|c',
      'ratelimit.service.rate_limit.edge.api_key.over_limit.__env=prod:2|c',
      'ratelimit.service.config_load_success.__env=prod:1|c',
      'ratelimit_server.ShouldRateLimit.total_requests.__env=prod:5|c',
    ]);
    // Not committed (the send failed): the next flush carries the whole growth.
    stats.totalHits = 6;
    const second = collectLines(metrics, sent, none, '', undefined);
    expect(second.lines[0]).toBe('ratelimit.service.rate_limit.edge.api_key.total_hits:6|c');
    second.commit();
    stats.totalHits = 7;
    const third = collectLines(metrics, sent, none, '', undefined);
    expect(third.lines).toEqual(['ratelimit.service.rate_limit.edge.api_key.total_hits:1|c']);
  });

  it('sends every per-rule series /metrics exports, from the one table both read', () => {
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const stats = metrics.statsFor('edge.api_key');
    RULE_SERIES.forEach(([, field], i) => (stats[field] = i + 1));
    const none = { samples: new Float64Array(0), rate: 1 };
    const lines = collectLines(metrics, new Map(), none, '', undefined).lines;
    expect(lines.filter((line) => line.startsWith('ratelimit.service.rate_limit.'))).toEqual(
      RULE_SERIES.map(
        ([suffix], i) => `ratelimit.service.rate_limit.edge.api_key.${suffix}:${i + 1}|c`,
      ),
    );
  });

  it('samples latencies into a bounded reservoir and sends the rate they stand for', () => {
    const reservoir = createLatencyReservoir(4);
    for (let i = 0; i < 16; i++) reservoir.add(0.002);
    const drained = reservoir.drain();
    expect(drained.samples.length).toBe(4);
    expect(drained.rate).toBe(0.25);
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    const { lines } = collectLines(metrics, new Map(), drained, '', undefined);
    expect(lines).toEqual(
      Array(4).fill('ratelimit_server.ShouldRateLimit.response_time:2|ms|@0.25'),
    );
    expect(reservoir.drain().samples.length).toBe(0);
  });
});

describe('the UDP sink', () => {
  it('packs whole lines into datagrams of at most 1432 bytes, and sends every line', async () => {
    const socket = dgram.createSocket('udp4');
    const datagrams: Buffer[] = [];
    socket.on('message', (message) => datagrams.push(message));
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    try {
      const latencies = createLatencyReservoir();
      const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
      // Multi-byte characters, so characters and bytes differ.
      for (let i = 0; i < 60; i++) metrics.statsFor(`edge.user_é${i}`).totalHits = i + 1;
      const sink = createStatsdSink({
        metrics,
        latencies,
        host: '127.0.0.1',
        port: socket.address().port,
        protocol: 'udp',
        flushIntervalMs: 3_600_000,
        extraTags: [],
        logger: createLogger({ level: 'fatal', format: 'json' }),
      });
      await sink.close();
      const want = Array.from(
        { length: 60 },
        (_, i) => `ratelimit.service.rate_limit.edge.user_é${i}.total_hits:${i + 1}|c`,
      );
      const lines = () => datagrams.flatMap((d) => d.toString('utf8').split('\n').filter(Boolean));
      await vi.waitFor(() => expect(lines().length).toBeGreaterThanOrEqual(want.length), {
        timeout: 5_000,
        interval: 10,
      });
      expect(datagrams.length).toBeGreaterThan(1);
      for (const d of datagrams) {
        expect(d.length).toBeLessThanOrEqual(1432);
        expect(d.toString('utf8').endsWith('\n')).toBe(true);
      }
      expect(lines().sort()).toEqual(want.sort());
    } finally {
      socket.close();
    }
  });
});

describe('bytes a client controls (issue 31, item 2)', () => {
  // Stats keys as the service builds them from request values: `domain.key_value`, sanitised the
  // reference's way (`:` and `|` only), so everything else reaches the formatter as sent. Distinct
  // after sanitising, so every counter of every key must come out under a name of its own.
  const hostile = [
    'edge.user_x\nevil.injected:1|c',
    'edge.user_x\r\nevil:1|c',
    'edge.user_a.__tenant=evil',
    'edge.user_b#tag=evil',
    'edge.user_c,tag=evil',
    'edge.user_d[tag=evil]',
    'edge.user_e@0.5',
    'edge.user_f|#tag_evil',
    'edge.user_g:1|c',
    'edge.user_\u0000nul\u007f',
    'edge.user_h\u2028x\u0085y',
  ].map(sanitizeStatName);
  const none = { samples: new Float64Array(0), rate: 1 };
  const fields = ['total_hits', 'over_limit', 'near_limit', 'within_limit', 'shadow_mode'];

  /** Lines for one counter per field of each key, as a flush would send them. */
  const flushOf = (keys: string[], dog: { mogrifiers: readonly Mogrifier[] } | undefined) => {
    const metrics = createMetrics({ nearLimitRatio: 0.8, processMetrics: false });
    for (const key of keys) {
      const stats = metrics.requestStatsFor(key, 'edge.user');
      stats.totalHits = 1;
      stats.overLimit = 2;
      stats.nearLimit = 3;
      stats.withinLimit = 4;
      stats.shadowMode = 5;
    }
    return collectLines(metrics, new Map(), none, '.__env=prod', dog).lines.join('\n');
  };

  /** A plain statsd line: a name free of the separators, one value, one type; tags only ours. */
  const STATSD_LINE = /^([^:|@#,[\]\s\u0085\u2028]+):(\d+)\|c$/;

  it('plain statsd: one well-formed line per counter, no tag but EXTRA_TAGS', () => {
    const lines = flushOf(hostile, undefined).split('\n');
    expect(lines).toHaveLength(hostile.length * fields.length);
    const names = new Set<string>();
    for (const line of lines) {
      const match = STATSD_LINE.exec(line);
      expect(match, line).not.toBeNull();
      const name = match![1]!;
      // The only gostats tag marker left is EXTRA_TAGS' own, at the end.
      expect(name.indexOf('.__'), line).toBe(name.length - '.__env=prod'.length);
      expect(
        fields.some((f) => name.endsWith(`.${f}.__env=prod`)),
        line,
      ).toBe(true);
      names.add(name);
    }
    expect(names.size).toBe(lines.length);
  });

  it('DogStatsD: every line keeps its counter name and only the tags it was given', () => {
    const lines = flushOf(hostile, { mogrifiers: [] }).split('\n');
    expect(lines).toHaveLength(hostile.length * fields.length);
    const seen = new Set<string>();
    for (const line of lines) {
      const match = /^([^:|@#,\s]+):(\d+)\|c\|#env:prod$/.exec(line);
      expect(match, line).not.toBeNull();
      expect(
        fields.some((f) => match![1]!.endsWith(`.${f}`)),
        line,
      ).toBe(true);
      seen.add(match![1]!);
    }
    // total_hits and within_limit of the same key no longer collide.
    expect(seen.size).toBe(lines.length);
  });

  it("DogStatsD: a ',' in a mogrifier capture adds no tag", () => {
    const text = flushOf([sanitizeStatName('edge.user_a,b=1,c=2')], { mogrifiers: [rlMogrifier] });
    for (const line of text.split('\n')) {
      const tags = line.slice(line.indexOf('|#') + 2).split(',');
      expect(
        tags.map((t) => t.slice(0, t.indexOf(':'))),
        line,
      ).toEqual(['env', 'domain', 'descriptor', 'missing']);
    }
  });

  it('overflow series of different counters keep different names', () => {
    const metrics = createMetrics({
      nearLimitRatio: 0.8,
      processMetrics: false,
      maxSeriesPerRule: 0,
    });
    // One rule's overflow series, and the shared one (a rule key past 256 characters).
    const own = metrics.requestStatsFor('edge.user_a', 'edge.user');
    const shared = metrics.requestStatsFor(`edge.${'k'.repeat(300)}_a`, `edge.${'k'.repeat(300)}`);
    for (const stats of [own, shared]) {
      stats.totalHits = 1;
      stats.withinLimit = 1;
      stats.overLimit = 1;
    }
    for (const dog of [undefined, { mogrifiers: [] }]) {
      const lines = collectLines(metrics, new Map(), none, '', dog).lines.filter((l) =>
        l.startsWith('ratelimit.service.rate_limit.'),
      );
      const names = lines.map((l) => l.slice(0, l.indexOf(':')));
      expect(names, names.join('\n')).toHaveLength(6);
      expect(new Set(names).size, names.join('\n')).toBe(6);
      for (const line of lines) expect(line, line).not.toContain('|#');
    }
  });

  it('any key: one line per counter, its own name, no tag but EXTRA_TAGS (property)', () => {
    // Values drawn from every code point, and from the characters the formats give a meaning.
    const special = fc.constantFrom(...'\n\r\t\u0000\u0085\u2028\u2029:|@#,[]=._ '.split(''));
    const value = fc.string({
      unit: fc.oneof(special, fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })),
      maxLength: 40,
    });
    fc.assert(
      fc.property(value, (v) => {
        // As collectLines writes a per-rule counter.
        const key = safeStatsKey(sanitizeStatName(`edge.user_${v}`));
        for (const field of fields) {
          const name = `ratelimit.service.rate_limit.${key}.${field}.__env=prod`;
          const line = formatLine(name, 7, 'c', 1, undefined);
          expect(line, line).toMatch(/^[^\p{Cc}\p{Zl}\p{Zp}:|@#,[\]]+:7\|c$/u);
          expect(line.indexOf('.__'), line).toBe(
            line.indexOf(`.${field}.__env=prod:`) + field.length + 1,
          );
          const dog = formatLine(name, 7, 'c', 1, { mogrifiers: [rlMogrifier] });
          expect(dog, dog).toMatch(
            /^ratelimit\.service\.rate_limit\.[a-z_]+:7\|c\|#env:prod,domain:edge,descriptor:[^,|\p{Cc}]*,missing:\$9$/u,
          );
          expect(dog.startsWith(`ratelimit.service.rate_limit.${field}:`), dog).toBe(true);
        }
      }),
      { seed: 31, numRuns: propertyRuns(500) },
    );
  }, 60_000);

  it('EXTRA_TAGS and mogrifier output cannot break a line either', () => {
    expect(tagSuffix([{ key: 'a\nb,c#d', value: 'x\ny,z|w' }])).not.toMatch(/[\n,#|]/);
    const weird: Mogrifier = {
      label: 'W',
      pattern: compileGoPattern('^(.*)$'),
      name: 'renamed|\n$1',
      tags: [{ key: 'k', value: 'a,b|c\nd' }],
    };
    const line = formatLine('a.b', 1, 'c', 1, { mogrifiers: [weird] });
    expect(line).toMatch(/^[^:|\n]+:1\|c\|#[^|\n,]+$/);
  });
});
