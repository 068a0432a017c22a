/**
 * Invalid TLS settings and files stop the start with every problem listed (as other invalid
 * settings do), and `sluice query` documents and checks its TLS flags. The certificates come
 * from the real openssl CLI (test/helpers/certs.ts).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger, ruleDir, startApp } from '../helpers/app.js';
import {
  createCa,
  issueCert,
  requireOpenssl,
  type TestCa,
  type TestCert,
} from '../helpers/certs.js';
import { runCli } from '../helpers/cli.js';
import { ensureBuilt } from '../helpers/processes.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { loadSettings } from '../../src/settings.js';

const requirement = requireOpenssl('tls-settings');

const RULES =
  'domain: tls\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 1}\n';

beforeAll(() => ensureBuilt(), 240_000);

describe('TLS settings', () => {
  it('GRPC_SERVER_USE_TLS without files, or a SAN without a client CA, stops sluice serve listing every problem', async () => {
    const result = await runCli(['serve'], {
      GRPC_PORT: '0',
      PORT: '0',
      DEBUG_PORT: '0',
      GRPC_SERVER_USE_TLS: 'true',
      GRPC_CLIENT_TLS_SAN: 'envoy.example',
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe('sluice: invalid settings:');
    expect(lines.slice(1)).toEqual([
      '  - GRPC_SERVER_TLS_CERT must be set when GRPC_SERVER_USE_TLS=true (a PEM file with the server certificate chain)',
      "  - GRPC_SERVER_TLS_KEY must be set when GRPC_SERVER_USE_TLS=true (a PEM file with the server certificate's private key)",
      '  - GRPC_CLIENT_TLS_SAN="envoy.example" needs GRPC_CLIENT_TLS_CACERT: client certificates are asked for (and their SAN checked) only when a client CA is set',
    ]);
  });

  it('without TLS the certificate expiry gauge has no sample, so no expiry alert can fire', async () => {
    const metrics = await createMetrics({ nearLimitRatio: 0.8, processMetrics: false }).render();
    expect(metrics).toContain('# TYPE sluice_tls_certificate_expiry_timestamp_seconds gauge');
    expect(metrics).not.toMatch(/^sluice_tls_certificate_expiry_timestamp_seconds\{/m);
  });

  it('GRPC_SERVER_USE_TLS takes Go booleans, and the TLS variables are ignored while it is false, as in the reference', () => {
    const files = {
      GRPC_SERVER_TLS_CERT: '/nonexistent/cert.pem',
      GRPC_SERVER_TLS_KEY: '/nonexistent/key.pem',
      GRPC_CLIENT_TLS_SAN: 'envoy.example',
    };
    expect(loadSettings(files).grpcTls).toBeUndefined();
    expect(loadSettings({ ...files, GRPC_SERVER_USE_TLS: 'f' }).grpcTls).toBeUndefined();
    expect(
      loadSettings({ ...files, GRPC_SERVER_USE_TLS: 'T', GRPC_CLIENT_TLS_CACERT: '/ca.pem' })
        .grpcTls,
    ).toEqual({
      certFile: '/nonexistent/cert.pem',
      keyFile: '/nonexistent/key.pem',
      clientCaFile: '/ca.pem',
      clientSan: 'envoy.example',
    });
    expect(() => loadSettings({ GRPC_SERVER_USE_TLS: 'yes' })).toThrow(
      /GRPC_SERVER_USE_TLS="yes": expected true or false/,
    );
  });
});

describe.skipIf(requirement.skip)('TLS files', () => {
  let dir: string;
  let ca: TestCa;
  let server: TestCert;
  let other: TestCert;

  beforeAll(() => {
    if (requirement.reason !== undefined) {
      throw new Error(`${requirement.reason} (required under CI)`);
    }
    dir = mkdtempSync(path.join(tmpdir(), 'sluice-tls-files-'));
    ca = createCa(dir, 'main');
    server = issueCert(ca, dir, 'server', { sans: ['IP:127.0.0.1'], usage: 'serverAuth' });
    other = issueCert(ca, dir, 'other', { sans: ['IP:127.0.0.1'], usage: 'serverAuth' });
    writeFileSync(path.join(dir, 'garbage.pem'), 'not PEM at all\n');
  });
  afterAll(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** The start-up error of an app with these TLS files. */
  async function startError(env: Record<string, string>): Promise<string> {
    const rules = await ruleDir({ 'tls.yaml': RULES });
    try {
      const running = await startApp([rules], { GRPC_SERVER_USE_TLS: 'true', ...env });
      await running.stop();
    } catch (error) {
      return (error as Error).message;
    }
    throw new Error('the app started; expected the TLS files to stop it');
  }

  it('unreadable and invalid files stop the start, each problem named with its variable', async () => {
    const missing = path.join(dir, 'missing.pem');
    const garbage = path.join(dir, 'garbage.pem');
    const message = await startError({
      GRPC_SERVER_TLS_CERT: missing,
      GRPC_SERVER_TLS_KEY: garbage,
      GRPC_CLIENT_TLS_CACERT: garbage,
    });
    const lines = message.split('\n');
    expect(lines[0]).toBe('invalid settings:');
    expect(lines).toHaveLength(4);
    expect(lines[1]).toMatch(
      new RegExp(`^  - GRPC_SERVER_TLS_CERT="${missing}": cannot read the file: ENOENT`),
    );
    expect(lines[2]).toMatch(
      new RegExp(`^  - GRPC_SERVER_TLS_KEY="${garbage}": not a usable private key`),
    );
    expect(lines[3]).toBe(
      `  - GRPC_CLIENT_TLS_CACERT="${garbage}": no PEM certificate in the file (expected -----BEGIN CERTIFICATE-----)`,
    );
  });

  it('a key that is not the certificate’s stops the start', async () => {
    const message = await startError({
      GRPC_SERVER_TLS_CERT: server.cert,
      GRPC_SERVER_TLS_KEY: other.key,
    });
    expect(message).toBe(
      `invalid settings:\n  - GRPC_SERVER_TLS_KEY="${other.key}": the key does not belong to the certificate in GRPC_SERVER_TLS_CERT="${server.cert}" (serial ${server.serial})`,
    );
  });

  it('a certificate and key that belong together start, and the start-up line names the TLS mode', async () => {
    const log = capturingLogger();
    const running = await startApp(
      [await ruleDir({ 'tls.yaml': RULES })],
      {
        GRPC_SERVER_USE_TLS: 'true',
        GRPC_SERVER_TLS_CERT: server.cert,
        GRPC_SERVER_TLS_KEY: server.key,
        GRPC_CLIENT_TLS_CACERT: ca.cert,
      },
      { logger: log.logger },
    );
    await running.stop();
    const startup = log.lines.find((line) => line['msg'] === 'sluice listening');
    expect(startup?.['grpcTls']).toBe('mtls');
  });
});

describe('sluice query TLS flags', () => {
  it('--help lists them', async () => {
    const result = await runCli(['query', '--help']);
    expect(result.code).toBe(0);
    for (const flag of [
      '--tls',
      '--cacert FILE',
      '--cert FILE',
      '--key FILE',
      '--server-name NAME',
    ]) {
      expect(result.stdout).toMatch(new RegExp(`^  ${flag}\\s`, 'm'));
    }
  });

  it('--cert without --key, and an unreadable --cacert, are explained', async () => {
    const base = ['query', '--domain', 'd', '--descriptor', 'k=v', '--addr', '127.0.0.1:1'];
    const half = await runCli([...base, '--cert', '/tmp/c.pem']);
    expect(half.code).toBe(1);
    expect(half.stderr).toBe(
      "sluice query: give --cert and --key together (a client certificate and its private key)\nRun 'sluice query --help' for usage.\n",
    );
    const unreadable = await runCli([...base, '--cacert', '/nonexistent/ca.pem']);
    expect(unreadable.code).toBe(1);
    expect(unreadable.stderr).toMatch(
      /^sluice: --cacert "\/nonexistent\/ca.pem": cannot read the file: ENOENT/,
    );
  });
});
