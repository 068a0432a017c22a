/**
 * `sluice query`: a first-five-minutes client. Sends one ShouldRateLimit and prints the answer.
 */
import * as grpc from '@grpc/grpc-js';
import { SluiceError } from '../errors.js';
import { rlsClientConstructor } from '../transport/grpc/proto.js';

/** What to send. */
export interface QueryOptions {
  /** `host:port` of a sluice (or any RLS) server. */
  readonly addr: string;
  /** The rate limit domain. */
  readonly domain: string;
  /** Descriptors, each a list of `[key, value]` pairs. */
  readonly descriptors: readonly (readonly [string, string])[][];
  /** Request-level hits_addend; undefined sends none. */
  readonly hits: number | undefined;
  /** Deadline, ms. */
  readonly timeoutMs: number;
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

/** Render a decoded response as readable lines. */
export function formatResponse(
  response: WireResponse,
  options: Pick<QueryOptions, 'descriptors'>,
): string {
  const lines = [`overall: ${response.overall_code ?? 'UNKNOWN'}`];
  (response.statuses ?? []).forEach((status, i) => {
    const entries = (options.descriptors[i] ?? []).map(([k, v]) => `${k}=${v}`).join(',');
    const parts = [`  [${i}] ${entries}: ${status.code ?? 'UNKNOWN'}`];
    const limit = status.current_limit;
    if (limit) {
      const name = limit.name ? ` (${limit.name})` : '';
      parts.push(
        `limit ${limit.requests_per_unit ?? 0}/${(limit.unit ?? 'UNKNOWN').toLowerCase()}${name}`,
      );
      parts.push(`remaining ${status.limit_remaining ?? 0}`);
    } else {
      parts.push(status.limit_remaining === 4294967295 ? 'unlimited' : 'no limit applies');
    }
    const reset = status.duration_until_reset;
    if (reset) {
      const ms = (reset.seconds ?? 0) * 1000 + Math.round((reset.nanos ?? 0) / 1e6);
      parts.push(`reset in ${(ms / 1000).toFixed(3)}s`);
    }
    lines.push(parts.join('  '));
  });
  return lines.join('\n');
}

/** Send the query; resolves to the decoded response. */
export function sendQuery(options: QueryOptions): Promise<WireResponse> {
  const Client = rlsClientConstructor();
  const client = new Client(options.addr, grpc.credentials.createInsecure());
  const request = {
    domain: options.domain,
    descriptors: options.descriptors.map((entries) => ({
      entries: entries.map(([key, value]) => ({ key, value })),
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
      if (err) reject(err);
      else resolve(response ?? {});
    });
  });
}
