/**
 * RateLimitConfig resources -> rule sets: what each message field becomes, and the validation the
 * file source applies, with every problem named by resource and path.
 */
import path from 'node:path';
import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { buildSnapshot } from '../../../../src/config/snapshot.js';
import { NO_RULES } from '../../../../src/config/source.js';
import type { ConfigError } from '../../../../src/errors.js';
import { formatConfigProblem, SluiceError } from '../../../../src/errors.js';
import { PROTO_DIR } from '../../../../src/transport/grpc/proto.js';
import {
  decodeRuleSets,
  RATE_LIMIT_CONFIG_TYPE_URL,
  RLS_CONF_PROTO,
  withoutPosition,
} from '../../../../src/transport/xds/resources.js';

const root = new protobuf.Root();
root.resolvePath = (_origin, target) =>
  path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
root.loadSync(RLS_CONF_PROTO, { keepCase: true });
const RateLimitConfig = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');

function resource(config: Record<string, unknown>): { type_url: string; value: Uint8Array } {
  return {
    type_url: RATE_LIMIT_CONFIG_TYPE_URL,
    value: RateLimitConfig.encode(RateLimitConfig.fromObject(config)).finish(),
  };
}

/** The problems of building `resources`, formatted as the NACK lists them. */
function problems(resources: ReturnType<typeof resource>[]): string[] {
  const decoded = decodeRuleSets(resources);
  try {
    buildSnapshot(decoded.inputs, { defaultAlgorithm: 'fixed_window' });
  } catch (error) {
    return (error as ConfigError).problems.map(withoutPosition).map(formatConfigProblem);
  }
  return decoded.problems.map(formatConfigProblem);
}

describe('RateLimitConfig -> rule set', () => {
  it('maps every field, named by the resource name', () => {
    const { inputs, problems: found } = decodeRuleSets([
      resource({
        name: 'edge-rules',
        domain: 'edge',
        descriptors: [
          {
            key: 'client',
            value: 'vip',
            rate_limit: {
              unit: 'WEEK',
              requests_per_unit: 7,
              name: 'vip',
              replaces: [{ name: 'base' }],
            },
            shadow_mode: true,
            detailed_metric: true,
            quota_mode: true,
            metadata: {
              fields: {
                team: { stringValue: 'payments' },
                tier: { numberValue: 2 },
                on: { boolValue: true },
                tags: { listValue: { values: [{ stringValue: 'a' }] } },
                nested: { structValue: { fields: { k: { nullValue: 0 } } } },
              },
            },
            descriptors: [{ key: 'path', rate_limit: { unlimited: true } }],
          },
        ],
      }),
    ]);
    expect(found).toEqual([]);
    expect(inputs).toHaveLength(1);
    expect(inputs[0]!.name).toBe('edge-rules');
    expect(JSON.parse(inputs[0]!.content)).toEqual({
      domain: 'edge',
      descriptors: [
        {
          key: 'client',
          value: 'vip',
          rate_limit: {
            unit: 'WEEK',
            requests_per_unit: 7,
            name: 'vip',
            replaces: [{ name: 'base' }],
          },
          shadow_mode: true,
          detailed_metric: true,
          quota_mode: true,
          metadata: { team: 'payments', tier: 2, on: true, tags: ['a'], nested: { k: null } },
          // An unlimited rule with unit UNKNOWN (the default) is a rule without a unit.
          descriptors: [{ key: 'path', rate_limit: { requests_per_unit: 0, unlimited: true } }],
        },
      ],
    });
    const snapshot = buildSnapshot(inputs, { defaultAlgorithm: 'fixed_window' });
    expect(snapshot.dump()).toEqual([
      'edge.client_vip.path: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false',
      'edge.client_vip: unit=WEEK requests_per_unit=7, shadow_mode: true, quota_mode: true',
    ]);
  });

  it('names every problem of every resource, without line numbers of a text nobody wrote', () => {
    expect(
      problems([
        resource({
          name: 'a',
          domain: 'x',
          descriptors: [{ key: '', rate_limit: { unit: 'HOUR' } }],
        }),
        resource({
          name: 'b',
          domain: 'y',
          descriptors: [{ key: 'k', rate_limit: { unit: 'UNKNOWN' } }],
        }),
        resource({
          name: 'c',
          domain: 'z',
          descriptors: [{ key: 'k', rate_limit: { unit: 'SECOND', unlimited: true } }],
        }),
      ]),
    ).toEqual([
      'a: descriptors[0].key: descriptor has empty key',
      "b: descriptors[0].rate_limit.unit: invalid rate limit unit 'UNKNOWN'; use one of second, minute, hour, day, week, month or year",
      'c: descriptors[0].rate_limit.unit: should not specify rate limit unit when unlimited; remove the unit line',
    ]);
  });

  it('refuses two rule sets of one domain, as two files of one domain', () => {
    expect(
      problems([
        resource({ name: 'one', domain: 'edge' }),
        resource({ name: 'two', domain: 'edge' }),
      ]).join('\n'),
    ).toMatch(/duplicate domain 'edge'/);
  });

  it('names a unit number the proto does not know, as the reference does', () => {
    const encoded = resource({ name: 'n', domain: 'd', descriptors: [{ key: 'k' }] });
    // descriptors[0].rate_limit.unit = 9, written by hand: field 3 { field 3 { field 1 = 9 } }.
    const bytes = Buffer.concat([
      Buffer.from(encoded.value),
      Buffer.from([0x1a, 0x07, 0x0a, 0x01, 0x6b, 0x1a, 0x02, 0x08, 0x09]),
    ]);
    expect(problems([{ type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: bytes }])).toEqual([
      "n: descriptors[1].rate_limit.unit: invalid rate limit unit '9'; use one of second, minute, hour, day, week, month or year",
      "n: descriptors[1]: duplicate descriptor composite key 'd.k'; it is first defined earlier",
    ]);
  });

  it('refuses resources of another type or that do not decode', () => {
    const { inputs, problems: found } = decodeRuleSets([
      { type_url: 'type.googleapis.com/envoy.config.cluster.v3.Cluster', value: new Uint8Array() },
      { type_url: RATE_LIMIT_CONFIG_TYPE_URL, value: new Uint8Array([0x0a, 0x05, 0x61]) },
    ]);
    expect(inputs).toEqual([]);
    expect(found.map(formatConfigProblem)).toEqual([
      'resources[0]: unexpected resource type "type.googleapis.com/envoy.config.cluster.v3.Cluster"; expected type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig',
      expect.stringMatching(/^resources\[1\]: cannot decode RateLimitConfig: /),
    ]);
  });

  it('names a resource without a name by its place', () => {
    expect(decodeRuleSets([resource({ domain: 'd' })]).inputs[0]!.name).toBe('resources[0]');
  });
});

describe('before the first rule set', () => {
  it('has no domains and answers every lookup with NO_CONFIG', () => {
    expect(NO_RULES.domains.size).toBe(0);
    expect(NO_RULES.dump()).toEqual([]);
    let thrown: unknown;
    try {
      NO_RULES.getLimit('edge', {
        entries: [{ key: 'k', value: 'v' }],
        limit: undefined,
        hitsAddend: undefined,
      });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SluiceError);
    expect(thrown).toMatchObject({
      code: 'NO_CONFIG',
      message: 'no rate limit configuration loaded',
    });
  });
});
