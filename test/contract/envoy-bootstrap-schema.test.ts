/**
 * envoy/envoy.yaml against Envoy's published Bootstrap schema (envoy.config.bootstrap.v3.Bootstrap,
 * from the protos `@grpc/grpc-js-xds` ships), strictly: unknown fields, wrong scalar types, unknown
 * enum names, unresolvable `@type`s, malformed durations and the protoc-gen-validate rules all fail.
 * Broken copies prove the check can fail. Then the demo's wiring: the filter settings the issue asks
 * for, and every route's descriptor reaching a rule in envoy/ratelimit/*.yaml.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { DESCRIPTOR_KEYS, RATE_LIMIT_KEYS } from '../../src/config/validate.js';
import {
  BROKEN_BOOTSTRAPS,
  DEMO_RULES_DIR,
  camelCaseKeys,
  httpFilters,
  loadShippedEnvoyConfig,
  rateLimitFilterConfig,
  rewriteForLoopback,
  routes,
  type EnvoyConfig,
} from '../helpers/envoy.js';
import {
  createProtoSchema,
  envoyProtoIncludeDirs,
  type ProtoSchema,
} from '../helpers/proto-schema.js';

const BOOTSTRAP = 'envoy.config.bootstrap.v3.Bootstrap';

describe('envoy/envoy.yaml against envoy.config.bootstrap.v3.Bootstrap', () => {
  let schema: ProtoSchema;

  beforeAll(() => {
    schema = createProtoSchema({
      includeDirs: envoyProtoIncludeDirs(),
      files: ['envoy/config/bootstrap/v3/bootstrap.proto'],
    });
  });

  it('is valid, typed_config bodies included', () => {
    expect(schema.check(BOOTSTRAP, loadShippedEnvoyConfig())).toEqual([]);
  });

  it('resolves every @type it uses to a message type in Envoy protos', () => {
    const types = new Set<string>();
    const walk = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(walk);
      else if (typeof value === 'object' && value !== null) {
        for (const [k, v] of Object.entries(value)) {
          if (k === '@type' && typeof v === 'string') types.add(v);
          walk(v);
        }
      }
    };
    walk(loadShippedEnvoyConfig());
    expect([...types].sort()).toEqual([
      'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
      'type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit',
      'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router',
      'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
      'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
    ]);
    for (const url of types) expect(schema.hasType(url.split('/')[1] ?? ''), url).toBe(true);
  });

  it('accepts lowerCamelCase field names as Envoy does', () => {
    expect(schema.check(BOOTSTRAP, camelCaseKeys(loadShippedEnvoyConfig()))).toEqual([]);
  });

  it('reports a field given under both its names', () => {
    const config = loadShippedEnvoyConfig();
    rateLimitFilterConfig(config)['failureModeDeny'] = true;
    expect(schema.check(BOOTSTRAP, config)).toEqual([
      expect.objectContaining({
        message:
          'field "failure_mode_deny" given twice, as "failure_mode_deny" and "failureModeDeny"',
      }),
    ]);
  });

  it('reports deprecated fields (Envoy only warns; the demo stays on the current API)', () => {
    const config = loadShippedEnvoyConfig();
    routes(config)[0].route.include_vh_rate_limits = true;
    expect(schema.check(BOOTSTRAP, config)).toEqual([
      expect.objectContaining({
        message: expect.stringMatching(/deprecated field "include_vh_rate_limits"/),
      }),
    ]);
  });

  describe.each(BROKEN_BOOTSTRAPS.map((b) => [b.name, b] as const))(
    'fails on %s',
    (_name, broken) => {
      it('with exactly one issue at the broken spot', () => {
        const config: EnvoyConfig = loadShippedEnvoyConfig();
        broken.mutate(config);
        const issues = schema.check(BOOTSTRAP, config);
        expect(issues).toHaveLength(1);
        expect(issues[0]?.path.endsWith(broken.pathEndsWith), issues[0]?.path).toBe(true);
        expect(issues[0]?.message).toMatch(broken.message);
      });
    },
  );
});

/** Descriptor entry as an action produces it: a fixed value, or one only known per request. */
interface ActionEntry {
  readonly key: string;
  /** `undefined` when the value comes from the request (header, client address). */
  readonly value: string | undefined;
}

function entryOf(action: Record<string, any>): { kind: string; entry: ActionEntry } {
  const [kind, body] = Object.entries(action)[0] ?? ['(none)', {}];
  switch (kind) {
    case 'generic_key':
      return {
        kind,
        entry: { key: body.descriptor_key ?? 'generic_key', value: body.descriptor_value },
      };
    case 'request_headers':
      return { kind, entry: { key: body.descriptor_key, value: undefined } };
    case 'remote_address':
      return { kind, entry: { key: 'remote_address', value: undefined } };
    case 'header_value_match':
      return {
        kind,
        entry: { key: body.descriptor_key ?? 'header_match', value: body.descriptor_value },
      };
    default:
      throw new Error(`unexpected action kind ${String(kind)}`);
  }
}

interface RuleNode {
  key: string;
  value?: string;
  rate_limit?: { unit: string; requests_per_unit: number; name?: string };
  descriptors?: RuleNode[];
}

/** The reference's lookup for the demo's needs: exact value node, else the key-only node. */
function findRule(
  nodes: readonly RuleNode[],
  entries: readonly ActionEntry[],
): RuleNode | undefined {
  let level: readonly RuleNode[] = nodes;
  let node: RuleNode | undefined;
  for (const entry of entries) {
    node =
      (entry.value !== undefined
        ? level.find((n) => n.key === entry.key && n.value === entry.value)
        : undefined) ?? level.find((n) => n.key === entry.key && n.value === undefined);
    if (!node) return undefined;
    level = node.descriptors ?? [];
  }
  return node;
}

describe('the demo wiring (envoy/envoy.yaml + envoy/ratelimit/*.yaml)', () => {
  const config = loadShippedEnvoyConfig();
  const ruleFiles = readdirSync(DEMO_RULES_DIR).filter((f) => /\.ya?ml$/.test(f));
  const ruleDocs = ruleFiles.map(
    (f) => parse(readFileSync(path.join(DEMO_RULES_DIR, f), 'utf8')) as Record<string, any>,
  );

  it('listens on 0.0.0.0:10000 with admin on 0.0.0.0:9901', () => {
    expect(config['admin'].address.socket_address).toEqual({
      address: '0.0.0.0',
      port_value: 9901,
    });
    expect(config['static_resources'].listeners[0].address.socket_address).toEqual({
      address: '0.0.0.0',
      port_value: 10000,
    });
  });

  it('runs the rate limit filter before the router, fail-open, V3, with x-ratelimit headers', () => {
    expect(httpFilters(config).map((f) => f.name)).toEqual([
      'envoy.filters.http.ratelimit',
      'envoy.filters.http.router',
    ]);
    const rl = rateLimitFilterConfig(config);
    expect(rl).toMatchObject({
      domain: ruleDocs[0]?.['domain'],
      failure_mode_deny: false,
      enable_x_ratelimit_headers: 'DRAFT_VERSION_03',
      rate_limit_service: {
        transport_api_version: 'V3',
        grpc_service: { envoy_grpc: { cluster_name: 'sluice' } },
      },
    });
    expect(rl['timeout']).toMatch(/^\d+(\.\d+)?s$/);
  });

  it('reaches sluice over HTTP/2 at sluice:8081 and the upstream at upstream:8080', () => {
    const clusters = config['static_resources'].clusters as any[];
    const byName = new Map(clusters.map((c) => [c.name, c]));
    expect(byName.get('sluice')).toMatchObject({
      type: 'STRICT_DNS',
      typed_extension_protocol_options: {
        'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
          explicit_http_config: { http2_protocol_options: {} },
        },
      },
    });
    const endpoint = (name: string): unknown =>
      byName.get(name).load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address;
    expect(endpoint('sluice')).toEqual({ address: 'sluice', port_value: 8081 });
    expect(endpoint('upstream')).toEqual({ address: 'upstream', port_value: 8080 });
    expect(byName.get('upstream').type).toBe('STRICT_DNS');
  });

  it('uses generic_key, request_headers, remote_address, header_value_match and a nested pair', () => {
    const rateLimits = routes(config).flatMap((r) => (r.route?.rate_limits ?? []) as any[]);
    const kinds = new Set(
      rateLimits.flatMap((rl) => (rl.actions as any[]).map((a) => entryOf(a).kind)),
    );
    expect([...kinds].sort()).toEqual([
      'generic_key',
      'header_value_match',
      'remote_address',
      'request_headers',
    ]);
    expect(rateLimits.some((rl) => rl.actions.length === 2)).toBe(true);
  });

  it('has one domain per file, in the reference format only (no sluice-only keys)', () => {
    expect(ruleDocs.length).toBeGreaterThan(0);
    // The reference's keys, as sluice's validator knows them.
    const nodeKeys = new Set<string>(DESCRIPTOR_KEYS);
    const limitKeys = new Set<string>(RATE_LIMIT_KEYS);
    const walk = (nodes: RuleNode[], at: string): void => {
      nodes.forEach((node, i) => {
        for (const k of Object.keys(node)) expect(nodeKeys, `${at}[${i}].${k}`).toContain(k);
        for (const k of Object.keys(node.rate_limit ?? {})) {
          expect(limitKeys, `${at}[${i}].rate_limit.${k}`).toContain(k);
        }
        walk(node.descriptors ?? [], `${at}[${i}].descriptors`);
      });
    };
    for (const [i, doc] of ruleDocs.entries()) {
      expect(Object.keys(doc).sort(), ruleFiles[i]).toEqual(['descriptors', 'domain']);
      walk(doc['descriptors'] as RuleNode[], `${ruleFiles[i]}: descriptors`);
    }
  });

  it("sends every route's descriptor to a rule of its own, with distinct limits", () => {
    const domain = rateLimitFilterConfig(config)['domain'] as string;
    const rules = ruleDocs.find((d) => d['domain'] === domain)?.['descriptors'] as RuleNode[];
    expect(rules, `a rules file for domain ${domain}`).toBeDefined();
    const hit = routes(config).flatMap((r) =>
      ((r.route?.rate_limits ?? []) as any[]).map((rl) => {
        const entries = (rl.actions as any[]).map((a) => entryOf(a).entry);
        const rule = findRule(rules, entries);
        expect(rule?.rate_limit, `rule for ${JSON.stringify(r.match)}`).toBeDefined();
        return { match: r.match as Record<string, string>, limit: rule?.rate_limit };
      }),
    );
    const perUnit = hit.map((h) => h.limit?.requests_per_unit);
    expect(new Set(perUnit).size).toBe(perUnit.length);
    // A plain `curl localhost:10000/` loop turns into 429s within a handful of requests.
    const catchAll = hit.find((h) => h.match['prefix'] === '/');
    expect(catchAll?.limit).toMatchObject({ unit: 'minute' });
    expect(catchAll?.limit?.requests_per_unit).toBeLessThanOrEqual(10);
  });
});

/** A deep copy of `value` without any `socket_address` key, wherever it appears. */
function withoutSocketAddresses(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutSocketAddresses);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== 'socket_address')
      .map(([k, v]) => [k, withoutSocketAddresses(v)]),
  );
}

/** Every `socket_address` object in `value`, with the JSON path to it. */
function socketAddresses(value: unknown, at = ''): { at: string; address: unknown }[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => socketAddresses(v, `${at}[${i}]`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) =>
    k === 'socket_address'
      ? [{ at: `${at}.${k}`, address: v }]
      : socketAddresses(v, at === '' ? k : `${at}.${k}`),
  );
}

describe('the loopback rewrite of envoy/envoy.yaml (e2e tier and scripts/demo-envoy.sh)', () => {
  const ports = { listenerPort: 41000, adminPort: 41001, sluicePort: 41002, upstreamPort: 41003 };
  const shipped = loadShippedEnvoyConfig();
  const rewritten = rewriteForLoopback(shipped, ports);

  it('changes nothing but socket addresses', () => {
    expect(socketAddresses(shipped).length).toBeGreaterThan(0);
    expect(withoutSocketAddresses(rewritten)).toEqual(withoutSocketAddresses(shipped));
    expect(shipped, 'the shipped config is not modified in place').toEqual(
      loadShippedEnvoyConfig(),
    );
  });

  it('puts every socket address on loopback at its port, its other fields kept', () => {
    const sluiceEndpoint =
      'static_resources.clusters[0].load_assignment.endpoints[0].lb_endpoints[0].endpoint.address.socket_address';
    const upstreamEndpoint = sluiceEndpoint.replace('clusters[0]', 'clusters[1]');
    const expectedPorts: Record<string, number> = {
      'admin.address.socket_address': ports.adminPort,
      'static_resources.listeners[0].address.socket_address': ports.listenerPort,
      [sluiceEndpoint]: ports.sluicePort,
      [upstreamEndpoint]: ports.upstreamPort,
    };
    expect(shipped['static_resources'].clusters.map((c: any) => c.name)).toEqual([
      'sluice',
      'upstream',
    ]);
    const before = socketAddresses(shipped);
    const after = socketAddresses(rewritten);
    expect(after.map((a) => a.at).sort()).toEqual(Object.keys(expectedPorts).sort());
    expect(before.map((a) => a.at)).toEqual(after.map((a) => a.at));
    for (const [i, { at, address }] of after.entries()) {
      expect(address, at).toEqual({
        ...(before[i]?.address as object),
        address: '127.0.0.1',
        port_value: expectedPorts[at],
      });
    }
  });

  it('is still a valid Bootstrap', () => {
    const schema = createProtoSchema({
      includeDirs: envoyProtoIncludeDirs(),
      files: ['envoy/config/bootstrap/v3/bootstrap.proto'],
    });
    expect(schema.check(BOOTSTRAP, rewritten)).toEqual([]);
  });
});
