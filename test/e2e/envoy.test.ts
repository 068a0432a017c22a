/**
 * End to end: a real Envoy (the pinned 1.40 binary, scripts/install-envoy.sh) running the shipped
 * envoy/envoy.yaml with only addresses and ports moved to loopback, in front of a loopback upstream
 * that answers 200, calling a real sluice (`node dist/main.js serve --config envoy/ratelimit`).
 *
 * Envoy builds x-ratelimit-* from sluice's statuses (DRAFT_VERSION_03, see Envoy's
 * source/extensions/filters/http/ratelimit/ratelimit_headers.cc):
 *   x-ratelimit-limit:     `<limit>, <limit>;w=<window seconds>[;name="<rule name>"]`
 *   x-ratelimit-remaining: limit_remaining of the status with the least remaining
 *   x-ratelimit-reset:     whole seconds of that status's duration_until_reset
 * and on OVER_LIMIT answers 429 with `x-envoy-ratelimited: true`.
 *
 * Each describe block runs its own sluice (counters live in memory) and its own Envoy.
 */
import { execFile, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { parse } from 'yaml';
import { beforeAll, describe, expect, it } from 'vitest';
import { bucketMsFor } from '../../src/algorithms/sliding-window.js';
import {
  DEMO_RULES_DIR,
  envoyBinary,
  envoyStats,
  loadShippedEnvoyConfig,
  rateLimitFilterConfig,
  requireEnvoy,
  rewriteForLoopback,
  startEnvoy,
  startLoopbackUpstream,
  type EnvoyConfig,
  type EnvoyProcess,
  type LoopbackPorts,
  type LoopbackUpstream,
} from '../helpers/envoy.js';
import {
  REPO_ROOT,
  canConnect,
  ensureBuilt,
  freePort,
  startSluice,
  useProcessGroup,
  WaitAborted,
  waitFor,
  type ProcessGroup,
  type SluiceProcess,
} from '../helpers/processes.js';

const envoy = requireEnvoy('e2e: sluice behind Envoy');
const suite = (title: string): string =>
  envoy.skip ? `${title} (SKIPPED: ${envoy.reason})` : title;

/** Stat names of Envoy's HTTP rate limit filter, rooted at the route's target cluster. */
const STAT_ERROR = 'cluster.upstream.ratelimit.error';
const STAT_FAILURE_MODE_ALLOWED = 'cluster.upstream.ratelimit.failure_mode_allowed';
const STAT_OVER_LIMIT = 'cluster.upstream.ratelimit.over_limit';
const STAT_OK = 'cluster.upstream.ratelimit.ok';

interface Reply {
  readonly status: number;
  readonly headers: Headers;
}

/** Two source addresses on loopback (Linux routes all of 127.0.0.0/8 to lo): two clients. */
const CLIENT_A = '127.0.0.1';
const CLIENT_B = '127.0.0.2';

/**
 * GET through Envoy from the source address `localAddress` on a fresh connection, bounded. With
 * `use_remote_address: true` and no trusted hops (envoy.yaml), Envoy's remote_address action uses
 * this TCP peer address, whatever X-Forwarded-For says.
 */
async function getFrom(
  localAddress: string,
  baseUrl: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const url = new URL(path, baseUrl);
  return new Promise<Reply>((resolve, reject) => {
    const request = http.get(
      {
        host: url.hostname,
        port: url.port,
        path: `${url.pathname}${url.search}`,
        headers,
        localAddress,
        agent: false,
        timeout: 5_000,
      },
      (response) => {
        const replyHeaders = new Headers();
        for (const [name, value] of Object.entries(response.headers)) {
          for (const v of Array.isArray(value) ? value : [value ?? ''])
            replyHeaders.append(name, v);
        }
        response.resume();
        response.once('error', reject);
        response.once('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: replyHeaders }),
        );
      },
    );
    request.once('timeout', () => request.destroy(new Error(`GET ${path}: timed out`)));
    request.once('error', reject);
  });
}

/** GET through Envoy from the default client address ({@link CLIENT_A}). */
function get(baseUrl: string, path: string, headers: Record<string, string> = {}): Promise<Reply> {
  return getFrom(CLIENT_A, baseUrl, path, headers);
}

/** One sluice + Envoy + upstream stack for a describe block. */
interface Stack {
  readonly group: ProcessGroup;
  envoy: EnvoyProcess;
  sluice: SluiceProcess;
  upstream: LoopbackUpstream;
  ports: LoopbackPorts;
}

/**
 * Register beforeAll hooks that start upstream, sluice and Envoy (with `edit` applied to the
 * loopback copy of envoy.yaml); everything is stopped in afterAll by the process group.
 */
function useStack(
  edit: (config: EnvoyConfig) => void = () => {},
  sluiceEnv: Record<string, string> = {},
): Stack {
  const stack = { group: useProcessGroup() } as Stack;
  beforeAll(async () => {
    const binary = envoyBinary(envoy);
    ensureBuilt();
    stack.upstream = await startLoopbackUpstream(stack.group);
    stack.ports = {
      listenerPort: await freePort(),
      adminPort: await freePort(),
      sluicePort: await freePort(),
      upstreamPort: stack.upstream.port,
    };
    stack.sluice = await startSluice(stack.group, {
      configDir: DEMO_RULES_DIR,
      grpcPort: stack.ports.sluicePort,
      env: sluiceEnv,
    });
    const config = rewriteForLoopback(loadShippedEnvoyConfig(), stack.ports);
    edit(config);
    stack.envoy = await startEnvoy(stack.group, { binary, config, ports: stack.ports });
  });
  return stack;
}

/** A demo rule as Envoy reports it. */
interface Rule {
  readonly limit: number;
  readonly windowSeconds: number;
  readonly name?: string;
}

function policy(rule: Rule): string {
  const name = rule.name === undefined ? '' : `;name="${rule.name}"`;
  return `${rule.limit}, ${rule.limit};w=${rule.windowSeconds}${name}`;
}

/**
 * x-ratelimit-reset is the whole seconds of duration_until_reset. With the default sliding window,
 * a hit is counted for at least W and at most W plus one sub-bucket (docs/semantics.md §4: under-admission is
 * bounded by one sub-bucket), so right after the first hits the reset lies in (W - elapsed, W + b].
 */
function expectReset(reply: Reply, rule: Rule, what: string): void {
  const reset = Number(reply.headers.get('x-ratelimit-reset'));
  const windowMs = rule.windowSeconds * 1_000;
  expect(Number.isInteger(reset), `${what}: x-ratelimit-reset`).toBe(true);
  // Nothing of this rule has expired yet: the test spends seconds, not the window.
  expect(reset, `${what}: x-ratelimit-reset`).toBeGreaterThanOrEqual(rule.windowSeconds - 15);
  expect(reset, `${what}: x-ratelimit-reset`).toBeLessThanOrEqual(
    Math.ceil((windowMs + bucketMsFor(windowMs)) / 1_000),
  );
}

/**
 * Send `rule.limit` requests that must pass with the rule's headers and a remaining count going
 * down to 0, then one that must be refused with 429 without reaching the upstream.
 */
async function expectLimited(
  stack: Stack,
  rule: Rule,
  request: (i: number) => Promise<Reply>,
): Promise<void> {
  for (let i = 1; i <= rule.limit; i++) {
    const reply = await request(i);
    const what = `request ${i} of ${rule.limit}`;
    expect(reply.status, what).toBe(200);
    expect(reply.headers.get('x-ratelimit-limit'), what).toBe(policy(rule));
    expect(reply.headers.get('x-ratelimit-remaining'), what).toBe(String(rule.limit - i));
    expectReset(reply, rule, what);
    expect(reply.headers.get('x-envoy-ratelimited'), what).toBeNull();
  }
  const before = stack.upstream.requests();
  const over = await request(rule.limit + 1);
  const what = `request ${rule.limit + 1} (over the limit)`;
  expect(over.status, what).toBe(429);
  expect(over.headers.get('x-envoy-ratelimited'), what).toBe('true');
  expect(over.headers.get('x-ratelimit-limit'), what).toBe(policy(rule));
  expect(over.headers.get('x-ratelimit-remaining'), what).toBe('0');
  expectReset(over, rule, what);
  expect(stack.upstream.requests(), 'a 429 never reaches the upstream').toBe(before);
}

describe.skipIf(envoy.skip)(suite('each route reaches its rule through Envoy'), () => {
  const stack = useStack();
  const base = (): string => stack.envoy.baseUrl;

  it('generic_key on "/": 5 per minute shared by every path no other route takes', async () => {
    const rule = { limit: 5, windowSeconds: 60 };
    await expectLimited(stack, rule, () => get(base(), '/'));
    // Same descriptor (generic_key=default) from another path: already over the limit.
    const other = await get(base(), '/anything/else');
    expect(other.status).toBe(429);
    expect(other.headers.get('x-ratelimit-limit')).toBe(policy(rule));

    const stats = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
    expect(stats.get(STAT_OK)).toBeGreaterThanOrEqual(5);
    expect(stats.get(STAT_OVER_LIMIT)).toBeGreaterThanOrEqual(2);
    expect(stats.get(STAT_ERROR) ?? 0).toBe(0);
  });

  it("docker-compose.yml's envoy health check passes against a real Envoy admin", () => {
    const compose = parse(readFileSync(path.join(REPO_ROOT, 'docker-compose.yml'), 'utf8'));
    const test = compose.services.envoy.healthcheck.test as string[];
    // CMD-SHELL: the engine runs the one string with `/bin/sh -c`, as done here.
    expect(test).toHaveLength(2);
    expect(test[0]).toBe('CMD-SHELL');
    const script = (test[1] ?? '').replace('/9901', `/${stack.ports.adminPort}`);
    const result = spawnSync('/bin/sh', ['-c', script], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status, result.stderr).toBe(0);
  });

  it('request_headers on "/api": 4 per minute per x-api-key value', async () => {
    const rule = { limit: 4, windowSeconds: 60 };
    await expectLimited(stack, rule, () => get(base(), '/api/orders', { 'x-api-key': 'key-a' }));
    // Another key has its own counter.
    const other = await get(base(), '/api/orders', { 'x-api-key': 'key-b' });
    expect(other.status).toBe(200);
    expect(other.headers.get('x-ratelimit-remaining')).toBe('3');
  });

  it('request_headers on "/api": keys matching partner-* get the named 10 per minute rule', async () => {
    await expectLimited(stack, { limit: 10, windowSeconds: 60, name: 'partner' }, () =>
      get(base(), '/api/orders', { 'x-api-key': 'partner-acme' }),
    );
  });

  it('request_headers on "/api": no x-api-key, no descriptor, so Envoy does not limit', async () => {
    for (let i = 0; i < 6; i++) {
      const reply = await get(base(), '/api/orders');
      expect(reply.status).toBe(200);
      expect(reply.headers.get('x-ratelimit-limit')).toBeNull();
    }
  });

  it('remote_address on "/ip": 6 per minute per client, X-Forwarded-For cannot dodge it', async () => {
    const rule = { limit: 6, windowSeconds: 60 };
    await expectLimited(stack, rule, (i) =>
      getFrom(CLIENT_A, base(), '/ip', { 'x-forwarded-for': `203.0.113.${i}` }),
    );
    // Another client (another TCP peer address) has its own counter, even when it claims to be the
    // first one in X-Forwarded-For...
    const other = await getFrom(CLIENT_B, base(), '/ip', { 'x-forwarded-for': CLIENT_A });
    expect(other.status, `${CLIENT_B} after ${CLIENT_A} is limited`).toBe(200);
    expect(other.headers.get('x-ratelimit-limit')).toBe(policy(rule));
    expect(other.headers.get('x-ratelimit-remaining')).toBe(String(rule.limit - 1));
    // ...and the first client stays limited.
    expect((await getFrom(CLIENT_A, base(), '/ip')).status).toBe(429);
  });

  it('header_value_match on "/reports": "x-plan: free" gets the named 2 per minute rule', async () => {
    await expectLimited(stack, { limit: 2, windowSeconds: 60, name: 'free-plan' }, () =>
      get(base(), '/reports/daily', { 'x-plan': 'free' }),
    );
    // Another plan does not match the header, so no descriptor and no limit.
    const pro = await get(base(), '/reports/daily', { 'x-plan': 'pro' });
    expect(pro.status).toBe(200);
    expect(pro.headers.get('x-ratelimit-limit')).toBeNull();
  });

  it('nested (path=/login, remote_address) on "/login": the named 3 per hour rule, per client', async () => {
    const rule = { limit: 3, windowSeconds: 3600, name: 'login' };
    await expectLimited(stack, rule, () => getFrom(CLIENT_A, base(), '/login'));
    const other = await getFrom(CLIENT_B, base(), '/login');
    expect(other.status, `${CLIENT_B} after ${CLIENT_A} is limited`).toBe(200);
    expect(other.headers.get('x-ratelimit-limit')).toBe(policy(rule));
    expect(other.headers.get('x-ratelimit-remaining')).toBe(String(rule.limit - 1));
    expect((await getFrom(CLIENT_A, base(), '/login')).status).toBe(429);
  });
});

describe.skipIf(envoy.skip)(suite('fail-open (failure_mode_deny: false, as shipped)'), () => {
  const stack = useStack();

  it('ships fail-open', () => {
    expect(rateLimitFilterConfig(loadShippedEnvoyConfig())['failure_mode_deny']).toBe(false);
  });

  it('lets requests through while sluice is down and counts them, then limits again', async () => {
    const base = stack.envoy.baseUrl;
    await expectLimited(stack, { limit: 5, windowSeconds: 60 }, () => get(base, '/'));

    const before = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
    await stack.sluice.proc.stop();
    expect(await canConnect('127.0.0.1', stack.ports.sluicePort)).toBe(false);

    const attempts = 8;
    const upstreamBefore = stack.upstream.requests();
    for (let i = 1; i <= attempts; i++) {
      const reply = await get(base, '/');
      expect(reply.status, `request ${i} with sluice down`).toBe(200);
      expect(reply.headers.get('x-ratelimit-limit'), `request ${i}`).toBeNull();
      expect(reply.headers.get('x-envoy-ratelimited'), `request ${i}`).toBeNull();
    }
    expect(stack.upstream.requests() - upstreamBefore).toBe(attempts);

    const grew = async (): Promise<boolean> => {
      const after = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
      return (
        (after.get(STAT_ERROR) ?? 0) - (before.get(STAT_ERROR) ?? 0) === attempts &&
        (after.get(STAT_FAILURE_MODE_ALLOWED) ?? 0) -
          (before.get(STAT_FAILURE_MODE_ALLOWED) ?? 0) ===
          attempts
      );
    };
    await waitFor(`${STAT_ERROR} and ${STAT_FAILURE_MODE_ALLOWED} to grow by ${attempts}`, grew, {
      timeoutMs: 5_000,
    });

    // A new sluice on the same port: Envoy reconnects and limits again (fresh in-memory counters).
    stack.sluice = await startSluice(stack.group, {
      configDir: DEMO_RULES_DIR,
      grpcPort: stack.ports.sluicePort,
    });
    let reply: Reply | undefined;
    await waitFor(
      'Envoy to reach the restarted sluice',
      async () => {
        reply = await get(base, '/');
        return reply.headers.get('x-ratelimit-limit') !== null;
      },
      { timeoutMs: 10_000, intervalMs: 200 },
    );
    expect(reply?.status).toBe(200);
    expect(reply?.headers.get('x-ratelimit-limit')).toBe('5, 5;w=60');
  });
});

describe.skipIf(envoy.skip)(suite('fail-closed variant (failure_mode_deny: true)'), () => {
  const stack = useStack((config) => {
    rateLimitFilterConfig(config)['failure_mode_deny'] = true;
  });

  it('answers 500 while sluice is down and counts errors, not allowed requests', async () => {
    const base = stack.envoy.baseUrl;
    const up = await get(base, '/');
    expect(up.status).toBe(200);
    expect(up.headers.get('x-ratelimit-limit')).toBe('5, 5;w=60');

    const before = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
    await stack.sluice.proc.stop();
    const attempts = 3;
    const upstreamBefore = stack.upstream.requests();
    for (let i = 1; i <= attempts; i++) {
      const reply = await get(base, '/');
      expect(reply.status, `request ${i} with sluice down`).toBe(500);
    }
    expect(stack.upstream.requests()).toBe(upstreamBefore);
    await waitFor(
      `${STAT_ERROR} to grow by ${attempts}`,
      async () => {
        const after = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
        return (after.get(STAT_ERROR) ?? 0) - (before.get(STAT_ERROR) ?? 0) === attempts;
      },
      { timeoutMs: 5_000 },
    );
    const after = await envoyStats(stack.envoy.adminUrl, '^cluster\\.upstream\\.ratelimit\\.');
    expect(after.get(STAT_FAILURE_MODE_ALLOWED) ?? 0).toBe(
      before.get(STAT_FAILURE_MODE_ALLOWED) ?? 0,
    );
  });
});

describe.skipIf(envoy.skip)(suite('the no-Docker demo: scripts/demo-envoy.sh'), () => {
  const group = useProcessGroup();

  it('runs the loopback Envoy in one command; the curl loop turns 200s into 429s', async () => {
    const binary = envoyBinary(envoy);
    ensureBuilt();
    const ports = {
      envoy: await freePort(),
      admin: await freePort(),
      grpc: await freePort(),
      upstream: await freePort(),
    };
    await startSluice(group, { configDir: DEMO_RULES_DIR, grpcPort: ports.grpc });
    // The script writes its loopback config to .cache/demo/envoy-<port>.yaml (git-ignored).
    group.onCleanup(() =>
      rm(path.join(REPO_ROOT, '.cache', 'demo', `envoy-${ports.envoy}.yaml`), { force: true }),
    );
    const demo = group.spawn('demo-envoy.sh', 'bash', ['scripts/demo-envoy.sh'], {
      env: {
        ...process.env,
        ENVOY_BIN: binary,
        ENVOY_PORT: String(ports.envoy),
        ENVOY_ADMIN_PORT: String(ports.admin),
        GRPC_PORT: String(ports.grpc),
        UPSTREAM_PORT: String(ports.upstream),
      },
    });
    const base = `http://127.0.0.1:${ports.envoy}`;
    await waitFor(
      'the demo Envoy and its upstream to answer',
      async () => {
        if (demo.hasExited()) throw new WaitAborted(`demo-envoy.sh exited:\n${demo.output()}`);
        const ready = await fetch(`http://127.0.0.1:${ports.admin}/ready`);
        await ready.arrayBuffer();
        return ready.status === 200 && (await canConnect('127.0.0.1', ports.upstream));
      },
      { timeoutMs: 20_000, onTimeout: () => demo.output() },
    );

    // The script rewrites envoy.yaml exactly as the tests do (rewriteForLoopback): only addresses.
    const written = parse(
      readFileSync(path.join(REPO_ROOT, '.cache', 'demo', `envoy-${ports.envoy}.yaml`), 'utf8'),
    ) as EnvoyConfig;
    expect(written).toEqual(
      rewriteForLoopback(loadShippedEnvoyConfig(), {
        listenerPort: ports.envoy,
        adminPort: ports.admin,
        sluicePort: ports.grpc,
        upstreamPort: ports.upstream,
      }),
    );

    const statuses: number[] = [];
    let last: Reply | undefined;
    for (let i = 0; i < 8; i++) {
      last = await get(base, '/');
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect(last?.headers.get('x-envoy-ratelimited')).toBe('true');
    expect(last?.headers.get('x-ratelimit-limit')).toBe('5, 5;w=60');

    // Ctrl-C / SIGTERM takes Envoy and the demo upstream down with the script.
    await demo.stop();
    await waitFor(
      'the demo Envoy and upstream to stop',
      async () =>
        !(await canConnect('127.0.0.1', ports.envoy)) &&
        !(await canConnect('127.0.0.1', ports.upstream)),
      { timeoutMs: 10_000 },
    );
  });
});

/** A response as curl printed it with `-i`: status, headers (lower-case names), body. */
interface CurlReply {
  readonly status: number;
  readonly headers: Map<string, string[]>;
  readonly body: string;
}

/**
 * `curl -sS -i URL`: what a real HTTP client receives through Envoy. Run asynchronously: the
 * loopback upstream lives in this process, so a blocking spawn would stall it.
 */
async function curl(url: string): Promise<CurlReply> {
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      'curl',
      ['-sS', '-i', '--max-time', '5', url],
      { encoding: 'utf8' },
      (error, out, err) => {
        if (error) reject(new Error(`curl ${url} failed: ${err || error.message}`));
        else resolve(out);
      },
    );
  });
  const [head = '', ...rest] = stdout.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = new Map<string, string[]>();
  for (const line of lines) {
    const at = line.indexOf(':');
    const name = line.slice(0, at).trim().toLowerCase();
    headers.set(name, [...(headers.get(name) ?? []), line.slice(at + 1).trim()]);
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') };
}

describe.skipIf(envoy.skip)(
  suite('rate limit headers from sluice reach a curl client through Envoy'),
  () => {
    describe('LIMIT_RESPONSE_HEADERS_ENABLED: the reference headers', () => {
      const stack = useStack(() => {}, { LIMIT_RESPONSE_HEADERS_ENABLED: 'true' });

      it('RateLimit-Limit, -Remaining and -Reset on 200s and on the 429', async () => {
        const base = `http://127.0.0.1:${stack.ports.listenerPort}`;
        // "/" is generic_key=default, 5 per minute (envoy/ratelimit/edge.yaml).
        for (let i = 1; i <= 5; i++) {
          const reply = await curl(`${base}/`);
          expect(reply.status, `request ${i}`).toBe(200);
          expect(reply.headers.get('ratelimit-limit')).toEqual(['5']);
          expect(reply.headers.get('ratelimit-remaining')).toEqual([String(5 - i)]);
          const reset = Number(reply.headers.get('ratelimit-reset')?.[0]);
          expect(reset).toBeGreaterThanOrEqual(45);
          expect(reset).toBeLessThanOrEqual(63);
        }
        const over = await curl(`${base}/`);
        expect(over.status).toBe(429);
        expect(over.headers.get('x-envoy-ratelimited')).toEqual(['true']);
        expect(over.headers.get('ratelimit-limit')).toEqual(['5']);
        expect(over.headers.get('ratelimit-remaining')).toEqual(['0']);
      });
    });

    describe('LIMIT_RESPONSE_HEADERS_FORMAT=ietf and LIMIT_PROBLEM_JSON_ENABLED', () => {
      const stack = useStack(() => {}, {
        LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
        LIMIT_RESPONSE_HEADERS_FORMAT: 'ietf',
        LIMIT_PROBLEM_JSON_ENABLED: 'true',
      });

      it('RateLimit-Policy and RateLimit on 200s; Retry-After and a problem+json body on the 429', async () => {
        const base = `http://127.0.0.1:${stack.ports.listenerPort}`;
        for (let i = 1; i <= 5; i++) {
          const reply = await curl(`${base}/`);
          expect(reply.status, `request ${i}`).toBe(200);
          expect(reply.headers.get('ratelimit-policy')).toEqual([
            '"edge.generic_key_default";q=5;w=60',
          ]);
          expect(reply.headers.get('ratelimit')?.[0]).toMatch(
            new RegExp(`^"edge.generic_key_default";r=${5 - i};t=\\d+$`),
          );
          expect(reply.headers.get('retry-after')).toBeUndefined();
        }
        const over = await curl(`${base}/`);
        expect(over.status).toBe(429);
        expect(Number(over.headers.get('retry-after')?.[0])).toBeGreaterThanOrEqual(1);
        expect(over.headers.get('content-type')).toEqual(['application/problem+json']);
        const problem = JSON.parse(over.body) as Record<string, unknown>;
        expect(problem).toMatchObject({ status: 429, title: 'Too Many Requests' });
      });
    });
  },
);
