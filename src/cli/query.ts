/**
 * `sluice query`: a first-five-minutes client. Sends one ShouldRateLimit and prints the answer.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { SluiceError } from '../errors.js';
import { MAX_UINT32 } from '../model.js';
import { rlsClientConstructor } from '../transport/grpc/proto.js';

/** What to send. */
export interface QueryOptions {
  /** `host:port` of a sluice (or any RLS) server. */
  readonly addr: string;
  /** The rate limit domain. */
  readonly domain: string;
  /** Descriptors, each a list of `[key, value]` pairs. */
  readonly descriptors: readonly (readonly [string, string])[][];
  /**
   * Request-level hits_addend (1 or more); undefined sends none, which counts 1 hit per
   * descriptor.
   */
  readonly hits: number | undefined;
  /**
   * Look without counting: every descriptor carries its own `hits_addend: 0` (which, unlike the
   * request-level field, means zero), so the answer shows the counters as they are.
   */
  readonly check: boolean;
  /** Deadline, ms. */
  readonly timeoutMs: number;
  /** Connect with TLS (`--tls` and its files); `undefined`: plaintext. */
  readonly tls?: QueryTlsOptions | undefined;
}

/** How `sluice query` connects to a TLS server (docs/operations-tls.md). */
export interface QueryTlsOptions {
  /** `--cacert`: PEM CA bundle that verifies the server; `undefined`: the system's CAs. */
  readonly caFile?: string | undefined;
  /** `--cert`: PEM client certificate (mTLS); given together with `keyFile`. */
  readonly certFile?: string | undefined;
  /** `--key`: PEM private key of `certFile`. */
  readonly keyFile?: string | undefined;
  /**
   * `--server-name`: the name the server certificate must carry (also sent as SNI and
   * `:authority`); `undefined`: the host of the address.
   */
  readonly serverName?: string | undefined;
}

/**
 * Channel credentials and options for `tls`: plaintext when `undefined`. Throws SluiceError
 * INVALID_SETTINGS naming the flag of a file that cannot be read.
 */
function queryChannel(tls: QueryTlsOptions | undefined): {
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
} {
  if (tls === undefined) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const problems: string[] = [];
  const read = (flag: string, file: string | undefined): Buffer | null => {
    if (file === undefined) return null;
    try {
      return readFileSync(file);
    } catch (error) {
      problems.push(
        `${flag} ${JSON.stringify(file)}: cannot read the file: ${(error as Error).message}`,
      );
      return null;
    }
  };
  const ca = read('--cacert', tls.caFile);
  const cert = read('--cert', tls.certFile);
  const key = read('--key', tls.keyFile);
  if (problems.length > 0) throw new SluiceError('INVALID_SETTINGS', problems.join('\n'));
  const options: grpc.ChannelOptions =
    tls.serverName === undefined
      ? {}
      : {
          'grpc.ssl_target_name_override': tls.serverName,
          'grpc.default_authority': tls.serverName,
        };
  return { credentials: grpc.credentials.createSsl(ca, key, cert), options };
}

/**
 * Parse `k=v,k2=v2` into entries. A backslash escapes `,`, `=` or `\` inside keys and values.
 * Throws SluiceError INVALID_SETTINGS with a hint on bad input.
 */
export function parseDescriptor(text: string): [string, string][] {
  const entries: [string, string][] = [];
  let key: string | undefined;
  let part = '';
  const finish = (): void => {
    if (key === undefined) {
      throw new SluiceError(
        'INVALID_SETTINGS',
        `--descriptor ${JSON.stringify(text)}: each entry must be key=value (e.g. --descriptor path=/login,remote_address=10.0.0.1)`,
      );
    }
    entries.push([key, part]);
    key = undefined;
    part = '';
  };
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (ch === '\\' && i + 1 < text.length) {
      part += text[++i];
    } else if (ch === '=' && key === undefined) {
      key = part;
      part = '';
    } else if (ch === ',') {
      finish();
    } else {
      part += ch;
    }
  }
  finish();
  return entries;
}

/** A decoded response, as proto-loader hands it over. */
export interface WireResponse {
  overall_code?: string;
  statuses?: WireStatus[];
}

interface WireStatus {
  code?: string;
  current_limit?: { requests_per_unit?: number; unit?: string; name?: string };
  limit_remaining?: number;
  duration_until_reset?: { seconds?: number; nanos?: number };
}

/** `limit_remaining` of an unlimited rule. */
const UNLIMITED_REMAINING = MAX_UINT32;

/**
 * The exit status of `sluice query` for an answer: 0 when the overall code is OK, 2 when it is
 * OVER_LIMIT (Envoy would reject the request), 1 for anything else (1 is also every failure).
 */
export function exitCodeFor(response: WireResponse): number {
  if (response.overall_code === 'OK') return 0;
  return response.overall_code === 'OVER_LIMIT' ? 2 : 1;
}

/**
 * Render a decoded response as readable lines: the overall code, then one line per descriptor
 * with its code, rule, remaining room and reset. It also says what the codes alone do not:
 * a status OVER_LIMIT under an overall OK would block but for `SHADOW_MODE`; a request asking for
 * more hits than the rule allows in a whole window can never be admitted (its reset is one full
 * window, docs/semantics.md, so no reset is promised); a check counted nothing.
 */
export function formatResponse(
  response: WireResponse,
  options: Pick<QueryOptions, 'descriptors' | 'hits' | 'check'>,
): string {
  const overall = response.overall_code ?? 'UNKNOWN';
  const statuses = response.statuses ?? [];
  const shadowed = overall === 'OK' && statuses.some((s) => s.code === 'OVER_LIMIT');
  const notes: string[] = [];
  if (options.check) notes.push('check only: nothing was counted');
  if (shadowed) notes.push('would block: SHADOW_MODE answers OK overall');
  const lines = [`overall: ${overall}${notes.length > 0 ? ` (${notes.join('; ')})` : ''}`];
  const hits = options.check ? 0 : Math.max(options.hits ?? 1, 1);
  statuses.forEach((status, i) => {
    const entries = (options.descriptors[i] ?? []).map(([k, v]) => `${k}=${v}`).join(',');
    const code = status.code ?? 'UNKNOWN';
    const parts = [`  [${i}] ${entries}: ${code}`];
    if (code === 'OVER_LIMIT' && overall === 'OK') parts.push('(would block; shadow mode)');
    const limit = status.current_limit;
    const perUnit = limit?.requests_per_unit ?? 0;
    if (limit) {
      const name = limit.name ? ` (${limit.name})` : '';
      parts.push(`limit ${perUnit}/${(limit.unit ?? 'UNKNOWN').toLowerCase()}${name}`);
      parts.push(`remaining ${status.limit_remaining ?? 0}`);
    } else {
      parts.push(status.limit_remaining === UNLIMITED_REMAINING ? 'unlimited' : 'no limit applies');
    }
    if (limit && code === 'OVER_LIMIT' && hits > perUnit) {
      parts.push(`never admitted: ${hits} hits exceed the limit of ${perUnit} per window`);
    } else {
      const reset = status.duration_until_reset;
      if (reset) {
        const ms = (reset.seconds ?? 0) * 1000 + Math.round((reset.nanos ?? 0) / 1e6);
        parts.push(`reset in ${(ms / 1000).toFixed(3)}s`);
      }
    }
    lines.push(parts.join('  '));
  });
  return lines.join('\n');
}

/** Send the query; resolves to the decoded response. */
export function sendQuery(options: QueryOptions): Promise<WireResponse> {
  const Client = rlsClientConstructor();
  const channel = queryChannel(options.tls);
  // grpc-js sends an IP address of --addr as the TLS server name, for which Node prints a
  // deprecation warning (DEP0123) that says nothing to the user of this one-shot command.
  if (options.tls !== undefined) process.noDeprecation = true;
  const client = new Client(options.addr, channel.credentials, channel.options);
  const request = {
    domain: options.domain,
    descriptors: options.descriptors.map((entries) => ({
      entries: entries.map(([key, value]) => ({ key, value })),
      // A present per-descriptor hits_addend of 0 counts nothing (docs/semantics.md §2).
      ...(options.check ? { hits_addend: { value: 0 } } : {}),
    })),
    hits_addend: options.hits ?? 0,
  };
  return new Promise((resolve, reject) => {
    const call = client.ShouldRateLimit as (
      request: unknown,
      options: grpc.CallOptions,
      callback: (err: grpc.ServiceError | null, response?: WireResponse) => void,
    ) => void;
    call.call(client, request, { deadline: Date.now() + options.timeoutMs }, (err, response) => {
      client.close();
      if (err) void explainFailure(err, options).then(reject);
      else resolve(response ?? {});
    });
  });
}

/**
 * A failed call as the user should read it: grpc-js's empty `Resolution note: ` tail dropped,
 * and, when the connection failed, whether TLS on one side only is why.
 */
async function explainFailure(
  err: grpc.ServiceError,
  options: QueryOptions,
): Promise<grpc.ServiceError> {
  let message = err.message.replace(/\s*\.?\s*Resolution note:\s*$/, '');
  if (err.code === grpc.status.UNAVAILABLE) {
    if (options.tls !== undefined && /wrong version number|packet length too long/.test(message)) {
      message +=
        `\n${options.addr} did not answer the TLS handshake: it looks like a plaintext port;` +
        ` drop --tls, --cacert, --cert and --key`;
    } else if (options.tls === undefined && (await speaksTls(options.addr))) {
      message +=
        `\n${options.addr} serves TLS (GRPC_SERVER_USE_TLS): add --cacert FILE with the CA` +
        ` that signed its certificate, or --tls to trust the system's CAs (and --cert FILE --key` +
        ` FILE when it asks for a client certificate)`;
    }
  }
  return Object.assign(new Error(message), {
    code: err.code,
    details: err.details,
    metadata: err.metadata,
  });
}

/** Whether `addr` (`host:port`) completes a TLS handshake, certificate unchecked; 1 s at most. */
function speaksTls(addr: string): Promise<boolean> {
  const match = /^\[?([^\]]*?)\]?:(\d+)$/.exec(addr);
  if (match === null) return Promise.resolve(false);
  return new Promise((resolve) => {
    const socket = tls.connect({
      host: match[1],
      port: Number(match[2]),
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
      timeout: 1_000,
    });
    const done = (result: boolean): void => {
      socket.destroy();
      resolve(result);
    };
    socket.once('secureConnect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}
