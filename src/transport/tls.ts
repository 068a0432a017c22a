/**
 * TLS for the gRPC port, shared by both servers (docs/operations-tls.md): read and check the
 * `GRPC_SERVER_TLS_CERT` / `GRPC_SERVER_TLS_KEY` / `GRPC_CLIENT_TLS_CACERT` files, build the
 * secure context options, watch the files and hand every valid change to the servers (which
 * apply it to new connections), check the client certificate's SAN (`GRPC_CLIENT_TLS_SAN`).
 *
 * A change that does not make a valid certificate, key and CA set is logged with every problem
 * and the previous material keeps serving; it is never applied half-way.
 */
import { createHash, createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { watch, type FSWatcher } from 'node:fs';
import { readFile, realpath } from 'node:fs/promises';
import { isIP } from 'node:net';
import { dirname, resolve } from 'node:path';
import { createSecureContext, type SecureContextOptions } from 'node:tls';
import { SluiceError } from '../errors.js';
import type { Logger } from '../logging/logger.js';
import type { TlsMetricsSink } from '../metrics/metrics.js';

/** TLS on the gRPC port, with the reference's variable names (docs/operations-tls.md). */
export interface GrpcTlsSettings {
  /** `GRPC_SERVER_TLS_CERT`: PEM file with the server certificate chain (leaf first). */
  readonly certFile: string;
  /** `GRPC_SERVER_TLS_KEY`: PEM file with the server's private key. */
  readonly keyFile: string;
  /**
   * `GRPC_CLIENT_TLS_CACERT`: PEM file of the CA(s) client certificates must chain to. Set, it
   * turns on mTLS: every client must present a certificate it verifies. `undefined`: no client
   * certificate is asked for.
   */
  readonly clientCaFile: string | undefined;
  /**
   * `GRPC_CLIENT_TLS_SAN`: a DNS name (or IP address) the client certificate must carry as a
   * subject alternative name; `undefined`: any certificate the CA verifies is accepted.
   */
  readonly clientSan: string | undefined;
}

/** What identifies a certificate in logs and tests. */
export interface CertificateSummary {
  /** The serial number, upper-case hex as OpenSSL prints it. */
  readonly serialNumber: string;
  /** SHA-256 fingerprint, colon-separated upper-case hex. */
  readonly fingerprint256: string;
  /** The subject, one `key=value` per line as Node prints it. */
  readonly subject: string;
  /** The subject alternative names as Node prints them (`DNS:a, IP Address:127.0.0.1`); '' for none. */
  readonly subjectAltName: string;
  /** End of validity, as in the certificate (e.g. `Nov 23 17:00:00 2027 GMT`). */
  readonly validTo: string;
}

/** One consistent, checked set of server TLS files, as served to new connections. */
export interface TlsMaterial {
  /** `GRPC_SERVER_TLS_CERT`'s bytes: the server certificate chain, PEM. */
  readonly cert: Buffer;
  /** `GRPC_SERVER_TLS_KEY`'s bytes: the private key, PEM. */
  readonly key: Buffer;
  /** `GRPC_CLIENT_TLS_CACERT`'s bytes (PEM); `undefined` when mTLS is off. */
  readonly ca: Buffer | undefined;
  /** The leaf (first) certificate of `cert`. */
  readonly leaf: CertificateSummary;
  /** Worth a warning but served anyway (an expired or not yet valid certificate). */
  readonly warnings: readonly string[];
}

/** The raw bytes of the files, before checking. */
interface TlsFileBytes {
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  readonly ca: Buffer | undefined;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;

/** `NAME="file"`, how a problem names the file it is about. */
function label(name: string, file: string): string {
  return `${name}=${JSON.stringify(file)}`;
}

/**
 * Read TLS files named by their setting (`[NAME, file]`; an unset file reads as `undefined`).
 * Every unreadable file becomes one problem naming the setting and the file, in the order given,
 * so a start reports them all at once. The one reader of TLS files: the gRPC port's and the xDS
 * client's.
 */
export async function readTlsFileSet(
  files: readonly (readonly [name: string, file: string | undefined])[],
): Promise<{ bytes: (Buffer | undefined)[]; problems: string[] }> {
  const read = async (
    name: string,
    file: string | undefined,
  ): Promise<Buffer | string | undefined> => {
    if (file === undefined) return undefined;
    try {
      return await readFile(file);
    } catch (error) {
      return `${label(name, file)}: cannot read the file: ${(error as Error).message}`;
    }
  };
  const results = await Promise.all(files.map(([name, file]) => read(name, file)));
  return {
    bytes: results.map((result) => (typeof result === 'string' ? undefined : result)),
    problems: results.filter((result): result is string => typeof result === 'string'),
  };
}

/** Read the port's files; unreadable ones become problems (and `undefined` bytes). */
async function readTlsFiles(
  settings: GrpcTlsSettings,
): Promise<{ bytes: TlsFileBytes; problems: string[] }> {
  const {
    bytes: [cert, key, ca],
    problems,
  } = await readTlsFileSet([
    ['GRPC_SERVER_TLS_CERT', settings.certFile],
    ['GRPC_SERVER_TLS_KEY', settings.keyFile],
    ['GRPC_CLIENT_TLS_CACERT', settings.clientCaFile],
  ]);
  return { bytes: { cert, key, ca }, problems };
}

/** Every PEM certificate in `bytes`, parsed; problems name the variable and the file. */
function parseCertificates(
  name: string,
  file: string,
  bytes: Buffer,
  problems: string[],
): X509Certificate[] {
  const blocks = bytes.toString('latin1').match(PEM_CERTIFICATE) ?? [];
  if (blocks.length === 0) {
    problems.push(
      `${label(name, file)}: no PEM certificate in the file (expected -----BEGIN CERTIFICATE-----)`,
    );
    return [];
  }
  const certificates: X509Certificate[] = [];
  blocks.forEach((block, i) => {
    try {
      certificates.push(new X509Certificate(block));
    } catch (error) {
      problems.push(
        `${label(name, file)}: certificate ${i + 1} of ${blocks.length} cannot be parsed: ${(error as Error).message}`,
      );
    }
  });
  return certificates;
}

/** A summary of `certificate` for logs. */
function summarize(certificate: X509Certificate): CertificateSummary {
  return {
    serialNumber: certificate.serialNumber,
    fingerprint256: certificate.fingerprint256,
    subject: certificate.subject,
    subjectAltName: certificate.subjectAltName ?? '',
    validTo: certificate.validTo,
  };
}

/** Check `bytes` as a whole; the material, or every problem found. */
function checkMaterial(
  settings: GrpcTlsSettings,
  bytes: TlsFileBytes,
  now: Date,
): { material: TlsMaterial; problems?: undefined } | { material?: undefined; problems: string[] } {
  const problems: string[] = [];
  let leaf: X509Certificate | undefined;
  if (bytes.cert !== undefined) {
    leaf = parseCertificates('GRPC_SERVER_TLS_CERT', settings.certFile, bytes.cert, problems)[0];
  }
  let key: KeyObject | undefined;
  if (bytes.key !== undefined) {
    try {
      key = createPrivateKey(bytes.key);
    } catch (error) {
      problems.push(
        `${label('GRPC_SERVER_TLS_KEY', settings.keyFile)}: not a usable private key (an unencrypted PEM key is expected): ${(error as Error).message}`,
      );
    }
  }
  if (leaf !== undefined && key !== undefined && !leaf.checkPrivateKey(key)) {
    problems.push(
      `${label('GRPC_SERVER_TLS_KEY', settings.keyFile)}: the key does not belong to the certificate in ${label('GRPC_SERVER_TLS_CERT', settings.certFile)} (serial ${leaf.serialNumber})`,
    );
  }
  if (bytes.ca !== undefined && settings.clientCaFile !== undefined) {
    parseCertificates('GRPC_CLIENT_TLS_CACERT', settings.clientCaFile, bytes.ca, problems);
  }
  if (problems.length > 0 || bytes.cert === undefined || bytes.key === undefined) {
    return { problems };
  }
  if (settings.clientCaFile !== undefined && bytes.ca === undefined) return { problems };
  // What OpenSSL itself refuses (a key type or size it does not allow, ...).
  const material = {
    cert: bytes.cert,
    key: bytes.key,
    ca: bytes.ca,
  };
  try {
    createSecureContext(contextOptionsOf(material));
  } catch (error) {
    return {
      problems: [
        `${label('GRPC_SERVER_TLS_CERT', settings.certFile)} with ${label('GRPC_SERVER_TLS_KEY', settings.keyFile)}: OpenSSL refuses them: ${(error as Error).message}`,
      ],
    };
  }
  const warnings: string[] = [];
  if (leaf !== undefined) {
    if (new Date(leaf.validTo).getTime() < now.getTime()) {
      warnings.push(
        `the server certificate (serial ${leaf.serialNumber}) expired on ${leaf.validTo}; clients that verify it will refuse the connection`,
      );
    } else if (new Date(leaf.validFrom).getTime() > now.getTime()) {
      warnings.push(
        `the server certificate (serial ${leaf.serialNumber}) is not valid before ${leaf.validFrom}`,
      );
    }
  }
  return { material: { ...material, leaf: summarize(leaf!), warnings } };
}

/**
 * Read and check the TLS files of `settings`: every file readable, the certificate file holding
 * PEM certificates, the key an unencrypted private key that belongs to the first certificate,
 * the client CA file (when set) holding PEM certificates, and OpenSSL accepting the set. Throws
 * SluiceError INVALID_SETTINGS listing every problem, one per line, as invalid settings do.
 */
export async function readTlsMaterial(
  settings: GrpcTlsSettings,
  now: Date = new Date(),
): Promise<TlsMaterial> {
  const { bytes, problems } = await readTlsFiles(settings);
  const checked = checkMaterial(settings, bytes, now);
  const all = [...problems, ...(checked.problems ?? [])];
  if (all.length > 0 || checked.material === undefined) {
    throw new SluiceError(
      'INVALID_SETTINGS',
      `invalid settings:\n${all.map((p) => `  - ${p}`).join('\n')}`,
    );
  }
  return checked.material;
}

/** The options `tls.createSecureContext` / `server.setSecureContext` take for `material`. */
function contextOptionsOf(
  material: Pick<TlsMaterial, 'cert' | 'key' | 'ca'>,
): SecureContextOptions {
  // With a client CA, only it is trusted for client certificates (never the system's roots).
  return material.ca === undefined
    ? { cert: material.cert, key: material.key }
    : { cert: material.cert, key: material.key, ca: material.ca };
}

/**
 * Whether a client certificate carries `san` as a subject alternative name, as the reference
 * checks `GRPC_CLIENT_TLS_SAN` (Go's hostname verification): an IP address must be one of the
 * certificate's IP SANs; a name must match one of its DNS SANs, case-insensitively, where
 * `*.example.com` covers one leftmost label. The subject's common name is never used. Unlike Go,
 * OpenSSL (which matches here) refuses a wildcard with a single label after it (`*.internal`).
 */
export function certificateHasSan(certificate: X509Certificate, san: string): boolean {
  if (isIP(san) !== 0) return certificate.checkIP(san) !== undefined;
  // A fully qualified `name.` is the same name, as in Go.
  const name = san.endsWith('.') ? san.slice(0, -1) : san;
  if (name === '') return false;
  return (
    certificate.checkHost(name, {
      subject: 'never',
      wildcards: true,
      partialWildcards: false,
      multiLabelWildcards: false,
      singleLabelSubdomains: false,
    }) !== undefined
  );
}

/** Options of {@link createServerTls}. */
export interface ServerTlsOptions {
  /** The TLS settings. */
  readonly settings: GrpcTlsSettings;
  /** The material read at start-up ({@link readTlsMaterial}). */
  readonly initial: TlsMaterial;
  /** Module logger (reloads at info, refused reloads at error, refused clients at warn). */
  readonly logger: Logger;
  /**
   * Safety net against missed file system events: the files are re-read this often, in ms
   * (default 5000; 0 turns the poll off and leaves the file system events alone).
   */
  readonly pollIntervalMs?: number;
  /** Quiet time after a file system event before the files are read, in ms (default 100). */
  readonly debounceMs?: number;
  /** Where reloads and the serving certificate's expiry are counted; `undefined`: nowhere. */
  readonly metrics?: TlsMetricsSink | undefined;
}

/** The gRPC port's TLS: the current material, its changes, and the client SAN check. */
export interface ServerTls {
  /** The settings it serves. */
  readonly settings: GrpcTlsSettings;
  /** Whether clients must present a certificate the client CA verifies (mTLS). */
  readonly requireClientCertificate: boolean;
  /** The material serving new connections now. */
  current(): TlsMaterial;
  /** {@link contextOptionsOf} the current material. */
  contextOptions(): SecureContextOptions;
  /**
   * Call `listener` with each new material once it is checked (never with a broken one);
   * returns the function that stops it. A listener that throws is logged; the others still run.
   */
  onChange(listener: (material: TlsMaterial) => void): () => void;
  /**
   * Whether a client may use the port: true when no SAN is required (`GRPC_CLIENT_TLS_SAN`
   * unset), else when `certificate` is present and carries the SAN ({@link certificateHasSan}).
   */
  clientAllowed(certificate: X509Certificate | undefined): boolean;
  /** Re-read the files now and apply them if they changed and are valid. Never rejects. */
  check(): Promise<void>;
  /** Stop watching. Idempotent. */
  close(): void;
}

/** A digest of the files' bytes: a change of any of them changes it. */
function digestOf(bytes: TlsFileBytes): string {
  const hash = createHash('sha256');
  for (const part of [bytes.cert, bytes.key, bytes.ca]) {
    hash.update(part === undefined ? '-' : `${part.length}:`);
    if (part !== undefined) hash.update(part);
  }
  return hash.digest('hex');
}

/**
 * Watch the directories `files` live in now (symlinks resolved), and only those: `watchers`, by
 * directory, is brought up to date in place, and every event of a watched directory calls
 * `onEvent`. Nothing is watched anew once `closed()`.
 */
async function rewatchDirectories(
  files: readonly string[],
  watchers: Map<string, FSWatcher>,
  onEvent: () => void,
  logger: Logger,
  closed: () => boolean,
): Promise<void> {
  const dirs = new Set<string>();
  for (const file of files) {
    dirs.add(dirname(resolve(file)));
    try {
      dirs.add(dirname(await realpath(file)));
    } catch {
      // A missing file: its own directory is watched, so its return is seen.
    }
  }
  if (closed()) return;
  for (const [dir, watcher] of watchers) {
    if (!dirs.has(dir)) {
      watcher.close();
      watchers.delete(dir);
    }
  }
  for (const dir of dirs) {
    if (watchers.has(dir)) continue;
    try {
      const watcher = watch(dir, { persistent: false }, onEvent);
      // A removed directory ends its watch; the poll and the next rewatch cover it.
      watcher.on('error', () => {
        watcher.close();
        if (watchers.get(dir) === watcher) watchers.delete(dir);
      });
      watchers.set(dir, watcher);
    } catch (error) {
      logger.debug({ err: error, dir }, 'cannot watch a TLS file directory; the poll covers it');
    }
  }
}

/**
 * Serve `options.initial` and follow the files: node:fs `watch` on the directory of each file
 * and of the file each symlink finally points to (never the file inode, which editors,
 * `mv`-style rotations and Kubernetes' `..data` symlink swaps replace), debounced, plus a poll.
 * Each check reads the files whole and compares their bytes with the serving set; a change that
 * passes {@link readTlsMaterial}'s checks is handed to the `onChange` listeners; one that does not
 * is logged once (with every problem) and the previous material keeps serving.
 */
export function createServerTls(options: ServerTlsOptions): ServerTls {
  const { settings, logger } = options;
  const pollIntervalMs = options.pollIntervalMs ?? 5_000;
  const debounceMs = options.debounceMs ?? 100;
  const files = [settings.certFile, settings.keyFile, settings.clientCaFile].filter(
    (file): file is string => file !== undefined,
  );
  const listeners = new Set<(material: TlsMaterial) => void>();
  const watchers = new Map<string, FSWatcher>();
  let current = options.initial;
  let currentDigest = digestOf(options.initial);
  /** The digest of the last set that failed its checks, so it is logged once, not every poll. */
  let failedDigest: string | undefined;
  let closed = false;
  let running: Promise<void> | undefined;
  let again = false;
  let debounce: NodeJS.Timeout | undefined;

  const metrics = options.metrics;
  const reportServing = (material: TlsMaterial): void =>
    metrics?.serving(material.leaf.serialNumber, new Date(material.leaf.validTo).getTime());
  reportServing(current);
  for (const warning of current.warnings) logger.warn({ files }, warning);

  const schedule = (): void => {
    if (closed) return;
    clearTimeout(debounce);
    debounce = setTimeout(() => void check(), debounceMs);
    debounce.unref();
  };

  const rewatch = (): Promise<void> =>
    rewatchDirectories(files, watchers, schedule, logger, () => closed);

  const checkOnce = async (): Promise<void> => {
    const { bytes, problems } = await readTlsFiles(settings);
    const digest = digestOf(bytes);
    await rewatch();
    if (closed || digest === currentDigest) {
      failedDigest = undefined;
      return;
    }
    if (digest === failedDigest) return;
    const checked = checkMaterial(settings, bytes, new Date());
    if (problems.length > 0 || checked.material === undefined) {
      failedDigest = digest;
      metrics?.reload('refused');
      logger.error(
        { problems: [...problems, ...(checked.problems ?? [])], serving: current.leaf },
        'TLS certificate reload failed; the previous certificate keeps serving new connections',
      );
      return;
    }
    const previous = current.leaf;
    current = checked.material;
    currentDigest = digest;
    failedDigest = undefined;
    metrics?.reload('applied');
    reportServing(current);
    for (const listener of listeners) {
      try {
        listener(current);
      } catch (error) {
        logger.error({ err: error }, 'applying the reloaded TLS certificate failed');
      }
    }
    logger.info(
      { certificate: current.leaf, previous: previous.serialNumber, files },
      'TLS certificate reloaded; new connections use it',
    );
    for (const warning of current.warnings) logger.warn({ files }, warning);
  };

  const check = (): Promise<void> => {
    if (closed) return Promise.resolve();
    if (running !== undefined) {
      // A change during a check is read by one more check right after it.
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        try {
          await checkOnce();
        } catch (error) {
          logger.error({ err: error }, 'TLS certificate check failed');
        }
      } while (again && !closed);
      running = undefined;
    })();
    return running;
  };

  void rewatch();
  const poll = pollIntervalMs > 0 ? setInterval(() => void check(), pollIntervalMs) : undefined;
  poll?.unref();

  return {
    settings,
    requireClientCertificate: settings.clientCaFile !== undefined,
    current: () => current,
    contextOptions: () => contextOptionsOf(current),
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    clientAllowed(certificate) {
      const san = settings.clientSan;
      if (san === undefined) return true;
      return certificate !== undefined && certificateHasSan(certificate, san);
    },
    check,
    close() {
      closed = true;
      clearInterval(poll);
      clearTimeout(debounce);
      for (const watcher of watchers.values()) watcher.close();
      watchers.clear();
      listeners.clear();
    },
  };
}
