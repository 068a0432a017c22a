/**
 * `sluice/middleware` in real Express 5, Fastify 5 and node:http apps over real HTTP on port 0,
 * backed by a real sluice (remote, through `sluice/client`) or by the embedded limiter: the
 * sixth request of a 5-per-minute rule gets 429 with the IETF headers, `Retry-After` and a
 * problem+json body; admitted responses carry the headers; the failure policy with the server
 * stopped; and both modes answer alike, with one fake clock for the server and the embedded
 * limiter so even the `t` values are the same.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { parseList } from 'structured-headers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimitClient, type RateLimitClient } from '../../src/node/client.js';
import type { RateLimitBackend, RateLimitFailure } from '../../src/node/decision.js';
import { createEmbeddedLimiter, type EmbeddedLimiter } from '../../src/node/embedded.js';
import {
  fastifyRateLimit,
  genericKey,
  header,
  rateLimit,
  remoteAddress,
  route,
  withRateLimit,
  type FastifyRateLimitOptions,
  type HttpRateLimitOptions,
  type RateLimitOptions,
  type RequestLike,
} from '../../src/node/middleware/index.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';

const RULES = `
domain: web
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5, name: per-key}
  - key: generic_key
    value: search
    descriptors:
      - key: remote_address
        rate_limit: {unit: hour, requests_per_unit: 2}
`;

/** One fixed instant for the server's store and the embedded one: same counts, same resets. */
const NOW = Date.UTC(2026, 10, 27, 12, 0, 30, 250);
const clock = (): number => NOW;

type Framework = 'express' | 'fastify' | 'node:http';
const FRAMEWORKS: readonly Framework[] = ['express', 'fastify', 'node:http'];

/** The options every app gets, on `limiter`. */
function baseOptions(limiter: RateLimitBackend): RateLimitOptions<RequestLike> {
  return {
    limiter,
    domain: 'web',
    descriptors: [[header('x-api-key', 'api_key')]],
  };
}

/** Options whose one descriptor is `generic_key=search` and the client address. */
function searchOptions(limiter: RateLimitBackend): RateLimitOptions<RequestLike> {
  return { limiter, domain: 'web', descriptors: [[genericKey('search'), remoteAddress()]] };
}

/** A running app and its base URL. */
interface RunningHttp {
  readonly url: string;
  close(): Promise<void>;
}

/** Start `framework` on 127.0.0.1:0 with `GET /limited`, `GET /free` and the middleware. */
async function startFramework(
  framework: Framework,
  options: RateLimitOptions<RequestLike> & Partial<FastifyRateLimitOptions>,
): Promise<RunningHttp> {
  if (framework === 'fastify') {
    const app = Fastify();
    await app.register(fastifyRateLimit, options);
    app.get('/limited', () => Promise.resolve({ ok: true }));
    app.get('/free', { config: { rateLimit: false } }, () => Promise.resolve({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
  }
  let server: http.Server;
  if (framework === 'express') {
    const app = express();
    app.get('/free', (_req, res) => void res.json({ ok: true }));
    app.use(rateLimit(options as HttpRateLimitOptions<express.Request>));
    app.get('/limited', (_req, res) => void res.json({ ok: true }));
    server = http.createServer(app);
  } else {
    server = http.createServer(
      withRateLimit(options as HttpRateLimitOptions, (_req, res) => {
        res.setHeader('content-type', 'application/json');
        res.end('{"ok":true}');
      }),
    );
  }
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** What a response says, for comparing and asserting. */
interface Seen {
  readonly status: number;
  readonly policy: string | null;
  readonly limit: string | null;
  readonly retryAfter: string | null;
  readonly contentType: string | null;
  readonly body: string;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Seen> {
  const response = await fetch(url, { headers });
  return {
    status: response.status,
    policy: response.headers.get('ratelimit-policy'),
    limit: response.headers.get('ratelimit'),
    retryAfter: response.headers.get('retry-after'),
    contentType: response.headers.get('content-type'),
    body: await response.text(),
  };
}

/** `RateLimit-Policy` / `RateLimit` as structured-field lists: [name, params][]. */
function list(value: string | null): [unknown, Record<string, unknown>][] {
  expect(value).not.toBeNull();
  return parseList(value!).map(([name, params]) => [name, Object.fromEntries(params)]);
}

let server: RunningApp;
let remote: RateLimitClient;
let embedded: EmbeddedLimiter;
let rules: string;

beforeAll(async () => {
  rules = await ruleDir({ 'web.yaml': RULES });
  server = await startApp([rules], {}, { clock });
  remote = createRateLimitClient({ address: `127.0.0.1:${server.port}`, timeoutMs: 5_000 });
  embedded = await createEmbeddedLimiter({ rules, clock, watch: false });
});
afterAll(async () => {
  remote?.close();
  await embedded?.close();
  await server?.stop();
});

const MODES = ['remote', 'embedded'] as const;
const backend = (mode: (typeof MODES)[number]): RateLimitBackend =>
  mode === 'remote' ? remote : embedded;

describe.each(FRAMEWORKS.flatMap((f) => MODES.map((m) => [f, m] as const)))(
  '%s, %s',
  (framework, mode) => {
    let app: RunningHttp;
    beforeAll(async () => {
      app = await startFramework(framework, baseOptions(backend(mode)));
    });
    afterAll(() => app?.close());

    it('admits five requests of a 5-per-minute rule with the headers, and answers the sixth 429', async () => {
      const key = { 'x-api-key': `${framework}-${mode}-six` };
      const seen: Seen[] = [];
      for (let i = 0; i < 6; i++) seen.push(await get(`${app.url}/limited`, key));
      expect(seen.map((s) => s.status)).toEqual([200, 200, 200, 200, 200, 429]);
      for (let i = 0; i < 5; i++) {
        expect(JSON.parse(seen[i]!.body)).toEqual({ ok: true });
        expect(list(seen[i]!.policy)).toEqual([['per-key', { q: 5, w: 60 }]]);
        const [[name, params]] = list(seen[i]!.limit) as [[unknown, Record<string, unknown>]];
        expect(name).toBe('per-key');
        expect(params['r']).toBe(4 - i);
        expect(params['t']).toBeGreaterThan(0);
        expect(seen[i]!.retryAfter).toBeNull();
      }
      const sixth = seen[5]!;
      expect(list(sixth.policy)).toEqual([['per-key', { q: 5, w: 60 }]]);
      const [[, params]] = list(sixth.limit) as [[unknown, Record<string, unknown>]];
      expect(params['r']).toBe(0);
      const retryAfter = Number(sixth.retryAfter);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(params['t']).toBe(retryAfter);
      expect(sixth.contentType).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(sixth.body)).toEqual({
        type: 'about:blank',
        title: 'Too Many Requests',
        status: 429,
        detail: `rate limit of 5 per minute exceeded (per-key); retry in ${retryAfter} s`,
        retry_after: retryAfter,
      });
    });

    it('lets a request without descriptors through with no headers', async () => {
      const seen = await get(`${app.url}/limited`);
      expect([seen.status, seen.policy, seen.limit]).toEqual([200, null, null]);
    });
  },
);

describe('the client address helper and unnamed policies', () => {
  it.each(MODES)('%s: names a policy by the domain and the descriptor keys', async (mode) => {
    const app = await startFramework('fastify', searchOptions(backend(mode)));
    try {
      const seen: Seen[] = [];
      for (let i = 0; i < 3; i++) seen.push(await get(`${app.url}/limited`));
      expect(seen.map((s) => s.status)).toEqual([200, 200, 429]);
      expect(list(seen[0]!.policy)).toEqual([
        ['web.generic_key.remote_address', { q: 2, w: 3600 }],
      ]);
    } finally {
      await app.close();
    }
  });
});

describe('the same answers, remote and embedded', () => {
  it.each(FRAMEWORKS)('%s: one sequence of requests, status, headers and body alike', async (f) => {
    const run = async (mode: (typeof MODES)[number]): Promise<Seen[]> => {
      const app = await startFramework(f, baseOptions(backend(mode)));
      try {
        const seen: Seen[] = [];
        for (let i = 0; i < 7; i++) {
          seen.push(await get(`${app.url}/limited`, { 'x-api-key': `${f}-same-a` }));
        }
        seen.push(await get(`${app.url}/limited`, { 'x-api-key': `${f}-same-b` }));
        return seen;
      } finally {
        await app.close();
      }
    };
    const remoteSeen = await run('remote');
    const embeddedSeen = await run('embedded');
    expect(embeddedSeen).toEqual(remoteSeen);
    expect(remoteSeen.map((s) => s.status)).toEqual([200, 200, 200, 200, 200, 429, 429, 200]);
  });
});

describe('options', () => {
  it('skips requests, leaves headers off admitted responses, and routes by pattern', async () => {
    const key = (id: string) => ({ 'x-api-key': `options-${id}` });
    const app = await startFramework('express', {
      ...baseOptions(embedded),
      headers: false,
      skip: (req) => req.headers['x-internal'] === '1',
    });
    try {
      for (let i = 0; i < 5; i++) {
        const seen = await get(`${app.url}/limited`, key('skip'));
        expect([seen.status, seen.policy, seen.limit]).toEqual([200, null, null]);
      }
      expect((await get(`${app.url}/limited`, key('skip'))).status).toBe(429);
      expect((await get(`${app.url}/limited`, { ...key('skip'), 'x-internal': '1' })).status).toBe(
        200,
      );
    } finally {
      await app.close();
    }
  });

  it('Fastify: a route with config.rateLimit false is not limited; global false limits only configured routes', async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      ...baseOptions(embedded),
      global: false,
    });
    app.get('/open', () => Promise.resolve({ ok: true }));
    app.get(
      '/users/:id',
      {
        config: {
          rateLimit: { descriptors: [[genericKey('users', 'api_key')]], headers: true },
        },
      },
      () => Promise.resolve({ ok: true }),
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    try {
      for (let i = 0; i < 6; i++) expect((await get(`${url}/open`)).status).toBe(200);
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await get(`${url}/users/${i}`)).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await app.close();
    }
    const scoped = await startFramework('fastify', baseOptions(embedded));
    try {
      for (let i = 0; i < 7; i++) {
        const seen = await get(`${scoped.url}/free`, { 'x-api-key': 'options-free' });
        expect([seen.status, seen.policy]).toEqual([200, null]);
      }
    } finally {
      await scoped.close();
    }
  });

  it("calls the app's own rejection handler with the headers already set", async () => {
    const app = express();
    app.use(
      rateLimit<express.Request>({
        ...baseOptions(embedded),
        onRejected: (_req, res, _next, info) => {
          res.statusCode = info.status;
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ slowDown: info.retryAfter }));
        },
      }),
    );
    app.get('/limited', (_req, res) => void res.json({ ok: true }));
    const server = http.createServer(app);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/limited`;
    try {
      let seen: Seen | undefined;
      for (let i = 0; i < 6; i++) seen = await get(url, { 'x-api-key': 'options-handler' });
      expect(seen!.status).toBe(429);
      expect(seen!.retryAfter).not.toBeNull();
      expect(JSON.parse(seen!.body)).toEqual({ slowDown: Number(seen!.retryAfter) });
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });

  it("Fastify: calls the app's own rejection handler with the headers already set", async () => {
    const app = Fastify();
    await app.register(fastifyRateLimit, {
      ...baseOptions(embedded),
      onRejected: (_request, reply, info) =>
        reply.code(info.status).send({ slowDown: info.retryAfter }),
    });
    app.get('/limited', () => Promise.resolve({ ok: true }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/limited`;
    try {
      let seen: Seen | undefined;
      for (let i = 0; i < 6; i++) seen = await get(url, { 'x-api-key': 'options-fastify-handler' });
      expect(seen!.status).toBe(429);
      expect(seen!.limit).not.toBeNull();
      expect(JSON.parse(seen!.body)).toEqual({ slowDown: Number(seen!.retryAfter) });
    } finally {
      await app.close();
    }
  });

  it('refuses invalid options when created, naming the option', async () => {
    const ok = baseOptions(embedded);
    expect(() => rateLimit({ ...ok, limiter: {} as RateLimitBackend })).toThrow(/limiter must be/);
    expect(() => rateLimit({ ...ok, domain: '' })).toThrow(/domain must be/);
    expect(() => rateLimit({ ...ok, descriptors: [remoteAddress()] as never })).toThrow(
      /descriptors must be/,
    );
    expect(() => rateLimit({ ...ok, statusCode: 200 })).toThrow(/statusCode must be/);
    const app = Fastify();
    await expect(
      app.register(fastifyRateLimit, { ...ok, domain: 7 as unknown as string }).ready(),
    ).rejects.toThrow(/domain must be/);
  });

  it('the route helper names Fastify and Express route patterns and plain paths', () => {
    const of = (req: Partial<RequestLike>) => route()({ headers: {}, ...req });
    expect(of({ routeOptions: { url: '/users/:id' }, url: '/users/7' })).toEqual({
      key: 'route',
      value: '/users/:id',
    });
    expect(of({ route: { path: '/:id' }, baseUrl: '/users', url: '/users/7' })?.value).toBe(
      '/users/:id',
    );
    expect(of({ url: '/users/7?x=1' })?.value).toBe('/users/7');
    expect(remoteAddress()({ headers: {}, ip: '::ffff:10.0.0.1' })?.value).toBe('10.0.0.1');
    expect(remoteAddress()({ headers: {}, socket: { remoteAddress: '::1' } })?.value).toBe('::1');
  });
});

describe('the failure policy with the server stopped', () => {
  let stopped: RateLimitClient[] = [];
  afterAll(() => stopped.forEach((c) => c.close()));

  it.each(FRAMEWORKS)('%s: fails open with no headers, or closed with 503', async (framework) => {
    const gone = await startApp([rules]);
    const address = `127.0.0.1:${gone.port}`;
    await gone.stop();
    for (const failureMode of ['open', 'closed'] as const) {
      const client = createRateLimitClient({ address, failureMode, timeoutMs: 5_000 });
      stopped.push(client);
      const failures: RateLimitFailure[] = [];
      const app = await startFramework(framework, {
        ...baseOptions(client),
        onFailure: (failure) => failures.push(failure),
      });
      try {
        const seen = await get(`${app.url}/limited`, { 'x-api-key': 'stopped' });
        if (failureMode === 'open') {
          expect([seen.status, seen.policy, seen.limit]).toEqual([200, null, null]);
        } else {
          expect(seen.status).toBe(503);
          expect(seen.contentType).toMatch(/^application\/problem\+json/);
          expect(JSON.parse(seen.body)).toMatchObject({
            status: 503,
            title: 'Service Unavailable',
          });
          expect(seen.body).not.toContain(address);
        }
        expect(failures).toHaveLength(1);
        expect(failures[0]!.code).toBe('UNAVAILABLE');
        expect(failures[0]!.reason).toContain(address);
      } finally {
        await app.close();
      }
    }
    stopped = [];
  });
});
