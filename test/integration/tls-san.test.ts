/**
 * How `GRPC_CLIENT_TLS_SAN` is matched against a client certificate (docs/operations-tls.md,
 * "Matching the SAN"), on real certificates made by openssl.
 */
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCa, issueCert, pem, requireOpenssl } from '../helpers/certs.js';
import { certificateHasSan } from '../../src/transport/tls.js';

const requirement = requireOpenssl('tls-san');

describe.skipIf(requirement.skip)('GRPC_CLIENT_TLS_SAN matching', () => {
  let dir: string;
  let certificate: (sans: string[]) => X509Certificate;

  beforeAll(() => {
    if (requirement.reason !== undefined) {
      throw new Error(`${requirement.reason} (required under CI)`);
    }
    dir = mkdtempSync(path.join(tmpdir(), 'sluice-tls-san-'));
    const ca = createCa(dir, 'san');
    let n = 0;
    certificate = (sans) =>
      new X509Certificate(
        pem(issueCert(ca, dir, `client-${++n}`, { sans, usage: 'clientAuth' }).cert),
      );
  });
  afterAll(() => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('a name matches a DNS SAN exactly, case-insensitively, with or without a trailing dot', () => {
    const cert = certificate(['DNS:Envoy.Mesh.Internal', 'DNS:other.test']);
    expect(certificateHasSan(cert, 'envoy.mesh.internal')).toBe(true);
    expect(certificateHasSan(cert, 'ENVOY.mesh.internal.')).toBe(true);
    expect(certificateHasSan(cert, 'other.test')).toBe(true);
    expect(certificateHasSan(cert, 'mesh.internal')).toBe(false);
    expect(certificateHasSan(cert, 'envoy.mesh.internal.evil')).toBe(false);
    expect(certificateHasSan(cert, '.')).toBe(false);
  });

  it('a wildcard SAN covers one leftmost label, and needs two labels after it', () => {
    const cert = certificate(['DNS:*.mesh.internal']);
    expect(certificateHasSan(cert, 'envoy.mesh.internal')).toBe(true);
    expect(certificateHasSan(cert, 'a.envoy.mesh.internal')).toBe(false);
    expect(certificateHasSan(cert, 'mesh.internal')).toBe(false);
    expect(certificateHasSan(certificate(['DNS:*.internal']), 'envoy.internal')).toBe(false);
  });

  it('the subject common name is never used', () => {
    // issueCert sets CN=<name>; this certificate's CN is client-N and it has an unrelated SAN.
    const cert = certificate(['DNS:unrelated.test']);
    const cn = /CN=(\S+)/.exec(cert.subject)?.[1] ?? '';
    expect(cn).toMatch(/^client-\d+$/);
    expect(certificateHasSan(cert, cn)).toBe(false);
  });

  it('an IP address matches IP SANs only, IPv4 and IPv6', () => {
    const cert = certificate(['IP:10.0.0.5', 'IP:fd00::5', 'DNS:10.0.0.6']);
    expect(certificateHasSan(cert, '10.0.0.5')).toBe(true);
    expect(certificateHasSan(cert, 'fd00:0:0:0:0:0:0:5')).toBe(true);
    expect(certificateHasSan(cert, '10.0.0.6')).toBe(false);
    expect(certificateHasSan(cert, '10.0.0.7')).toBe(false);
  });

  it('a certificate without SANs matches nothing', () => {
    const cert = certificate([]);
    expect(certificateHasSan(cert, 'envoy.mesh.internal')).toBe(false);
  });
});
