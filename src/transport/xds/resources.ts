/**
 * RateLimitConfig resources (protobuf, in `google.protobuf.Any`) -> rule sets in the rule file
 * format, so they go through the same validation as files (`buildSnapshot`). Each resource is one
 * rule set named by its `name`, as in the reference (its config_xds.go maps the message onto its
 * YAML structs the same way).
 */
import path from 'node:path';
import protobuf from 'protobufjs';
import { cutText, type ConfigProblem } from '../../errors.js';
import type { BuildJob, PreparedRuleSets } from '../../config/offthread.js';
import type { ConfigFileInput } from '../../config/validate.js';
import { PROTO_DIR } from '../grpc/proto.js';

/** Longest text of a response (a type URL) a problem echoes, in characters. */
export const MAX_ECHOED_LENGTH = 128;

/** The type URL of the reference's rule set resource. */
export const RATE_LIMIT_CONFIG_TYPE_URL =
  'type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig';

/** The file, under proto/, that declares RateLimitConfig. */
export const RLS_CONF_PROTO = 'ratelimit/config/ratelimit/v3/rls_conf.proto';

let rateLimitConfigType: protobuf.Type | undefined;

function configType(): protobuf.Type {
  if (rateLimitConfigType === undefined) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) =>
      path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
    root.loadSync(RLS_CONF_PROTO, { keepCase: true });
    root.resolveAll();
    rateLimitConfigType = root.lookupType('ratelimit.config.ratelimit.v3.RateLimitConfig');
  }
  return rateLimitConfigType;
}

/** One resource as it arrives: a `google.protobuf.Any`. */
export interface AnyResource {
  /** `type_url`. */
  readonly type_url?: string;
  /** `value`: the encoded message. */
  readonly value?: Uint8Array;
}

/** What {@link decodeRuleSets} makes of a response's resources. */
export interface DecodedRuleSets {
  /** One rule set per resource that decoded, named by the resource's `name`. */
  readonly inputs: ConfigFileInput[];
  /** Resources of another type or that do not decode (the response is then refused). */
  readonly problems: ConfigProblem[];
}

/** A decoded RateLimitDescriptor (keepCase, enums as names, unset fields absent). */
interface DescriptorMessage {
  key?: string;
  value?: string;
  rate_limit?: PolicyMessage;
  descriptors?: DescriptorMessage[];
  shadow_mode?: boolean;
  detailed_metric?: boolean;
  quota_mode?: boolean;
  metadata?: StructMessage;
}

interface PolicyMessage {
  unit?: string | number;
  requests_per_unit?: number;
  unlimited?: boolean;
  name?: string;
  replaces?: { name?: string }[];
}

interface StructMessage {
  fields?: Record<string, ValueMessage>;
}

/** A google.protobuf.Value: camelCase even with keepCase (protobufjs defines struct.proto itself). */
interface ValueMessage {
  nullValue?: unknown;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: StructMessage;
  listValue?: { values?: ValueMessage[] };
}

/**
 * Decode every resource and turn each into a rule set: its text is the message as JSON (YAML's
 * subset), with the rule format's keys. Never throws.
 */
export function decodeRuleSets(resources: readonly AnyResource[]): DecodedRuleSets {
  const type = configType();
  const inputs: ConfigFileInput[] = [];
  const problems: ConfigProblem[] = [];
  resources.forEach((resource, index) => {
    const label = `resources[${index}]`;
    if (resource.type_url !== RATE_LIMIT_CONFIG_TYPE_URL) {
      problems.push({
        file: label,
        path: '',
        message: `unexpected resource type ${JSON.stringify(cutText(resource.type_url ?? '', MAX_ECHOED_LENGTH))}; expected ${RATE_LIMIT_CONFIG_TYPE_URL}`,
      });
      return;
    }
    let message: { name?: string; domain?: string; descriptors?: DescriptorMessage[] };
    try {
      message = type.toObject(type.decode(resource.value ?? new Uint8Array()), {
        enums: String,
        longs: Number,
        defaults: false,
      });
    } catch (error) {
      problems.push({
        file: label,
        path: '',
        message: `cannot decode RateLimitConfig: ${error instanceof Error ? error.message : String(error)}`,
      });
      return;
    }
    const root: Record<string, unknown> = { domain: message.domain ?? '' };
    const descriptors = (message.descriptors ?? []).map(descriptorToRule);
    if (descriptors.length > 0) root['descriptors'] = descriptors;
    inputs.push({
      name: message.name !== undefined && message.name !== '' ? message.name : label,
      content: JSON.stringify(root),
    });
  });
  return { inputs, problems };
}

/** A descriptor message -> the rule format's descriptor node (defaults left out). */
function descriptorToRule(d: DescriptorMessage): Record<string, unknown> {
  const node: Record<string, unknown> = { key: d.key ?? '' };
  if (d.value !== undefined && d.value !== '') node['value'] = d.value;
  if (d.rate_limit !== undefined) node['rate_limit'] = policyToRule(d.rate_limit);
  if (d.descriptors !== undefined && d.descriptors.length > 0) {
    node['descriptors'] = d.descriptors.map(descriptorToRule);
  }
  if (d.shadow_mode === true) node['shadow_mode'] = true;
  if (d.detailed_metric === true) node['detailed_metric'] = true;
  if (d.quota_mode === true) node['quota_mode'] = true;
  if (d.metadata !== undefined) node['metadata'] = structToJson(d.metadata);
  return node;
}

/**
 * A RateLimitPolicy -> a `rate_limit` block. The unit is written by name as the reference does
 * (`UNKNOWN` included, which validation then refuses unless the rule is unlimited: an unlimited
 * rule of unit UNKNOWN is a rule without a unit).
 */
function policyToRule(p: PolicyMessage): Record<string, unknown> {
  const unit = p.unit === undefined ? 'UNKNOWN' : String(p.unit);
  const block: Record<string, unknown> = { requests_per_unit: p.requests_per_unit ?? 0 };
  if (!(p.unlimited === true && unit === 'UNKNOWN')) block['unit'] = unit;
  if (p.unlimited === true) block['unlimited'] = true;
  if (p.name !== undefined && p.name !== '') block['name'] = p.name;
  if (p.replaces !== undefined && p.replaces.length > 0) {
    block['replaces'] = p.replaces.map((r) => ({ name: r.name ?? '' }));
  }
  return block;
}

/** A google.protobuf.Struct message -> the JSON object it stands for. */
function structToJson(s: StructMessage): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(s.fields ?? {})) out[key] = valueToJson(value);
  return out;
}

function valueToJson(v: ValueMessage): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.numberValue !== undefined) return v.numberValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.structValue !== undefined) return structToJson(v.structValue);
  if (v.listValue !== undefined) return (v.listValue.values ?? []).map(valueToJson);
  return null;
}

/**
 * A problem of a rule set as the xDS source reports it: validation works on the JSON text made
 * above, whose line and column numbers mean nothing to whoever wrote the resource, so they are
 * dropped; the path (`descriptors[0].rate_limit.unit`) says where the problem is.
 */
export function withoutPosition(problem: ConfigProblem): ConfigProblem {
  const message = problem.message
    .replace(/ \(line \d+, column \d+\)/g, '')
    .replace(/ at line \d+, column \d+/g, ' earlier');
  return { ...problem, message };
}

/**
 * A response's resources -> snapshot (see config/offthread.ts): decoded and validated in a worker
 * thread (./build-worker.ts) when large. A resource that does not decode refuses the update
 * with the decoding problems only, as before a build; validation problems lose their positions.
 */
export const RESOURCES_JOB: BuildJob<readonly AnyResource[]> = {
  worker: new URL('./build-worker.js', import.meta.url),
  prepare(resources): PreparedRuleSets {
    const decoded = decodeRuleSets(resources);
    return decoded.problems.length > 0 ? { inputs: [], problems: decoded.problems } : decoded;
  },
  mapProblem: withoutPosition,
};
