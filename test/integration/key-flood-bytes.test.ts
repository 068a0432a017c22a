/**
 * A flood of long keys against a real sluice process (issue 31, item 1): distinct 4,000-character
 * values, 64 descriptors per call, through the gRPC port. Bounded by count alone, the memory
 * store let such keys (over 4 KB each) exhaust the heap far under MEMORY_MAX_KEYS; bounded in
 * bytes (MEMORY_MAX_BYTES), the process keeps answering and its memory stays within the bound
 * docs/operations.md ("Capacity planning") states: RSS grows by at most {@link RSS_FACTOR} times
 * the live heap (what was used before, plus MEMORY_MAX_BYTES), and by no more than the heap limit,
 * each plus {@link RSS_SLACK}.
 *
 * Three processes: the default heap with MEMORY_MAX_BYTES=64 MiB (a short flood fills it ten
 * times over); `--max-old-space-size=256` with the default cap (half the old space; the cap and
 * the heap limit are read from the process's own start-up log), flooded with more key text than
 * its whole heap holds; and the Kubernetes Deployment's settings, under its memory limit. Each
 * flood is bounded in calls and in time.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ruleDir } from '../helpers/app.js';
import { createEnvoyRlsClient, type EnvoyRlsClient } from '../helpers/envoy-rls-client.js';
import {
  REPO_ROOT,
  ensureBuilt,
  freePort,
  grpcHealthStatus,
  startSluice,
  useProcessGroup,
  type SluiceProcess,
} from '../helpers/processes.js';

const MiB = 1_048_576;

/** Characters of each descriptor value (fits in an ordinary header sent through Envoy). */
const VALUE_CHARS = 4_000;
/** Descriptors per call, the default MAX_DESCRIPTORS_PER_REQUEST. */
const DESCRIPTORS = 64;
/** Calls before the RSS the flood is compared with is read. */
const WARM_UP = 4;
/** Calls in flight at once. */
const CONCURRENCY = 4;
/** Longest a flood may run, ms. */
const FLOOD_MS = 240_000;
/**
 * The documented bound: under a flood, RSS grows by at most this many times the live heap (the
 * heap used before the flood plus MEMORY_MAX_BYTES): V8 lets garbage pile up to a few times the
 * live heap before it collects it all. And never by more than the heap limit.
 */
const RSS_FACTOR = 4;
/** What the bound allows besides: V8's young generation, buffers of calls in flight, the allocator. */
const RSS_SLACK = 128 * MiB;

const RULES = {
  'flood.yaml': `domain: flood
descriptors:
  - key: v
    rate_limit: { unit: hour, requests_per_unit: 1000, algorithm: fixed_window }
`,
};

/**
 * What the Kubernetes Deployment (deploy/kubernetes/base/deployment.yaml) gives the memory store:
 * its `NODE_OPTIONS` and `MEMORY_*` variables, and the container's memory limit in bytes.
 */
function deploymentMemory(): { env: Record<string, string>; limitBytes: number } {
  const doc = parse(
    readFileSync(path.join(REPO_ROOT, 'deploy/kubernetes/base/deployment.yaml'), 'utf8'),
  ) as {
    spec: {
      template: {
        spec: {
          containers: {
            env?: { name: string; value?: string }[];
            resources: { limits: { memory: string } };
          }[];
        };
      };
    };
  };
  const container = doc.spec.template.spec.containers[0]!;
  const env: Record<string, string> = {};
  for (const { name, value } of container.env ?? []) {
    if (value !== undefined && (name === 'NODE_OPTIONS' || name.startsWith('MEMORY_'))) {
      env[name] = value;
    }
  }
  const mi = /^(\d+)Mi$/.exec(container.resources.limits.memory)?.[1];
  if (mi === undefined) throw new Error(`memory limit ${container.resources.limits.memory}`);
  return { env, limitBytes: Number(mi) * MiB };
}

const DEPLOYMENT = deploymentMemory();

/** Resident memory of a process, bytes (VmRSS). */
function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status)?.[1];
  if (kb === undefined) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(kb) * 1024;
}

/** One sample of `/metrics` on the HTTP port: the value of `series` (0 when absent). */
async function metric(httpPort: number, series: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}

/** The memory store's limits, from the `memory store created` line of the process's log. */
interface LoggedLimits {
  /** The byte cap, MEMORY_MAX_BYTES. */
  maxBytes: number;
  /** The old-space limit the default cap is half of. */
  oldSpaceBytes: number;
  /** V8's heap limit: the old space plus the young generation. */
  heapLimitBytes: number;
}

/** The {@link LoggedLimits} of a process. */
function loggedLimits(sluice: SluiceProcess): LoggedLimits {
  for (const line of sluice.proc.output().split('\n')) {
    if (!line.includes('memory store created')) continue;
    const logged = JSON.parse(line) as Record<keyof LoggedLimits, unknown>;
    return {
      maxBytes: Number(logged.maxBytes),
      oldSpaceBytes: Number(logged.oldSpaceBytes),
      heapLimitBytes: Number(logged.heapLimitBytes),
    };
  }
  throw new Error(`no "memory store created" line in:\n${sluice.proc.output()}`);
}

/** One call of the flood: descriptors `first` to `first + DESCRIPTORS - 1`, each a new value. */
function floodRequest(first: number, pad: string): unknown {
  const descriptors = [];
  for (let d = first; d < first + DESCRIPTORS; d++) {
    descriptors.push({ entries: [{ key: 'v', value: `${d}-${pad}` }] });
  }
  return { domain: 'flood', descriptors };
}

/** What a flood saw: calls answered, the first failure, the highest RSS sampled. */
interface FloodResult {
  answered: number;
  failure: string | undefined;
  peakRss: number;
}

/**
 * Send `calls` calls of new keys (calls `from` to `from + calls - 1`), {@link CONCURRENCY} at a time, for at most {@link FLOOD_MS};
 * stops at the first failure (the process dying is one). Samples the RSS after every call.
 */
async function flood(
  client: EnvoyRlsClient,
  pid: number,
  from: number,
  calls: number,
): Promise<FloodResult> {
  const pad = 'v'.repeat(VALUE_CHARS - 8);
  const deadline = Date.now() + FLOOD_MS;
  const end = from + calls;
  let next = from;
  let answered = 0;
  let failure: string | undefined;
  let peakRss = 0;
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < end && Date.now() < deadline) {
      const call = next++;
      try {
        const answer = await client.shouldRateLimit(floodRequest(call * DESCRIPTORS, pad), 30_000);
        if (answer.overall_code !== 'OK') failure = `call ${call}: ${answer.overall_code}`;
        else answered++;
        peakRss = Math.max(peakRss, rssBytes(pid));
      } catch (error) {
        failure = `call ${call}: ${(error as Error).message}`;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return { answered, failure, peakRss };
}

/** One process to flood: how it is started, and how much key text it is sent. */
interface FloodCase {
  /** The case's name. */
  heap: string;
  /** The process's environment besides the ports. */
  env: Record<string, string>;
  /** Characters of key text sent in all (in calls of 64 values of 4,000). */
  keyText: number;
  /** A memory limit (bytes) the whole process's RSS must stay under, as a container's. */
  rssLimit?: number;
}

describe.each<FloodCase>([
  {
    heap: 'the default heap, MEMORY_MAX_BYTES=64 MiB',
    env: { MEMORY_MAX_BYTES: String(64 * MiB) },
    // The cap ten times over: without the byte cap the keys alone pass the bound.
    keyText: 10 * 64 * MiB,
  },
  {
    heap: '--max-old-space-size=256, MEMORY_MAX_BYTES unset (half the old space)',
    env: { NODE_OPTIONS: '--max-old-space-size=256' },
    // More key text than the whole heap: without the byte cap the process runs out of heap.
    keyText: 400 * MiB,
  },
  {
    // The image runs Node 24, whose young generation outside a container (192 MiB here) is
    // larger than Node 22's (48 MiB): the heap limit, and the garbage a flood leaves, grow
    // with it; the default cap, half the old space, does not.
    heap: "the Kubernetes Deployment's NODE_OPTIONS and MEMORY_* settings, under its memory limit",
    env: DEPLOYMENT.env,
    // The cap filled about three times over.
    keyText: 800 * MiB,
    rssLimit: DEPLOYMENT.limitBytes,
  },
])('a flood of long keys on $heap', ({ env, keyText, rssLimit }) => {
  const group = useProcessGroup();
  let sluice: SluiceProcess;
  let httpPort: number;
  let pid: number;
  let client: EnvoyRlsClient;

  beforeAll(async () => {
    ensureBuilt();
    httpPort = await freePort();
    sluice = await startSluice(group, {
      configDir: await ruleDir(RULES),
      grpcPort: await freePort(),
      env: { PORT: String(httpPort), LOG_LEVEL: 'info', ...env },
    });
    pid = sluice.proc.child.pid!;
    client = createEnvoyRlsClient(`127.0.0.1:${sluice.grpcPort}`);
  }, 120_000);
  afterAll(() => client?.close());

  it('keeps answering, holds at most the cap, and its RSS stays within the documented bound', async () => {
    const { maxBytes, oldSpaceBytes, heapLimitBytes } = loggedLimits(sluice);
    // A few calls first, so the RSS compared with is that of a process that has served.
    expect((await flood(client, pid, 0, WARM_UP)).failure).toBeUndefined();
    const base = rssBytes(pid);
    const baseHeap = await metric(httpPort, 'nodejs_heap_size_used_bytes');
    const calls = Math.ceil(keyText / (VALUE_CHARS * DESCRIPTORS));
    const started = Date.now();
    const result = await flood(client, pid, WARM_UP, calls);
    const seconds = (Date.now() - started) / 1000;
    const figures = {
      maxBytes,
      oldSpaceMb: oldSpaceBytes / MiB,
      heapLimitMb: heapLimitBytes / MiB,
      calls,
      answered: result.answered,
      seconds,
      baseRssMb: base / MiB,
      baseHeapMb: baseHeap / MiB,
      peakRssMb: result.peakRss / MiB,
      keys: await metric(httpPort, 'sluice_store_keys').catch(() => -1),
      heapTotalMb: (await metric(httpPort, 'nodejs_heap_size_total_bytes').catch(() => 0)) / MiB,
      heapUsedMb: (await metric(httpPort, 'nodejs_heap_size_used_bytes').catch(() => 0)) / MiB,
    };
    console.log(JSON.stringify(figures));
    expect(result.failure, JSON.stringify(figures)).toBeUndefined();
    expect(result.answered, 'the flood ran out of time').toBe(calls);
    expect(sluice.proc.hasExited()).toBe(false);
    // Without MEMORY_MAX_BYTES the cap is half the old space: a full store leaves the other
    // half to the rest of the process and its garbage.
    if (env['MEMORY_MAX_BYTES'] === undefined) expect(maxBytes).toBe(oldSpaceBytes / 2);
    // The heap limit bounds the heap whatever the garbage.
    expect(result.peakRss - base, JSON.stringify(figures)).toBeLessThanOrEqual(
      Math.min(RSS_FACTOR * (baseHeap + maxBytes), heapLimitBytes) + RSS_SLACK,
    );
    // A container is killed past its limit, whatever the bound above allows.
    if (rssLimit !== undefined) {
      expect(result.peakRss, JSON.stringify(figures)).toBeLessThan(rssLimit);
    }
    // The store holds what fits in the cap (each key is over 4,000 bytes) and evicted the rest.
    expect(figures.keys).toBeGreaterThan(0);
    expect(figures.keys).toBeLessThanOrEqual(maxBytes / VALUE_CHARS);
    const evicted = await metric(httpPort, 'sluice_store_evictions_total{reason="lru"}');
    expect(evicted).toBe((WARM_UP + calls) * DESCRIPTORS - figures.keys);
    // And it still serves: health, and a call of a key it has never seen.
    expect(await grpcHealthStatus(`127.0.0.1:${sluice.grpcPort}`, 10_000)).toBe('SERVING');
    const fresh = await client.shouldRateLimit(
      { domain: 'flood', descriptors: [{ entries: [{ key: 'v', value: 'fresh' }] }] },
      10_000,
    );
    expect(fresh.statuses[0]?.limit_remaining).toBe(999);
  });
});
