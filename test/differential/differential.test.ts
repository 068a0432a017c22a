/**
 * The differential tier: random reference-format configs and request sequences, run against
 * sluice (`DEFAULT_ALGORITHM=fixed_window`, in process) and the pinned reference (on a
 * redis-server started here), comparing config acceptance, every status's code, current_limit
 * and limit_remaining, and errors. The deliberate differences are excused only by the rules in
 * deliberate.ts.
 *
 * Run it with `npm run test:differential -- --seed N --configs C --budget-ms M`
 * (scripts/test-differential.mjs sets DIFF_SEED, DIFF_CONFIGS and DIFF_BUDGET_MS for this file).
 * The run stops generating new configs when the budget is spent and says how many it compared.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { startApp } from '../helpers/app.js';
import { inCi, useProcessGroup } from '../helpers/processes.js';
import { validateFiles } from '../../src/config/validate.js';
import { rlsClientConstructor } from '../../src/transport/grpc/proto.js';
import { createRandom } from './random.js';
import { generateConfig, generateRequests, type GenConfig, type GenRequest } from './generate.js';
import {
  RULES,
  counterClass,
  overrideMayShareAPattern,
  referenceLostMetadata,
  sharesCounterWithLater,
  unitlessKeysCollide,
  type DeliberateRule,
} from './deliberate.js';
import { startRedis } from '../helpers/redis.js';
import { REFERENCE_BIN, missingBinaries, referenceCommit, startReference } from './reference.js';

const SEED = Number(process.env['DIFF_SEED'] ?? '1');
const CONFIGS = Number(process.env['DIFF_CONFIGS'] ?? '200');
const BUDGET_MS = Number(process.env['DIFF_BUDGET_MS'] ?? '600000');
/** Configs loaded together per round (distinct domains). */
const ROUND = 25;
/** Every QUOTA_EVERY-th round runs both sides with QUOTA_MODE=true. */
const QUOTA_EVERY = 4;
const REQUESTS_PER_CONFIG = 25;

const missing = missingBinaries();
if (missing !== undefined && inCi()) {
  throw new Error(`the differential tier needs ${missing} under CI (.ci/run installs them)`);
}

/** A response reduced to what is compared. */
interface Observed {
  readonly error: string | undefined;
  readonly overall: string;
  /** `dynamic_metadata` as canonical JSON (sorted keys, whitespace in text collapsed). */
  readonly metadata: string;
  readonly statuses: readonly {
    code: string;
    limit: string | undefined;
    unit: string | undefined;
    remaining: number;
  }[];
}

type RlsClient = grpc.Client & {
  ShouldRateLimit(
    request: unknown,
    options: grpc.CallOptions,
    callback: (error: grpc.ServiceError | null, response?: any) => void,
  ): void;
};

function client(address: string): RlsClient {
  const Client = rlsClientConstructor();
  return new Client(address, grpc.credentials.createInsecure()) as unknown as RlsClient;
}

function toWire(request: GenRequest): unknown {
  return {
    domain: request.domain,
    hits_addend: request.hitsAddend,
    descriptors: request.descriptors.map((d) => ({
      entries: d.entries,
      limit:
        d.limit === undefined
          ? undefined
          : { requests_per_unit: d.limit.requestsPerUnit, unit: d.limit.unit },
      hits_addend: d.hitsAddend === undefined ? undefined : { value: d.hitsAddend },
    })),
  };
}

async function call(c: RlsClient, request: GenRequest): Promise<Observed> {
  return new Promise((resolve) => {
    c.ShouldRateLimit(toWire(request), { deadline: Date.now() + 5_000 }, (error, response) => {
      if (error) {
        resolve({
          error: `${grpc.status[error.code]}: ${error.details}`,
          overall: '',
          metadata: '',
          statuses: [],
        });
        return;
      }
      resolve({
        error: undefined,
        overall: String(response?.overall_code ?? 'UNKNOWN'),
        metadata: JSON.stringify(canonical(plainStruct(response?.dynamic_metadata))),
        statuses: (response?.statuses ?? []).map((s: any) => ({
          code: String(s.code ?? 'UNKNOWN'),
          limit:
            s.current_limit == null
              ? undefined
              : `${s.current_limit.requests_per_unit ?? 0}/${s.current_limit.unit ?? 'UNKNOWN'}` +
                (s.current_limit.name ? ` name=${s.current_limit.name}` : ''),
          unit: s.current_limit?.unit ?? undefined,
          remaining: Number(s.limit_remaining ?? 0),
        })),
      });
    });
  });
}

/** A decoded google.protobuf.Struct / Value (proto-loader's shape) as plain JSON. */
function plainStruct(value: any): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value.fields === 'object' && value.fields !== null) {
    const out: Record<string, unknown> = {};
    for (const [k, f] of Object.entries(value.fields)) out[k] = plainStruct(f);
    return out;
  }
  switch (value.kind) {
    case 'nullValue':
      return null;
    case 'numberValue':
      return value.numberValue;
    case 'stringValue':
      return value.stringValue;
    case 'boolValue':
      return value.boolValue;
    case 'structValue':
      return plainStruct(value.structValue);
    case 'listValue':
      return (value.listValue?.values ?? []).map(plainStruct);
    default:
      return null;
  }
}

/**
 * JSON with sorted keys; text with its whitespace collapsed (the reference prints a descriptor's
 * `limit` in Go's protobuf text form, whose spacing is deliberately unstable).
 */
function canonical(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(/[\s\u00a0]+/g, ' ');
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      out[key] = canonical((value as Record<string, unknown>)[key]);
    }
    return out;
  }
  return value;
}

/** Everything the run found, printed at the end. */
interface Report {
  configs: number;
  acceptedByBoth: number;
  refusedByBoth: number;
  requests: number;
  statusesCompared: number;
  skippedRounds: number;
  /** Rounds run with QUOTA_MODE=true on both sides. */
  quotaRounds: number;
  deliberate: Map<string, number>;
  /** Why both refused files, by the reference's message with quoted parts elided. */
  refusals: Map<string, number>;
  differences: string[];
}

function excuse(report: Report, rule: DeliberateRule): void {
  report.deliberate.set(rule.name, (report.deliberate.get(rule.name) ?? 0) + 1);
}

describe.skipIf(missing !== undefined)(
  `differential: sluice vs the reference (seed ${SEED}, ${CONFIGS} configs)`,
  () => {
    const group = useProcessGroup();

    it(
      'finds no difference but the deliberate ones',
      { timeout: BUDGET_MS + 120_000 },
      async () => {
        const started = Date.now();
        const reference = referenceCommit();
        console.log(`differential: against envoyproxy/ratelimit ${reference} (${REFERENCE_BIN})`);
        const random = createRandom(SEED);
        const redisPort = (await startRedis(group)).port;
        const report: Report = {
          configs: 0,
          acceptedByBoth: 0,
          refusedByBoth: 0,
          requests: 0,
          statusesCompared: 0,
          skippedRounds: 0,
          quotaRounds: 0,
          deliberate: new Map(),
          refusals: new Map(),
          differences: [],
        };
        let index = 0;
        let round = 0;
        while (index < CONFIGS && Date.now() - started < BUDGET_MS) {
          const configs: GenConfig[] = [];
          for (let i = 0; i < ROUND && index < CONFIGS; i++)
            configs.push(generateConfig(random, index++));
          const requests = new Map(
            configs.map((c) => [c.file, generateRequests(random, c, REQUESTS_PER_CONFIG)]),
          );
          const quotaMode = round++ % QUOTA_EVERY === QUOTA_EVERY - 1;
          await runRound(configs, requests, redisPort, report, quotaMode);
        }
        const summary = [
          `reference: envoyproxy/ratelimit ${reference} at ${REFERENCE_BIN}`,
          `seed ${SEED}: ${report.configs} configs (${report.acceptedByBoth} loaded by both, ${report.refusedByBoth} refused by both), ` +
            `${report.requests} requests, ${report.statusesCompared} statuses compared, ` +
            `${report.skippedRounds} rounds cut at a window boundary, ${report.quotaRounds} rounds with QUOTA_MODE=true, ${Date.now() - started} ms`,
          `deliberate differences excused: ${[...report.deliberate].map(([k, v]) => `${k} x${v}`).join(', ') || 'none'}`,
          `refused by both: ${[...report.refusals]
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => `${v}x ${k}`)
            .join('; ')}`,
          `differences: ${report.differences.length}`,
          ...report.differences.slice(0, 40),
        ].join('\n');
        console.log(summary);
        expect(report.configs).toBeGreaterThan(0);
        expect(report.differences, summary).toEqual([]);
      },
    );

    async function runRound(
      configs: readonly GenConfig[],
      requests: ReadonlyMap<string, GenRequest[]>,
      redisPort: number,
      report: Report,
      quotaMode: boolean,
    ): Promise<void> {
      // Both sides answer with dynamic_metadata; every QUOTA_EVERY-th round in global quota mode.
      const env = {
        RESPONSE_DYNAMIC_METADATA: 'true',
        ...(quotaMode ? { QUOTA_MODE: 'true' } : {}),
      };
      report.configs += configs.length;
      if (quotaMode) report.quotaRounds++;
      const sluiceAccepted = new Map<string, boolean>();
      const sluiceProblems = new Map<string, string>();
      for (const config of configs) {
        const result = validateFiles([{ name: config.file, content: config.yaml }]);
        sluiceAccepted.set(config.file, result.problems.length === 0);
        if (result.problems.length > 0)
          sluiceProblems.set(config.file, result.problems[0]!.message);
      }
      const reference = await startReference(
        group,
        redisPort,
        new Map(configs.map((c) => [c.file, c.yaml])),
        env,
      );
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'sluice-diff-'));
      for (const config of configs) {
        if (sluiceAccepted.get(config.file))
          await fs.writeFile(path.join(dir, config.file), config.yaml);
      }
      const sluice = await startApp([dir], { DEFAULT_ALGORITHM: 'fixed_window', ...env });
      const refClient = client(reference.address);
      const sluiceClient = client(`127.0.0.1:${sluice.port}`);
      try {
        const compared: GenConfig[] = [];
        for (const config of configs) {
          const mine = sluiceAccepted.get(config.file)!;
          const theirs = reference.refused.get(config.file);
          if (mine === (theirs === undefined)) {
            if (mine) {
              compared.push(config);
            } else {
              report.refusedByBoth++;
              const reason = theirs!.replace(/'[^']*'|`[^`]*`|line \d+/g, '…').slice(0, 70);
              report.refusals.set(reason, (report.refusals.get(reason) ?? 0) + 1);
            }
            continue;
          }
          report.differences.push(
            `${config.file}: sluice ${mine ? 'loads' : `refuses (${sluiceProblems.get(config.file)})`}, ` +
              `the reference ${theirs === undefined ? 'loads' : `refuses (${theirs})`}\n${indent(config.yaml)}`,
          );
        }
        report.acceptedByBoth += compared.length;
        const hour = (): number => Math.floor(Date.now() / 3_600_000);
        const startHour = hour();
        for (const config of compared) {
          const tainted = new Set<string>();
          const unitsByKeys = new Map<string, Set<string>>();
          for (const request of requests.get(config.file)!) {
            const before = Date.now();
            const theirs = await call(refClient, request);
            const mine = await call(sluiceClient, request);
            const after = Date.now();
            if (hour() !== startHour) {
              report.skippedRounds++;
              return;
            }
            report.requests++;
            taintUnitlessCollisions(request, theirs, [before, after], unitsByKeys, tainted, report);
            compare(config, request, mine, theirs, tainted, report);
          }
        }
      } finally {
        refClient.close();
        sluiceClient.close();
        await sluice.stop();
        await reference.stop();
        await fs.rm(dir, { recursive: true, force: true });
      }
    }
  },
);

/**
 * RULES.unitlessKey: the reference shares one counter between two units of the same entries
 * while their window starts coincide. `unitsByKeys` collects, per domain and keys, every unit a
 * status has shown so far; when this request's unit and one of those collide at the time of the
 * call, both counter classes are tainted (their counts differ from then on).
 */
function taintUnitlessCollisions(
  request: GenRequest,
  theirs: Observed,
  timesMs: readonly number[],
  unitsByKeys: Map<string, Set<string>>,
  tainted: Set<string>,
  report: Report,
): void {
  if (theirs.error !== undefined) return;
  theirs.statuses.forEach((status, i) => {
    const unit = status.unit;
    if (unit === undefined) return;
    const keys = request.descriptors[i]!.entries.map((e) => e.key);
    const id = counterClass(request.domain, keys, '');
    let units = unitsByKeys.get(id);
    if (units === undefined) unitsByKeys.set(id, (units = new Set()));
    units.add(unit);
    for (const other of units) {
      if (!unitlessKeysCollide(unit, other, timesMs)) continue;
      const mine = counterClass(request.domain, keys, unit);
      if (!tainted.has(mine)) excuse(report, RULES.unitlessKey);
      tainted.add(mine);
      tainted.add(counterClass(request.domain, keys, other));
    }
  });
}

function compare(
  config: GenConfig,
  request: GenRequest,
  mine: Observed,
  theirs: Observed,
  tainted: Set<string>,
  report: Report,
): void {
  const where = (): string =>
    `${config.file} request ${JSON.stringify(toWire(request))}\n  sluice:    ${JSON.stringify(mine)}\n  reference: ${JSON.stringify(theirs)}\n${indent(config.yaml)}`;
  if (mine.error !== undefined || theirs.error !== undefined) {
    if (mine.error !== undefined && theirs.error !== undefined) excuse(report, RULES.errorCode);
    else report.differences.push(`one side failed: ${where()}`);
    return;
  }
  if (mine.statuses.length !== theirs.statuses.length) {
    report.differences.push(`status count: ${where()}`);
    return;
  }
  const rejected = theirs.overall === 'OVER_LIMIT';
  const classes = theirs.statuses.map((s, i) =>
    s.unit === undefined
      ? undefined
      : counterClass(
          request.domain,
          request.descriptors[i]!.entries.map((e) => e.key),
          s.unit,
        ),
  );
  const repeated = sharesCounterWithLater(
    config,
    request.domain,
    request.descriptors.map((d) => d.entries),
    theirs.statuses.map((s) => s.unit),
  );
  let overallComparable = true;
  for (let i = 0; i < theirs.statuses.length; i++) {
    const a = mine.statuses[i]!;
    const b = theirs.statuses[i]!;
    report.statusesCompared++;
    if (a.limit !== b.limit) {
      report.differences.push(`current_limit of status ${i}: ${where()}`);
      return;
    }
    const cls = classes[i];
    if (cls !== undefined && overrideMayShareAPattern(config, request.descriptors[i]!)) {
      excuse(report, RULES.patternOverride);
      tainted.add(cls);
      overallComparable = false;
      continue;
    }
    if (cls !== undefined && tainted.has(cls)) {
      excuse(report, RULES.afterRejection);
      overallComparable = false;
      continue;
    }
    if (a.code !== b.code) {
      report.differences.push(`code of status ${i}: ${where()}`);
      return;
    }
    if (rejected && b.code === 'OK') {
      excuse(report, RULES.rejectedRemaining);
      continue;
    }
    if (repeated[i] === true && a.remaining !== b.remaining) {
      excuse(report, RULES.repeatedCounter);
      continue;
    }
    if (a.remaining !== b.remaining) {
      report.differences.push(`limit_remaining of status ${i}: ${where()}`);
      return;
    }
  }
  if (overallComparable && mine.overall !== theirs.overall) {
    report.differences.push(`overall_code: ${where()}`);
  } else if (overallComparable && mine.metadata !== theirs.metadata) {
    if (referenceLostMetadata(config, mine.metadata, theirs.metadata)) {
      excuse(report, RULES.lostMetadata);
    } else {
      report.differences.push(`dynamic_metadata: ${where()}`);
    }
  }
  // The reference charged every limited descriptor of a rejected request, and charges shadow and
  // quota descriptors past their limit: those counters now differ by design.
  theirs.statuses.forEach((s, i) => {
    const cls = classes[i];
    if (cls !== undefined && (rejected || s.code === 'OVER_LIMIT' || s.remaining === 0))
      tainted.add(cls);
  });
}

function indent(text: string): string {
  return text
    .trimEnd()
    .split('\n')
    .map((line) => `    | ${line}`)
    .join('\n');
}
