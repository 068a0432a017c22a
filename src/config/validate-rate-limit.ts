/**
 * The `rate_limit` level of a rule file: one `rate_limit` block (unit, count, the extensions
 * `algorithm`, `unit_multiplier` and `burst`, each algorithm's own bounds, `replaces`) and the
 * `rate_limits` list of several. Messages follow the reference's texts where it has one.
 */
import { isMap, isSeq, type Node as YamlAnyNode, type YAMLMap } from 'yaml';
import {
  ALGORITHM_BY_NAME,
  ALGORITHM_DESCRIPTORS,
  ALGORITHMS,
  type Algorithm,
} from '../algorithms/index.js';
import { RATE_LIMIT_UNITS, UNIT_MS, type RateLimitUnit } from '../model.js';
import {
  ALL_RATE_LIMIT_KEYS,
  REPLACES_KEYS,
  type AlgorithmRefusal,
  type RateLimitConfig,
} from './file-config.js';
import { describeNode, quote, type MapEntry, type YamlNode } from './parse.js';
import type { FieldReader } from './yaml-fields.js';

/** The algorithms whose limits may set `burst`, as the error message names them. */
const BURST_ALGORITHMS = ALGORITHM_DESCRIPTORS.filter((algorithm) => algorithm.bounds.acceptsBurst)
  .map((algorithm) => algorithm.name)
  .join(' or ');

const UNIT_BY_UPPER_NAME: ReadonlyMap<string, RateLimitUnit> = new Map(
  RATE_LIMIT_UNITS.map((unit) => [unit.toUpperCase(), unit]),
);
const UNIT_CHOICES = 'second, minute, hour, day, week, month or year';

/** A `rate_limit` block's keys as written, before the checks across keys. */
interface RateLimitKeys {
  unitEntry: MapEntry | undefined;
  unitText: string;
  requestsPerUnit: number;
  unlimited: boolean;
  name: string;
  replacesEntry: MapEntry | undefined;
  algorithm: Algorithm | undefined;
  algorithmEntry: MapEntry | undefined;
  unitMultiplier: number;
  burst: number | undefined;
  burstEntry: MapEntry | undefined;
  /** False once a key was refused. */
  valid: boolean;
}

/** Read each key of a `rate_limit` mapping on its own, in file order. */
function readRateLimitKeys(fields: FieldReader, node: YAMLMap, path: string): RateLimitKeys {
  const keys: RateLimitKeys = {
    unitEntry: undefined,
    unitText: '',
    requestsPerUnit: 0,
    unlimited: false,
    name: '',
    replacesEntry: undefined,
    algorithm: undefined,
    algorithmEntry: undefined,
    unitMultiplier: 1,
    burst: undefined,
    burstEntry: undefined,
    valid: true,
  };
  for (const entry of fields.entries(node, path)) {
    const entryPath = `${path}.${entry.key}`;
    switch (entry.key) {
      case 'unit': {
        keys.unitEntry = entry;
        const text = fields.string(entry, entryPath, 'unit: second');
        if (text === undefined) keys.valid = false;
        else keys.unitText = text;
        break;
      }
      case 'requests_per_unit': {
        const count = fields.uint32(entry, entryPath);
        if (count === undefined) keys.valid = false;
        keys.requestsPerUnit = count ?? 0;
        break;
      }
      case 'unlimited':
        keys.unlimited = fields.bool(entry, entryPath);
        break;
      case 'name': {
        const text = fields.string(entry, entryPath, 'name: per_user');
        if (text === undefined) keys.valid = false;
        else keys.name = text;
        break;
      }
      case 'replaces':
        keys.replacesEntry = entry;
        break;
      case 'algorithm': {
        keys.algorithmEntry = entry;
        const text = fields.string(entry, entryPath, 'algorithm: token_bucket');
        keys.algorithm = ALGORITHMS.find((name) => name === text?.toLowerCase());
        if (text !== undefined && keys.algorithm === undefined) {
          fields.sink.add(
            entryPath,
            `unknown algorithm ${quote(text)}; use one of ${ALGORITHMS.join(', ')}`,
            entry.value ?? entry.keyNode,
          );
        }
        if (keys.algorithm === undefined) keys.valid = false;
        break;
      }
      case 'unit_multiplier': {
        const count = fields.uint32(entry, entryPath);
        if (count === 0) {
          fields.sink.add(
            entryPath,
            'unit_multiplier must be a whole number of at least 1 (the window is unit x unit_multiplier)',
            entry.value ?? entry.keyNode,
          );
        }
        if (count === undefined || count === 0) keys.valid = false;
        else keys.unitMultiplier = count;
        break;
      }
      case 'burst': {
        keys.burstEntry = entry;
        const count = fields.uint32(entry, entryPath);
        if (count === undefined) keys.valid = false;
        else keys.burst = count;
        break;
      }
      default:
        fields.unknownKey(entry, path, ALL_RATE_LIMIT_KEYS);
    }
  }
  return keys;
}

/** The unit of a limit (`undefined` when unlimited or refused); refusals clear `keys.valid`. */
function checkUnit(
  fields: FieldReader,
  keys: RateLimitKeys,
  node: YAMLMap,
  path: string,
): RateLimitUnit | undefined {
  const { unitEntry, unitText } = keys;
  const unitPath = `${path}.unit`;
  const unitNode = unitEntry?.value ?? unitEntry?.keyNode ?? node;
  if (keys.unlimited) {
    // As in the reference, only a real unit conflicts with `unlimited`; anything else is ignored.
    if (UNIT_BY_UPPER_NAME.has(unitText.toUpperCase())) {
      fields.sink.add(
        unitPath,
        'should not specify rate limit unit when unlimited; remove the unit line',
        unitNode,
      );
      keys.valid = false;
    }
    return undefined;
  }
  const unit = UNIT_BY_UPPER_NAME.get(unitText.toUpperCase());
  if (unit === undefined && (unitEntry === undefined || fields.isScalarEntry(unitEntry))) {
    fields.sink.add(
      unitPath,
      `invalid rate limit unit ${quote(unitText)}; use one of ${UNIT_CHOICES}`,
      unitNode,
    );
  }
  if (unit === undefined) keys.valid = false;
  return unit;
}

/**
 * `burst` only where the algorithm takes it, and the algorithm's own bounds (its descriptor in
 * src/algorithms/); refusals clear `keys.valid`.
 */
function checkAlgorithmBounds(
  fields: FieldReader,
  defaultAlgorithm: Algorithm,
  keys: RateLimitKeys,
  unit: RateLimitUnit | undefined,
  node: YAMLMap,
  path: string,
  refusal: AlgorithmRefusal | undefined,
): void {
  const { algorithm, burstEntry } = keys;
  const effective = algorithm ?? defaultAlgorithm;
  const bounds = ALGORITHM_BY_NAME[effective].bounds;
  if (refusal?.algorithms.includes(effective) === true && !keys.unlimited) {
    const accepted = ALGORITHMS.filter((name) => !refusal.algorithms.includes(name));
    fields.sink.add(
      `${path}.algorithm`,
      `algorithm ${effective}` +
        (algorithm === undefined ? ' (the default algorithm, DEFAULT_ALGORITHM)' : '') +
        ` cannot be counted with ${refusal.setting}: ${refusal.reason}; ` +
        `set algorithm: ${accepted.join(' or ')}, or ${refusal.otherwise}`,
      keys.algorithmEntry?.keyNode ?? node,
    );
    keys.valid = false;
  }
  if (burstEntry !== undefined && !bounds.acceptsBurst) {
    fields.sink.add(
      `${path}.burst`,
      `burst applies only to algorithm: ${BURST_ALGORITHMS}, but this limit uses ${effective}` +
        (algorithm === undefined ? ' (the default algorithm)' : '') +
        `; remove burst or set algorithm: ${BURST_ALGORITHMS}`,
      burstEntry.keyNode,
    );
    keys.valid = false;
  }
  if (unit === undefined || keys.unlimited) return;
  const windowMs = UNIT_MS[unit] * keys.unitMultiplier;
  const problem = bounds.check?.({
    requestsPerUnit: keys.requestsPerUnit,
    burst: keys.burst,
    burstWritten: burstEntry !== undefined,
    windowMs,
  });
  if (problem === undefined) return;
  const at: YamlAnyNode | undefined =
    problem.at === 'burst'
      ? burstEntry!.keyNode
      : problem.at === 'algorithm'
        ? keys.algorithmEntry?.keyNode
        : undefined;
  fields.sink.add(`${path}.${problem.field}`, problem.message, at ?? node);
  keys.valid = false;
}

/** A `rate_limit` block; `undefined` when empty or refused (its problems are in the sink). */
export function readRateLimit(
  fields: FieldReader,
  defaultAlgorithm: Algorithm,
  node: YamlNode | null,
  path: string,
  refusal?: AlgorithmRefusal,
): RateLimitConfig | undefined {
  // `rate_limit:` with nothing after it is no rule at all, as in the reference.
  if (node === null) return undefined;
  if (!isMap(node)) {
    fields.sink.add(
      path,
      `rate_limit must be a mapping such as {unit: second, requests_per_unit: 10}, not ${describeNode(node)}`,
      node,
    );
    return undefined;
  }
  const keys = readRateLimitKeys(fields, node, path);
  const unit = checkUnit(fields, keys, node, path);
  checkAlgorithmBounds(fields, defaultAlgorithm, keys, unit, node, path, refusal);
  const replaces = readReplaces(fields, keys.replacesEntry, `${path}.replaces`, keys.name);
  if (!keys.valid || replaces === undefined) return undefined;
  return {
    unit,
    requestsPerUnit: keys.requestsPerUnit,
    unlimited: keys.unlimited,
    name: keys.name,
    replaces,
    algorithm: keys.algorithm,
    unitMultiplier: keys.unitMultiplier,
    burst: keys.burst,
  };
}

/** `rate_limits`: a non-empty list of rate_limit blocks, none unlimited, no window twice. */
export function readRateLimitList(
  fields: FieldReader,
  defaultAlgorithm: Algorithm,
  node: YamlNode | null,
  path: string,
  refusal?: AlgorithmRefusal,
): readonly RateLimitConfig[] | undefined {
  if (!isSeq(node) || node.items.length === 0) {
    fields.sink.add(
      path,
      'rate_limits must be a non-empty list of limits such as ' +
        '[{unit: second, requests_per_unit: 10}, {unit: day, requests_per_unit: 1000}], not ' +
        (node === null ? 'empty' : isSeq(node) ? 'an empty list' : describeNode(node)),
      node,
    );
    return undefined;
  }
  const limits: RateLimitConfig[] = [];
  const seen = new Map<string, number>();
  const valid = fields.everyMapItem(node, path, (resolved, itemPath, index) => {
    const limit = readRateLimit(fields, defaultAlgorithm, resolved, itemPath, refusal);
    if (limit === undefined) return false;
    if (limit.unlimited) {
      fields.sink.add(
        `${itemPath}.unlimited`,
        'unlimited cannot be one of several limits; use rate_limit: {unlimited: true} on its own',
        resolved,
      );
      return false;
    }
    const algorithm = limit.algorithm ?? defaultAlgorithm;
    const windowMs = UNIT_MS[limit.unit!] * limit.unitMultiplier;
    const pair = `${algorithm}/${windowMs}`;
    const first = seen.get(pair);
    if (first !== undefined) {
      fields.sink.add(
        itemPath,
        `rate_limits[${first}] already has a ${algorithm} limit with a ${windowMs} ms window; ` +
          'keep the stricter one',
        resolved,
      );
      return false;
    }
    seen.set(pair, index);
    limits.push(limit);
    return true;
  });
  return valid ? limits : undefined;
}

/** `replaces`: a list of `{name: ...}` entries naming other rules, never this one. */
function readReplaces(
  fields: FieldReader,
  entry: MapEntry | undefined,
  path: string,
  ownName: string,
): readonly string[] | undefined {
  if (entry === undefined || entry.value === null) return [];
  const node = entry.value;
  if (!isSeq(node)) {
    fields.sink.add(
      path,
      `replaces must be a list such as [{name: other_limit}], not ${describeNode(node)}`,
      node,
    );
    return undefined;
  }
  const names: string[] = [];
  const valid = fields.everyMapItem(node, path, (resolved, itemPath) => {
    let name = '';
    let nameNode: YamlAnyNode | null = resolved;
    for (const nameEntry of fields.entries(resolved, itemPath)) {
      if (nameEntry.key === 'name') {
        nameNode = nameEntry.value ?? nameEntry.keyNode;
        name = fields.string(nameEntry, `${itemPath}.name`, 'name: other_limit') ?? '';
      } else {
        fields.unknownKey(nameEntry, itemPath, REPLACES_KEYS);
      }
    }
    if (name === '') {
      fields.sink.add(
        itemPath,
        "should not have an empty replaces entry; write '- name: <name of the rule to replace>'",
        nameNode,
      );
      return false;
    }
    if (name === ownName) {
      fields.sink.add(
        `${itemPath}.name`,
        'replaces should not contain name of same descriptor',
        nameNode,
      );
      return false;
    }
    names.push(name);
    return true;
  });
  return valid ? names : undefined;
}
