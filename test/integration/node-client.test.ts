/**
 * `sluice/client` (src/node/client.ts) against real servers on loopback: the same checks against
 * a real sluice and against the reference (envoyproxy/ratelimit's service_cmd on a real Redis),
 * then what only a client does: the failure policy with no server, a deadline that passes, TLS
 * and mTLS, and reconnecting once the server is back.
 */
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRateLimitClient, type RateLimitClient } from '../../src/node/client.js';
import type { RateLimitDecision } from '../../src/node/decision.js';
import { missingBinaries, startReference } from '../differential/reference.js';
import { ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import { createCa, issueCert, pem, requireOpenssl } from '../helpers/certs.js';
import { freePort, inCi, useProcessGroup, waitFor } from '../helpers/processes.js';
import { startRedis } from '../helpers/redis.js';

/**
 * An hour window: the reference counts in epoch-aligned windows, and a minute's boundary inside
 * the six calls would reset its count; an hour's makes that vanishingly rare.
 */
const RULES = `
domain: node
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5, name: five}
  - key: open
`;

/** Generous: the machine may be busy, and a passed deadline would be a failure answer. */
const TIMEOUT_MS = 5_000;

/** The checks every server must pass, through `client()`. */
function sameChecks(client: () => RateLimitClient): void {
  const user = (): { entries: { key: string; value: string }[] } => ({
    entries: [{ key: 'user', value: randomUUID() }],
  });

  it('counts five calls of a 5-per-hour rule, then answers OVER_LIMIT', async () => {
    const descriptor = user();
    const answers: RateLimitDecision[] = [];
    for (let i = 0; i < 6; i++) {
      answers.push(await client().shouldRateLimit({ domain: 'node', descriptors: [descriptor] }));
    }
    expect(answers.map((a) => a.failure)).toEqual(Array(6).fill(undefined));
    expect(answers.map((a) => a.overallCode)).toEqual(['OK', 'OK', 'OK', 'OK', 'OK', 'OVER_LIMIT']);
    expect(answers.map((a) => a.allowed)).toEqual([true, true, true, true, true, false]);
    expect(answers.map((a) => a.statuses[0]!.remaining)).toEqual([4, 3, 2, 1, 0, 0]);
    for (const answer of answers) {
      expect(answer.statuses[0]!.limit).toEqual({ requestsPerUnit: 5, unit: 'hour', name: 'five' });
      expect(answer.statuses[0]!.resetMs).toBeGreaterThan(0);
      // A sliding window's wait may pass W by up to one sub-bucket (docs/semantics.md).
      expect(answer.statuses[0]!.resetMs).toBeLessThanOrEqual(2 * 3_600_000);
    }
    expect(answers[5]!.statuses[0]!.code).toBe('OVER_LIMIT');
  });

  it('answers OK without a limit for an unknown domain and for a key with no rule', async () => {
    const unknown = await client().shouldRateLimit({ domain: 'nowhere', descriptors: [user()] });
    expect(unknown).toMatchObject({ allowed: true, overallCode: 'OK' });
    expect(unknown.statuses[0]!.limit).toBeUndefined();
    const open = await client().shouldRateLimit({
      domain: 'node',
      descriptors: [{ entries: [{ key: 'open', value: 'x' }] }],
    });
    expect(open).toMatchObject({ allowed: true, overallCode: 'OK' });
    expect(open.statuses[0]!.limit).toBeUndefined();
  });

  it('sends hits_addend and a limit override', async () => {
    const three = await client().shouldRateLimit({
      domain: 'node',
      descriptors: [user()],
      hitsAddend: 3,
    });
    expect(three.statuses[0]!.remaining).toBe(2);
    const overridden = { ...user(), limit: { requestsPerUnit: 1, unit: 'hour' as const } };
    const first = await client().shouldRateLimit({ domain: 'node', descriptors: [overridden] });
    const second = await client().shouldRateLimit({ domain: 'node', descriptors: [overridden] });
    expect([first.overallCode, second.overallCode]).toEqual(['OK', 'OVER_LIMIT']);
    expect(first.statuses[0]!.limit).toMatchObject({ requestsPerUnit: 1, unit: 'hour' });
  });

  it('answers an invalid call (empty domain) with the failure policy and a reason', async () => {
    const answer = await client().shouldRateLimit({ domain: '', descriptors: [user()] });
    expect(answer.allowed).toBe(true);
    expect(answer.overallCode).toBeUndefined();
    expect(answer.failure?.reason).toMatch(/^ShouldRateLimit to 127\.0\.0\.1:\d+: .*failing open$/);
  });
}

describe('sluice/client against a real sluice', () => {
  let app: RunningApp;
  let client: RateLimitClient;
  beforeAll(async () => {
    app = await startApp([await ruleDir({ 'node.yaml': RULES })]);
    client = createRateLimitClient({ address: `127.0.0.1:${app.port}`, timeoutMs: TIMEOUT_MS });
  });
  afterAll(async () => {
    client?.close();
    await app?.stop();
  });
  sameChecks(() => client);
});

const missing = missingBinaries();
if (missing !== undefined) {
  console.warn(
    `[node-client] the reference part is ${inCi() ? 'MISSING under CI' : 'SKIPPED'}: ${missing} (bash scripts/reference.sh builds it)`,
  );
}

describe.skipIf(missing !== undefined && !inCi())('sluice/client against the reference', () => {
  const group = useProcessGroup();
  let client: RateLimitClient;
  beforeAll(async () => {
    if (missing !== undefined) throw new Error(missing);
    const redis = await startRedis(group);
    const reference = await startReference(group, redis.port, new Map([['node.yaml', RULES]]));
    group.onCleanup(() => reference.stop());
    expect(reference.refused.size).toBe(0);
    client = createRateLimitClient({ address: reference.address, timeoutMs: TIMEOUT_MS });
  });
  afterAll(() => client?.close());
  sameChecks(() => client);
});

describe('sluice/client failure policy', () => {
  it('fails open or closed, with the reason, when nothing listens', async () => {
    const address = `127.0.0.1:${await freePort()}`;
    const call = { domain: 'node', descriptors: [{ entries: [{ key: 'user', value: 'a' }] }] };
    for (const failureMode of ['open', 'closed'] as const) {
      const client = createRateLimitClient({ address, failureMode, timeoutMs: TIMEOUT_MS });
      const answer = await client.shouldRateLimit(call);
      client.close();
      expect(answer.allowed).toBe(failureMode === 'open');
      expect(answer.statuses).toEqual([]);
      expect(answer.failure?.code).toBe('UNAVAILABLE');
      expect(answer.failure?.reason).toContain(`ShouldRateLimit to ${address}: `);
      expect(answer.failure?.reason).toMatch(new RegExp(`failing ${failureMode}$`));
    }
  });

  it('answers DEADLINE_EXCEEDED by the policy when the server never answers', async () => {
    // A TCP listener that accepts and never speaks HTTP/2: the call can only time out.
    const silent = net.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    const client = createRateLimitClient({
      address: `127.0.0.1:${port}`,
      failureMode: 'closed',
      timeoutMs: 200,
    });
    try {
      const answer = await client.shouldRateLimit({
        domain: 'node',
        descriptors: [{ entries: [{ key: 'user', value: 'a' }] }],
      });
      expect(answer.allowed).toBe(false);
      expect(answer.failure?.code).toBe('DEADLINE_EXCEEDED');
    } finally {
      client.close();
      silent.close();
    }
  });

  it('refuses invalid options with the option named', () => {
    expect(() => createRateLimitClient({ address: '' })).toThrow(/address/);
    expect(() => createRateLimitClient({ address: 'x:1', timeoutMs: 0 })).toThrow(/timeoutMs/);
    expect(() => createRateLimitClient({ address: 'x:1', failureMode: 'maybe' as 'open' })).toThrow(
      /failureMode/,
    );
    expect(() => createRateLimitClient({ address: 'x:1', tls: { cert: 'c' } })).toThrow(
      /tls.cert and tls.key/,
    );
  });

  it('answers a call after close() by the policy', async () => {
    const client = createRateLimitClient({ address: '127.0.0.1:1', failureMode: 'closed' });
    client.close();
    const answer = await client.shouldRateLimit({ domain: 'node', descriptors: [] });
    expect(answer).toMatchObject({ allowed: false, failure: { code: 'CANCELLED' } });
  });
});

describe('sluice/client reconnects', () => {
  it('answers by the policy while the server is down, then reconnects to the new one', async () => {
    const dir = await ruleDir({ 'node.yaml': RULES });
    let app = await startApp([dir]);
    const port = app.port;
    const client = createRateLimitClient({
      address: `127.0.0.1:${port}`,
      timeoutMs: TIMEOUT_MS,
      reconnectInitialBackoffMs: 50,
      reconnectMaxBackoffMs: 200,
    });
    const call = {
      domain: 'node',
      descriptors: [{ entries: [{ key: 'user', value: randomUUID() }] }],
    };
    try {
      expect((await client.shouldRateLimit(call)).overallCode).toBe('OK');
      await app.stop();
      const down = await client.shouldRateLimit(call);
      expect(down.failure?.code).toBe('UNAVAILABLE');
      app = await startApp([dir], { GRPC_PORT: String(port) });
      await waitFor(
        'the client to reconnect',
        async () => (await client.shouldRateLimit(call)).overallCode === 'OK',
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      await client.ready(TIMEOUT_MS);
    } finally {
      client.close();
      await app.stop();
    }
  });
});

const openssl = requireOpenssl('node-client tls');

describe.skipIf(openssl.skip)('sluice/client over TLS and mTLS', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-node-tls-'));
  let app: RunningApp;
  let ca: string;
  let client: { cert: string; key: string };
  beforeAll(async () => {
    const authority = createCa(dir, 'main');
    const server = issueCert(authority, dir, 'server', {
      sans: ['IP:127.0.0.1', 'DNS:rls.sluice.test'],
      usage: 'serverAuth',
    });
    client = issueCert(authority, dir, 'app', {
      sans: ['DNS:app.sluice.test'],
      usage: 'clientAuth',
    });
    ca = authority.cert;
    app = await startApp([await ruleDir({ 'node.yaml': RULES })], {
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_SERVER_TLS_CERT: server.cert,
      GRPC_SERVER_TLS_KEY: server.key,
      GRPC_CLIENT_TLS_CACERT: ca,
    });
  });
  afterAll(() => app?.stop());

  const call = () => ({
    domain: 'node',
    descriptors: [{ entries: [{ key: 'user', value: randomUUID() }] }],
  });

  it('calls with a client certificate (mTLS), naming the server', async () => {
    const rls = createRateLimitClient({
      address: `127.0.0.1:${app.port}`,
      timeoutMs: TIMEOUT_MS,
      tls: {
        ca: pem(ca),
        cert: pem(client.cert),
        key: pem(client.key),
        serverName: 'rls.sluice.test',
      },
    });
    try {
      expect((await rls.shouldRateLimit(call())).overallCode).toBe('OK');
    } finally {
      rls.close();
    }
  });

  it('fails by the policy without a client certificate the server requires', async () => {
    const rls = createRateLimitClient({
      address: `127.0.0.1:${app.port}`,
      timeoutMs: TIMEOUT_MS,
      failureMode: 'closed',
      tls: { ca: pem(ca) },
    });
    try {
      const answer = await rls.shouldRateLimit(call());
      expect(answer.allowed).toBe(false);
      expect(answer.failure?.code).toBe('UNAVAILABLE');
    } finally {
      rls.close();
    }
  });
});
