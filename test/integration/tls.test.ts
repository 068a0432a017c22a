/**
 * TLS and mTLS on the gRPC port with the reference's settings (GRPC_SERVER_USE_TLS,
 * GRPC_SERVER_TLS_CERT/KEY, GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN), against the server
 * GRPC_SERVER names (vitest.config.ts runs this file once per server). Certificates are made by
 * the real openssl CLI; clients are real grpc-js clients and raw TLS sockets.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, ruleDir, startApp, type RunningApp } from '../helpers/app.js';
import {
  createCa,
  issueCert,
  pem,
  requireOpenssl,
  type TestCa,
  type TestCert,
} from '../helpers/certs.js';
import { runCli } from '../helpers/cli.js';
import {
  createEnvoyRlsClient,
  rlsRequest,
  type EnvoyRlsClient,
} from '../helpers/envoy-rls-client.js';
import { ensureBuilt, waitFor } from '../helpers/processes.js';

const requirement = requireOpenssl('tls');
const SERVER = process.env['GRPC_SERVER'] === 'grpc-js' ? 'grpc-js' : 'lean';

const RULES = `
domain: tls
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
`;

/** The SAN the accepted client certificate carries and GRPC_CLIENT_TLS_SAN requires. */
const CLIENT_SAN = 'envoy.sluice.test';

interface Pki {
  readonly dir: string;
  readonly ca: TestCa;
  readonly server: TestCert;
  readonly rotated: TestCert;
  readonly client: TestCert;
  readonly wrongSan: TestCert;
  readonly untrusted: TestCert;
}

/** One CA for the servers and the clients, and a second, untrusted one. */
function makePki(): Pki {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-tls-'));
  const ca = createCa(dir, 'main');
  const other = createCa(dir, 'other');
  const serverSans = ['IP:127.0.0.1', 'DNS:localhost'];
  return {
    dir,
    ca,
    server: issueCert(ca, dir, 'server-1', { sans: serverSans, usage: 'serverAuth' }),
    rotated: issueCert(ca, dir, 'server-2', { sans: serverSans, usage: 'serverAuth' }),
    client: issueCert(ca, dir, 'envoy', { sans: [`DNS:${CLIENT_SAN}`], usage: 'clientAuth' }),
    wrongSan: issueCert(ca, dir, 'intruder', {
      sans: ['DNS:intruder.sluice.test'],
      usage: 'clientAuth',
    }),
    untrusted: issueCert(other, dir, 'stranger', {
      sans: [`DNS:${CLIENT_SAN}`],
      usage: 'clientAuth',
    }),
  };
}

/**
 * A Kubernetes-style secret volume: `tls.crt`, `tls.key`, `ca.crt` are symlinks into `..data`,
 * itself a symlink to a versioned directory; {@link swapSecret} replaces `..data` atomically.
 */
function makeSecret(pki: Pki, cert: TestCert): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'sluice-secret-'));
  writeVersion(dir, '..v1', { 'tls.crt': cert.cert, 'tls.key': cert.key, 'ca.crt': pki.ca.cert });
  symlinkSync('..v1', path.join(dir, '..data'));
  for (const name of ['tls.crt', 'tls.key', 'ca.crt']) {
    symlinkSync(path.join('..data', name), path.join(dir, name));
  }
  return dir;
}

function writeVersion(dir: string, version: string, files: Record<string, string>): void {
  mkdirSync(path.join(dir, version));
  for (const [name, source] of Object.entries(files)) {
    copyFileSync(source, path.join(dir, version, name));
  }
}

/** Point `..data` at a new version holding `files` (name -> contents), as the kubelet does. */
function swapSecret(dir: string, version: string, files: Record<string, string | Buffer>): void {
  mkdirSync(path.join(dir, version));
  for (const [name, contents] of Object.entries(files)) {
    writeFileSync(path.join(dir, version, name), contents);
  }
  symlinkSync(version, path.join(dir, '..data_tmp'));
  renameSync(path.join(dir, '..data_tmp'), path.join(dir, '..data'));
}

/** The environment that turns on mTLS with the files of `secret`. */
function mtlsEnv(secret: string): Record<string, string> {
  return {
    GRPC_SERVER_USE_TLS: 'true',
    GRPC_SERVER_TLS_CERT: path.join(secret, 'tls.crt'),
    GRPC_SERVER_TLS_KEY: path.join(secret, 'tls.key'),
    GRPC_CLIENT_TLS_CACERT: path.join(secret, 'ca.crt'),
    GRPC_CLIENT_TLS_SAN: CLIENT_SAN,
  };
}

/** A client of `port` over TLS trusting `pki.ca`, presenting `cert` (none when `undefined`). */
function tlsClient(pki: Pki, port: number, cert: TestCert | undefined): EnvoyRlsClient {
  const credentials = grpc.credentials.createSsl(
    pem(pki.ca.cert),
    cert === undefined ? null : pem(cert.key),
    cert === undefined ? null : pem(cert.cert),
  );
  return createEnvoyRlsClient(`127.0.0.1:${port}`, credentials);
}

/** Call once with a fresh client (a new connection) and close it. */
async function callOnce(client: EnvoyRlsClient, user: string): Promise<string> {
  try {
    const response = await client.shouldRateLimit(rlsRequest('tls', [{ user }]), 3_000);
    return response.overall_code;
  } finally {
    client.close();
  }
}

/** The gRPC status code of a call expected to fail. */
async function failedCode(client: EnvoyRlsClient, user: string): Promise<number> {
  try {
    const code = await callOnce(client, user);
    throw new Error(`the call was served (${code}); expected it to be refused`);
  } catch (error) {
    const code = (error as grpc.ServiceError).code;
    if (code === undefined) throw error;
    return code;
  }
}

/**
 * The serial number of the certificate a NEW TLS connection to `port` is served (ALPN h2, the
 * client certificate `cert` presented).
 */
function servedSerial(pki: Pki, port: number, cert: TestCert): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({
      host: '127.0.0.1',
      port,
      ca: pem(pki.ca.cert),
      cert: pem(cert.cert),
      key: pem(cert.key),
      ALPNProtocols: ['h2'],
    });
    socket.setTimeout(3_000, () => socket.destroy(new Error('TLS handshake timed out')));
    socket.once('secureConnect', () => {
      const serial = socket.getPeerX509Certificate()?.serialNumber ?? '';
      socket.destroy();
      resolve(serial);
    });
    socket.once('error', reject);
  });
}

describe.skipIf(requirement.skip)(`mTLS on the gRPC port (GRPC_SERVER=${SERVER})`, () => {
  let pki: Pki;
  let secret: string;
  let running: RunningApp;
  let log: ReturnType<typeof capturingLogger>;

  beforeAll(async () => {
    if (requirement.reason !== undefined)
      throw new Error(`${requirement.reason} (required under CI)`);
    pki = makePki();
    secret = makeSecret(pki, pki.server);
    log = capturingLogger();
    running = await startApp([await ruleDir({ 'tls.yaml': RULES })], mtlsEnv(secret), {
      logger: log.logger,
    });
    // `sluice query` runs from dist/.
    ensureBuilt();
  }, 240_000);
  afterAll(async () => {
    await running?.stop();
    if (secret !== undefined) rmSync(secret, { recursive: true, force: true });
    if (pki !== undefined) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('serves a client whose certificate the CA verifies and carries the SAN', async () => {
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'valid')).toBe('OK');
    // The limit is 1 a minute: the second call is counted against the first.
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'valid')).toBe('OVER_LIMIT');
  });

  it('refuses a client without a certificate, before the limiter counts anything', async () => {
    expect(await failedCode(tlsClient(pki, running.port, undefined), 'no-cert')).toBe(
      grpc.status.UNAVAILABLE,
    );
    // Refused calls counted nothing: the first served call for the same user is still OK.
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'no-cert')).toBe('OK');
  });

  it('refuses a plaintext client', async () => {
    const client = createEnvoyRlsClient(`127.0.0.1:${running.port}`);
    expect(await failedCode(client, 'plaintext')).toBe(grpc.status.UNAVAILABLE);
  });

  it('refuses a client certificate from another CA', async () => {
    expect(await failedCode(tlsClient(pki, running.port, pki.untrusted), 'stranger')).toBe(
      grpc.status.UNAVAILABLE,
    );
  });

  it('refuses a client certificate lacking the SAN GRPC_CLIENT_TLS_SAN requires', async () => {
    const code = await failedCode(tlsClient(pki, running.port, pki.wrongSan), 'intruder');
    // The lean server closes the connection (GOAWAY INADEQUATE_SECURITY) as the reference fails
    // the handshake; grpc-js has no connection hook and answers each call UNAUTHENTICATED.
    expect(code).toBe(SERVER === 'lean' ? grpc.status.UNAVAILABLE : grpc.status.UNAUTHENTICATED);
    // Refused again: logged once per certificate, at warn, naming the SAN it lacks.
    await failedCode(tlsClient(pki, running.port, pki.wrongSan), 'intruder');
    const warnings = log.lines.filter((line) =>
      String(line['msg']).startsWith('client certificate lacks the SAN'),
    );
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.['level']).toBe(40);
    expect(warnings[0]?.['requiredSan']).toBe(CLIENT_SAN);
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'intruder')).toBe('OK');
  });

  it('sluice query talks to the TLS server with --cacert, --cert and --key', async () => {
    const base = ['query', '--domain', 'tls', '--addr', `127.0.0.1:${running.port}`];
    const mtls = ['--cacert', pki.ca.cert, '--cert', pki.client.cert, '--key', pki.client.key];
    const served = await runCli([...base, ...mtls, '--descriptor', 'user=cli']);
    expect(served.stderr).toBe('');
    expect(served.stdout).toMatch(/^overall: OK\n/);
    expect(served.code).toBe(0);

    // --server-name: the certificate carries DNS:localhost, not other.test.
    const named = await runCli([
      ...base,
      ...mtls,
      '--server-name',
      'localhost',
      '--descriptor',
      'user=cli-2',
    ]);
    expect(named.stdout).toMatch(/^overall: OK\n/);
    const misnamed = await runCli([
      ...base,
      ...mtls,
      '--server-name',
      'other.test',
      '--descriptor',
      'user=cli-3',
    ]);
    expect(misnamed.code).toBe(1);
    expect(misnamed.stderr).toMatch(/request failed/);

    // Plaintext, and TLS without a client certificate, are refused.
    const plain = await runCli([...base, '--descriptor', 'user=cli-4']);
    expect(plain.code).toBe(1);
    // ... and the refusal says why: the port serves TLS.
    expect(plain.stderr).toMatch(
      new RegExp(
        `\\n127\\.0\\.0\\.1:${running.port} serves TLS \\(GRPC_SERVER_USE_TLS\\): add --cacert FILE`,
      ),
    );
    expect(plain.stderr).not.toMatch(/Resolution note/);
    const noCert = await runCli([...base, '--cacert', pki.ca.cert, '--descriptor', 'user=cli-4']);
    expect(noCert.code).toBe(1);
    expect(noCert.stderr).toMatch(/request failed/);
  });
});

describe.skipIf(requirement.skip)(`mTLS without a required SAN (GRPC_SERVER=${SERVER})`, () => {
  let pki: Pki;
  let secret: string;
  let running: RunningApp;

  beforeAll(async () => {
    if (requirement.reason !== undefined) {
      throw new Error(`${requirement.reason} (required under CI)`);
    }
    pki = makePki();
    secret = makeSecret(pki, pki.server);
    const env = mtlsEnv(secret);
    delete env['GRPC_CLIENT_TLS_SAN'];
    running = await startApp([await ruleDir({ 'tls.yaml': RULES })], env);
  });
  afterAll(async () => {
    await running?.stop();
    if (secret !== undefined) rmSync(secret, { recursive: true, force: true });
    if (pki !== undefined) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('refuses no certificate and a certificate from another CA; serves any the CA verifies', async () => {
    expect(await failedCode(tlsClient(pki, running.port, undefined), 'no-cert')).toBe(
      grpc.status.UNAVAILABLE,
    );
    expect(await failedCode(tlsClient(pki, running.port, pki.untrusted), 'stranger')).toBe(
      grpc.status.UNAVAILABLE,
    );
    expect(await callOnce(tlsClient(pki, running.port, pki.wrongSan), 'other-san')).toBe('OK');
  });
});

describe.skipIf(requirement.skip)(`TLS without a client CA (GRPC_SERVER=${SERVER})`, () => {
  let pki: Pki;
  let secret: string;
  let running: RunningApp;

  beforeAll(async () => {
    if (requirement.reason !== undefined)
      throw new Error(`${requirement.reason} (required under CI)`);
    pki = makePki();
    secret = makeSecret(pki, pki.server);
    const env = mtlsEnv(secret);
    delete env['GRPC_CLIENT_TLS_CACERT'];
    delete env['GRPC_CLIENT_TLS_SAN'];
    running = await startApp([await ruleDir({ 'tls.yaml': RULES })], env);
  });
  afterAll(async () => {
    await running?.stop();
    if (secret !== undefined) rmSync(secret, { recursive: true, force: true });
    if (pki !== undefined) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('serves clients with and without a certificate, and refuses plaintext', async () => {
    expect(await callOnce(tlsClient(pki, running.port, undefined), 'anonymous')).toBe('OK');
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'with-cert')).toBe('OK');
    const plain = createEnvoyRlsClient(`127.0.0.1:${running.port}`);
    expect(await failedCode(plain, 'plaintext')).toBe(grpc.status.UNAVAILABLE);
  });
});

describe.skipIf(requirement.skip)(`certificate reload (GRPC_SERVER=${SERVER})`, () => {
  let pki: Pki;
  let secret: string;
  let running: RunningApp;
  let log: ReturnType<typeof capturingLogger>;

  beforeAll(() => {
    if (requirement.reason !== undefined)
      throw new Error(`${requirement.reason} (required under CI)`);
    pki = makePki();
  });
  afterEach(async () => {
    await running?.stop();
    if (secret !== undefined) rmSync(secret, { recursive: true, force: true });
  });
  afterAll(() => {
    if (pki !== undefined) rmSync(pki.dir, { recursive: true, force: true });
  });

  async function start(): Promise<void> {
    secret = makeSecret(pki, pki.server);
    log = capturingLogger();
    running = await startApp([await ruleDir({ 'tls.yaml': RULES })], mtlsEnv(secret), {
      logger: log.logger,
    });
    expect(await servedSerial(pki, running.port, pki.client)).toBe(pki.server.serial);
  }

  const messages = (): string[] => log.lines.map((line) => String(line['msg']));

  /** The serials of the certificate expiry gauge's samples, each checked to be in the future. */
  function expirySerials(metrics: string): string[] {
    const samples = [
      ...metrics.matchAll(
        /^sluice_tls_certificate_expiry_timestamp_seconds\{serial="([0-9A-F]+)"\} (\d+)$/gm,
      ),
    ];
    for (const [, , seconds] of samples) {
      // issueCert makes certificates valid for 2 days.
      expect(Number(seconds) * 1000).toBeGreaterThan(Date.now());
      expect(Number(seconds) * 1000).toBeLessThanOrEqual(Date.now() + 3 * 86_400_000);
    }
    return samples.map((sample) => sample[1]!);
  }

  it('picks up a rotated server certificate for new connections without a restart', async () => {
    await start();
    // A client connected before the rotation keeps working after it.
    const before = tlsClient(pki, running.port, pki.client);
    expect(
      (await before.shouldRateLimit(rlsRequest('tls', [{ user: 'early' }]))).overall_code,
    ).toBe('OK');

    swapSecret(secret, '..v2', {
      'tls.crt': pem(pki.rotated.cert),
      'tls.key': pem(pki.rotated.key),
      'ca.crt': pem(pki.ca.cert),
    });
    await waitFor(
      'a new connection is served the rotated certificate',
      async () => (await servedSerial(pki, running.port, pki.client)) === pki.rotated.serial,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    expect(messages()).toContain('TLS certificate reloaded; new connections use it');
    const metrics = await running.app.metrics.render();
    expect(metrics).toContain('sluice_tls_reloads_total{result="applied"} 1\n');
    expect(metrics).toContain('sluice_tls_reloads_total{result="refused"} 0\n');
    expect(expirySerials(metrics)).toEqual([pki.rotated.serial]);
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'after-rotation')).toBe('OK');
    const stillOpen = await before.shouldRateLimit(rlsRequest('tls', [{ user: 'early' }]));
    before.close();
    expect(stillOpen.overall_code).toBe('OVER_LIMIT');
  });

  it('keeps serving the old certificate when the replacement is broken, then takes a fixed one', async () => {
    await start();
    // A certificate with a key that is not its own: nothing of it may be applied.
    swapSecret(secret, '..v2', {
      'tls.crt': pem(pki.rotated.cert),
      'tls.key': pem(pki.server.key),
      'ca.crt': pem(pki.ca.cert),
    });
    await waitFor(
      'the refused reload is logged',
      () =>
        messages().includes(
          'TLS certificate reload failed; the previous certificate keeps serving new connections',
        ),
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    const failure = log.lines.find((line) =>
      String(line['msg']).startsWith('TLS certificate reload failed'),
    );
    expect(failure?.['level']).toBe(50);
    expect(JSON.stringify(failure?.['problems'])).toContain(
      'the key does not belong to the certificate',
    );
    expect(await servedSerial(pki, running.port, pki.client)).toBe(pki.server.serial);
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'broken-1')).toBe('OK');

    // Not PEM at all: refused too, still the old certificate.
    swapSecret(secret, '..v3', {
      'tls.crt': 'not a certificate\n',
      'tls.key': pem(pki.rotated.key),
      'ca.crt': pem(pki.ca.cert),
    });
    await waitFor(
      'the second refused reload is logged',
      () =>
        log.lines.filter((line) => String(line['msg']).startsWith('TLS certificate reload failed'))
          .length >= 2,
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    expect(await servedSerial(pki, running.port, pki.client)).toBe(pki.server.serial);
    expect(await callOnce(tlsClient(pki, running.port, pki.client), 'broken-2')).toBe('OK');

    const metrics = await running.app.metrics.render();
    expect(metrics).toContain('sluice_tls_reloads_total{result="applied"} 0\n');
    expect(metrics).toContain('sluice_tls_reloads_total{result="refused"} 2\n');
    expect(expirySerials(metrics)).toEqual([pki.server.serial]);

    // The fixed set is picked up.
    swapSecret(secret, '..v4', {
      'tls.crt': pem(pki.rotated.cert),
      'tls.key': pem(pki.rotated.key),
      'ca.crt': pem(pki.ca.cert),
    });
    await waitFor(
      'the fixed certificate is served',
      async () => (await servedSerial(pki, running.port, pki.client)) === pki.rotated.serial,
      { timeoutMs: 15_000, intervalMs: 100 },
    );
  });
});
