/**
 * Redis addresses as the reference's `REDIS_URL` writes them (docs/configuration.md). No client
 * code here, so settings validation can use it without loading ioredis.
 */
import { SluiceError } from '../../errors.js';

/** A host and port parsed from `host:port` or a URL. */
export interface Address {
  /** Host name or IP literal (IPv6 without brackets). */
  readonly host: string;
  /** TCP port (6379 when a URL gives none). */
  readonly port: number;
  /** User from a URL's `user:password@`; `undefined` when absent. */
  readonly username?: string;
  /** Password from a URL's `user:password@`; `undefined` when absent. */
  readonly password?: string;
  /** Database number from a URL's path; `undefined` when absent. */
  readonly db?: number;
  /** The URL scheme was `rediss://`. */
  readonly tls: boolean;
}

/** Parse `host:port`, `[v6]:port`, `redis://[user:pass@]host[:port][/db]` or `rediss://...`. */
export function parseAddress(text: string): Address {
  const trimmed = text.trim();
  if (/^rediss?:\/\//i.test(trimmed)) {
    const url = new URL(trimmed);
    const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : undefined;
    return {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port === '' ? 6379 : Number(url.port),
      username: url.username === '' ? undefined : decodeURIComponent(url.username),
      password: url.password === '' ? undefined : decodeURIComponent(url.password),
      db: db !== undefined && Number.isInteger(db) ? db : undefined,
      tls: url.protocol.toLowerCase() === 'rediss:',
    };
  }
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(trimmed);
  if (match === null) {
    throw new SluiceError(
      'INVALID_SETTINGS',
      'expected host:port or a redis:// URL for every address',
    );
  }
  return { host: match[1] ?? match[2]!, port: Number(match[3]), tls: false };
}
