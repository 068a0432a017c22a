/**
 * Throwaway certificates for the TLS tests, made with the real `openssl` CLI: a CA, server and
 * client certificates with chosen SANs and serial numbers. Without `openssl` a suite is skipped
 * with a visible reason locally and fails under CI (see `inCi`; `.ci/run` installs it).
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { requireBinaries, type Requirement } from './require-binaries.js';

/** `openssl` on the PATH, by {@link requireBinaries}. */
export function requireOpenssl(suite: string): Requirement {
  return requireBinaries(suite, [{ name: 'openssl', install: 'Debian: apt-get install openssl' }]);
}

/** Run openssl; throws with its output when it fails. */
function openssl(args: string[], cwd: string): void {
  const result = spawnSync('openssl', args, { cwd, encoding: 'utf8', timeout: 30_000 });
  if (result.status !== 0) {
    throw new Error(
      `openssl ${args.join(' ')} failed (status ${String(result.status)}):\n${result.stdout}\n${result.stderr}`,
    );
  }
}

/** A certificate authority that signs the test certificates. */
export interface TestCa {
  /** PEM file of the CA certificate. */
  readonly cert: string;
  /** PEM file of its key. */
  readonly key: string;
  /** The directory the files are in. */
  readonly dir: string;
}

/** An issued certificate and its key. */
export interface TestCert {
  /** PEM file of the certificate. */
  readonly cert: string;
  /** PEM file of its key (unencrypted). */
  readonly key: string;
  /** The serial number, upper-case hex without leading zeros, as Node's X509Certificate prints it. */
  readonly serial: string;
}

/** A new EC P-256 key in `file`. */
function newKey(dir: string, file: string): void {
  openssl(
    ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', file],
    dir,
  );
}

/** A self-signed CA named `name` in `dir` (files `<name>-ca.pem`, `<name>-ca.key`). */
export function createCa(dir: string, name: string): TestCa {
  const key = `${name}-ca.key`;
  const cert = `${name}-ca.pem`;
  const ext = `${name}-ca.ext`;
  newKey(dir, key);
  writeFileSync(
    path.join(dir, ext),
    [
      '[v3_ca]',
      'basicConstraints = critical, CA:TRUE',
      'keyUsage = critical, keyCertSign, cRLSign',
      'subjectKeyIdentifier = hash',
      '',
    ].join('\n'),
  );
  openssl(
    [
      'req',
      '-x509',
      '-new',
      '-key',
      key,
      '-subj',
      `/CN=sluice test CA ${name}`,
      '-days',
      '2',
      '-config',
      ext,
      '-extensions',
      'v3_ca',
      '-out',
      cert,
    ],
    dir,
  );
  return { cert: path.join(dir, cert), key: path.join(dir, key), dir };
}

/**
 * A certificate for `name` signed by `ca`, in `dir` (`<name>.pem`, `<name>.key`), with the given
 * SANs (`DNS:x`, `IP:127.0.0.1`) and extended key usage; a random serial unless one is given
 * (hex, no leading zeros).
 */
export function issueCert(
  ca: TestCa,
  dir: string,
  name: string,
  options: { sans: readonly string[]; usage: 'serverAuth' | 'clientAuth'; serial?: string },
): TestCert {
  // The top bit clear keeps the serial positive; the first nibble non-zero keeps its hex length.
  const serial = options.serial ?? `1${randomBytes(8).toString('hex').toUpperCase().slice(1)}`;
  const key = `${name}.key`;
  const csr = `${name}.csr`;
  const cert = `${name}.pem`;
  const ext = `${name}.ext`;
  newKey(dir, key);
  openssl(['req', '-new', '-key', key, '-subj', `/CN=${name}`, '-out', csr], dir);
  writeFileSync(
    path.join(dir, ext),
    [
      'basicConstraints = CA:FALSE',
      'keyUsage = critical, digitalSignature',
      `extendedKeyUsage = ${options.usage}`,
      ...(options.sans.length > 0 ? [`subjectAltName = ${options.sans.join(', ')}`] : []),
      '',
    ].join('\n'),
  );
  openssl(
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      `0x${serial}`,
      '-days',
      '2',
      '-extfile',
      ext,
      '-out',
      cert,
    ],
    dir,
  );
  return { cert: path.join(dir, cert), key: path.join(dir, key), serial };
}

/** The bytes of a file (for grpc-js credentials). */
export function pem(file: string): Buffer {
  return readFileSync(file);
}
