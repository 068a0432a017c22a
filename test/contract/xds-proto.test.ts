/**
 * The xDS protos in proto/ against their published sources:
 * - the ADS messages (DiscoveryRequest/Response, Node, google.rpc.Status) against Envoy's own
 *   protos (the copy in the devDependency @grpc/grpc-js-xds): every message, field and method we
 *   declare exists there with the same number, type and label, and a request encoded with ours
 *   decodes with Envoy's to the same values;
 * - RateLimitConfig against the descriptor compiled into go-control-plane/ratelimit v0.1.0 (what
 *   Envoy Gateway and the reference's tests send), printed by test/tools/xds-server, plus the
 *   fields and units the reference's rls_conf.proto added after v0.1.0.
 */
import { spawnSync } from 'node:child_process';
import protobuf from 'protobufjs';
import { beforeAll, describe, expect, it } from 'vitest';
import { PROTO_DIR } from '../../src/transport/grpc/proto.js';
import { RLS_CONF_PROTO } from '../../src/transport/xds/resources.js';
import { ADS_PROTO } from '../../src/transport/xds/source.js';
import { ENVOY_INCLUDE_DIRS } from '../helpers/envoy-rls-client.js';
import { compareProtos, loadProtoRoot, protoDeclarations } from '../helpers/proto-root.js';
import { buildXdsServer, requireXdsServer } from '../helpers/xds-server.js';

describe("proto/'s ADS messages match Envoy's published protos", () => {
  const ours = loadProtoRoot(ADS_PROTO, [PROTO_DIR]);
  const envoys = loadProtoRoot(ADS_PROTO, ENVOY_INCLUDE_DIRS);
  const ourTypes = protoDeclarations(ours, ['envoy', 'google.rpc']);
  const envoyTypes = protoDeclarations(envoys, ['envoy', 'google.rpc']);

  it('declares what the client speaks', () => {
    expect([...ourTypes.keys()].sort()).toEqual([
      'envoy.config.core.v3.Node',
      'envoy.service.discovery.v3.AggregatedDiscoveryService',
      'envoy.service.discovery.v3.DiscoveryRequest',
      'envoy.service.discovery.v3.DiscoveryResponse',
      'google.rpc.Status',
    ]);
  });

  it('every field has the number, type and label of the same field in Envoy', () => {
    const { mismatches, compared } = compareProtos(ours, envoys, ['envoy', 'google.rpc']);
    expect(mismatches).toEqual([]);
    expect(compared).toBeGreaterThan(15);
  });

  it('the stream is bidirectional, as Envoy declares it', () => {
    const ourMethod = (
      ourTypes.get('envoy.service.discovery.v3.AggregatedDiscoveryService') as protobuf.Service
    ).methods['StreamAggregatedResources']!;
    const theirMethod = (
      envoyTypes.get('envoy.service.discovery.v3.AggregatedDiscoveryService') as protobuf.Service
    ).methods['StreamAggregatedResources']!;
    expect({
      request: ourMethod.resolvedRequestType?.fullName,
      response: ourMethod.resolvedResponseType?.fullName,
      requestStream: ourMethod.requestStream,
      responseStream: ourMethod.responseStream,
    }).toEqual({
      request: theirMethod.resolvedRequestType?.fullName,
      response: theirMethod.resolvedResponseType?.fullName,
      requestStream: theirMethod.requestStream,
      responseStream: theirMethod.responseStream,
    });
  });

  it('a NACK encoded with ours decodes with Envoy’s to the same values', () => {
    const nack = {
      version_info: '2',
      node: {
        id: 'envoy-ratelimit',
        cluster: 'c',
        metadata: { fields: { zone: { stringValue: 'z1' } } },
        user_agent_name: 'sluice',
        user_agent_version: '0.1.0',
      },
      resource_names: ['edge'],
      type_url: 'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig',
      response_nonce: '7',
      error_detail: { code: 3, message: 'edge: descriptors[0].key: descriptor has empty key' },
    };
    const ourType = ours.lookupType('envoy.service.discovery.v3.DiscoveryRequest');
    const theirType = envoys.lookupType('envoy.service.discovery.v3.DiscoveryRequest');
    const bytes = ourType.encode(ourType.fromObject(nack)).finish();
    expect(theirType.toObject(theirType.decode(bytes), { oneofs: false })).toEqual(nack);
  });
});

const requirement = requireXdsServer('xds-proto');

describe.skipIf(requirement.skip)("proto/'s RateLimitConfig matches go-control-plane's", () => {
  /** Fields and enum values of the reference's rls_conf.proto that v0.1.0 predates. */
  const NEWER_THAN_V0_1_0 = {
    fields: { 'RateLimitDescriptor.quota_mode': 7, 'RateLimitDescriptor.metadata': 8 },
    units: { MONTH: 5, YEAR: 6, WEEK: 7 },
  };

  interface GoField {
    name: string;
    number: number;
    label: string;
    type: string;
    typeName?: string;
  }
  interface GoDescriptor {
    package: string;
    messageType: { name: string; field: GoField[] }[];
    enumType: { name: string; value: { name: string; number?: number }[] }[];
  }
  let go: GoDescriptor;
  const ours = loadProtoRoot(RLS_CONF_PROTO, [PROTO_DIR]);

  beforeAll(() => {
    const binary = buildXdsServer(requirement);
    const result = spawnSync(binary, ['-descriptor'], { encoding: 'utf8', timeout: 30_000 });
    expect(result.status, result.stderr).toBe(0);
    go = JSON.parse(result.stdout) as GoDescriptor;
  }, 600_000);

  it('has the same package, messages and fields (number, type, label)', () => {
    expect(go.package).toBe('ratelimit.config.ratelimit.v3');
    const ourMessages = protoDeclarations(ours, ['ratelimit']);
    const seen = new Set<string>();
    for (const message of go.messageType) {
      const type = ourMessages.get(`${go.package}.${message.name}`);
      expect(type, message.name).toBeInstanceOf(protobuf.Type);
      for (const field of message.field) {
        const ourField = (type as protobuf.Type).fields[field.name];
        expect(ourField, `${message.name}.${field.name}`).toBeDefined();
        seen.add(`${message.name}.${field.name}`);
        const goType =
          field.typeName !== undefined
            ? field.typeName.slice(1)
            : field.type.replace(/^TYPE_/, '').toLowerCase();
        const ourType = ourField!.resolvedType
          ? ourField!.resolvedType.fullName.slice(1)
          : ourField!.type;
        expect({ number: ourField!.id, type: ourType, repeated: ourField!.repeated }).toEqual({
          number: field.number,
          type: goType,
          repeated: field.label === 'LABEL_REPEATED',
        });
      }
    }
    // Ours has exactly those, plus the two newer fields at the reference's numbers.
    for (const [name, type] of ourMessages) {
      if (!(type instanceof protobuf.Type)) continue;
      for (const field of type.fieldsArray) {
        const key = `${name.split('.').pop()!}.${field.name}`;
        if (seen.has(key)) continue;
        expect(NEWER_THAN_V0_1_0.fields, key).toHaveProperty([key], field.id);
      }
    }
    const metadata = (ourMessages.get(`${go.package}.RateLimitDescriptor`) as protobuf.Type).fields[
      'metadata'
    ]!;
    expect(metadata.resolvedType?.fullName).toBe('.google.protobuf.Struct');
  });

  it('has the same units, plus the ones added after v0.1.0', () => {
    const goUnits = Object.fromEntries(
      go.enumType
        .find((e) => e.name === 'RateLimitUnit')!
        .value.map((v) => [v.name, v.number ?? 0]),
    );
    const ourUnits = ours.lookupEnum(`${go.package}.RateLimitUnit`).values;
    expect(ourUnits).toEqual({ ...goUnits, ...NEWER_THAN_V0_1_0.units });
  });
});
