/**
 * How the TLS files are followed (src/transport/tls.ts, docs/operations-tls.md "Certificate reload
 * without a restart"): with the poll turned off, file system events alone must apply each common
 * way of rotating a certificate; unchanged content applies nothing; a broken set is logged once.
 */
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { capturingLogger } from '../helpers/app.js';
import { createCa, issueCert, pem, requireOpenssl, type TestCert } from '../helpers/certs.js';
import { waitFor } from '../helpers/processes.js';
import {
  createServerTls,
  readTlsMaterial,
  type GrpcTlsSettings,
  type ServerTls,
} from '../../src/transport/tls.js';

const requirement = requireOpenssl('tls-reload');

describe.skipIf(requirement.skip)('TLS files followed by file system events alone', () => {
  let dir: string;
  let first: TestCert;
  let second: TestCert;
  let tls: ServerTls | undefined;

  beforeAll(() => {
    if (requirement.reason !== undefined) {
      throw new Error(`${requirement.reason} (required under CI)`);
    }
    dir = mkdtempSync(path.join(tmpdir(), 'sluice-tls-reload-'));
    const ca = createCa(dir, 'reload');
    first = issueCert(ca, dir, 'first', { sans: ['DNS:localhost'], usage: 'serverAuth' });
    second = issueCert(ca, dir, 'second', { sans: ['DNS:localhost'], usage: 'serverAuth' });
  });
  afterEach(() => tls?.close());
  afterAll(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** Follow `settings` with no poll; the serials handed to `onChange`, and the log. */
  async function follow(settings: GrpcTlsSettings): Promise<{
    serials: string[];
    log: ReturnType<typeof capturingLogger>;
  }> {
    const log = capturingLogger();
    tls = createServerTls({
      settings,
      initial: await readTlsMaterial(settings),
      logger: log.logger,
      pollIntervalMs: 0,
      debounceMs: 20,
    });
    const serials: string[] = [];
    tls.onChange((material) => serials.push(material.leaf.serialNumber));
    // The directory watches are set up asynchronously (symlinks are resolved first); a check of
    // the unchanged files applies nothing and resolves once its own pass has set them up.
    await tls.check();
    expect(serials).toEqual([]);
    return { serials, log };
  }

  function plainDir(cert: TestCert): GrpcTlsSettings {
    const at = mkdtempSync(path.join(dir, 'plain-'));
    copyFileSync(cert.cert, path.join(at, 'tls.crt'));
    copyFileSync(cert.key, path.join(at, 'tls.key'));
    return {
      certFile: path.join(at, 'tls.crt'),
      keyFile: path.join(at, 'tls.key'),
      clientCaFile: undefined,
      clientSan: undefined,
    };
  }

  const applied = (serials: string[], serial: string) => () => serials.at(-1) === serial;

  it('a Kubernetes secret volume: the ..data symlink swapped', async () => {
    const at = mkdtempSync(path.join(dir, 'secret-'));
    mkdirSync(path.join(at, '..v1'));
    copyFileSync(first.cert, path.join(at, '..v1', 'tls.crt'));
    copyFileSync(first.key, path.join(at, '..v1', 'tls.key'));
    symlinkSync('..v1', path.join(at, '..data'));
    symlinkSync('..data/tls.crt', path.join(at, 'tls.crt'));
    symlinkSync('..data/tls.key', path.join(at, 'tls.key'));
    const { serials } = await follow({
      certFile: path.join(at, 'tls.crt'),
      keyFile: path.join(at, 'tls.key'),
      clientCaFile: undefined,
      clientSan: undefined,
    });
    mkdirSync(path.join(at, '..v2'));
    copyFileSync(second.cert, path.join(at, '..v2', 'tls.crt'));
    copyFileSync(second.key, path.join(at, '..v2', 'tls.key'));
    symlinkSync('..v2', path.join(at, '..data_tmp'));
    renameSync(path.join(at, '..data_tmp'), path.join(at, '..data'));
    await waitFor('the swap applied', applied(serials, second.serial), { timeoutMs: 5_000 });
    expect(serials).toEqual([second.serial]);
  });

  it('new files renamed over the old ones (key first, then certificate)', async () => {
    const settings = plainDir(first);
    const { serials } = await follow(settings);
    copyFileSync(second.key, `${settings.keyFile}.new`);
    renameSync(`${settings.keyFile}.new`, settings.keyFile);
    copyFileSync(second.cert, `${settings.certFile}.new`);
    renameSync(`${settings.certFile}.new`, settings.certFile);
    await waitFor('the renames applied', applied(serials, second.serial), { timeoutMs: 5_000 });
  });

  it('the files rewritten in place', async () => {
    const settings = plainDir(first);
    const { serials } = await follow(settings);
    writeFileSync(settings.keyFile, pem(second.key));
    writeFileSync(settings.certFile, pem(second.cert));
    await waitFor('the rewrite applied', applied(serials, second.serial), { timeoutMs: 5_000 });
  });

  it('a configured symlink into another directory, repointed (certbot live/ -> archive/)', async () => {
    const archive = mkdtempSync(path.join(dir, 'archive-'));
    const live = mkdtempSync(path.join(dir, 'live-'));
    for (const [name, cert] of [
      ['1', first],
      ['2', second],
    ] as const) {
      copyFileSync(cert.cert, path.join(archive, `cert${name}.pem`));
      copyFileSync(cert.key, path.join(archive, `key${name}.pem`));
    }
    symlinkSync(path.join(archive, 'cert1.pem'), path.join(live, 'cert.pem'));
    symlinkSync(path.join(archive, 'key1.pem'), path.join(live, 'key.pem'));
    const { serials } = await follow({
      certFile: path.join(live, 'cert.pem'),
      keyFile: path.join(live, 'key.pem'),
      clientCaFile: undefined,
      clientSan: undefined,
    });
    for (const name of ['cert', 'key']) {
      symlinkSync(path.join(archive, `${name}2.pem`), path.join(live, `${name}.tmp`));
      renameSync(path.join(live, `${name}.tmp`), path.join(live, `${name}.pem`));
    }
    await waitFor('the repointed links applied', applied(serials, second.serial), {
      timeoutMs: 5_000,
    });
  });

  it('unchanged content (a touch, a rewrite of the same bytes) applies nothing', async () => {
    const settings = plainDir(first);
    const { serials, log } = await follow(settings);
    const later = new Date(Date.now() + 60_000);
    utimesSync(settings.certFile, later, later);
    writeFileSync(settings.keyFile, pem(first.key));
    await tls!.check();
    expect(serials).toEqual([]);
    expect(log.lines.map((line) => line['msg'])).toEqual([]);
  });

  it('a broken set is logged once however often it is read, and the fixed set is applied', async () => {
    const settings = plainDir(first);
    const { serials, log } = await follow(settings);
    writeFileSync(settings.certFile, pem(second.cert));
    await tls!.check();
    await tls!.check();
    await tls!.check();
    const failures = log.lines.filter((line) =>
      String(line['msg']).startsWith('TLS certificate reload failed'),
    );
    expect(failures).toHaveLength(1);
    expect(serials).toEqual([]);
    expect(tls!.current().leaf.serialNumber).toBe(first.serial);
    writeFileSync(settings.keyFile, pem(second.key));
    await tls!.check();
    expect(serials.at(-1)).toBe(second.serial);
    expect(tls!.current().leaf.serialNumber).toBe(second.serial);
  });
});
