/**
 * From an HTTP request to descriptor entries, as Envoy's rate limit actions build them
 * (docs/node.md, "Descriptors"): the client address (`remote_address`), a header's value
 * (`request_headers`), a fixed value (`generic_key`) and the route. A descriptor one of whose
 * entries cannot be had (the header is absent) is not sent, as Envoy skips it.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { CallDescriptor, CallEntry } from '../decision.js';

/**
 * What the helpers read from a request; node:http's `IncomingMessage`, Express's `Request` and
 * Fastify's `FastifyRequest` all have it.
 */
export interface RequestLike {
  /** Request headers, lower-case names. */
  readonly headers: IncomingHttpHeaders;
  /** The request target (path and query). */
  readonly url?: string | undefined;
  /** The client address as the framework sees it (Express and Fastify honour `trustProxy`). */
  readonly ip?: string | undefined;
  /** The connection (node:http); its peer address when the framework gives no `ip`. */
  readonly socket?: { readonly remoteAddress?: string | undefined } | undefined;
  /** Express: the matched route (set inside a route's own middleware). */
  readonly route?: { readonly path?: unknown } | undefined;
  /** Express: the path the router was mounted on. */
  readonly baseUrl?: string | undefined;
  /** Fastify: the matched route's pattern. */
  readonly routeOptions?: { readonly url?: string | undefined } | undefined;
}

/** One entry of a descriptor from a request; `undefined` drops the whole descriptor. */
export type EntrySource<Req> = (req: Req) => CallEntry | undefined;

/**
 * The descriptors of a request: a function, or a list of descriptors each given as a list of
 * {@link EntrySource}s (`[[remoteAddress()], [genericKey('api'), header('x-api-key', 'key')]]`).
 */
export type DescriptorsOption<Req> =
  | ((req: Req) => readonly CallDescriptor[] | Promise<readonly CallDescriptor[]>)
  | readonly (readonly EntrySource<Req>[])[];

/** `::ffff:10.0.0.1` -> `10.0.0.1`: Envoy's `remote_address` is the plain IPv4 form. */
function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/**
 * The client address, as Envoy's `remote_address` action (key `remote_address`): the framework's
 * `ip` when it has one (Express and Fastify apply their `trust proxy` setting to it), else the
 * socket's peer address.
 */
export function remoteAddress<Req extends RequestLike>(key = 'remote_address'): EntrySource<Req> {
  return (req) => {
    const address = req.ip ?? req.socket?.remoteAddress;
    return address === undefined || address === ''
      ? undefined
      : { key, value: plainAddress(address) };
  };
}

/**
 * A header's value under `key`, as Envoy's `request_headers` action (`header_name`,
 * `descriptor_key`); several values are joined with `,`. An absent header drops the descriptor.
 */
export function header<Req extends RequestLike>(name: string, key: string): EntrySource<Req> {
  const lower = name.toLowerCase();
  return (req) => {
    const value = req.headers[lower];
    if (value === undefined) return undefined;
    return { key, value: Array.isArray(value) ? value.join(',') : value };
  };
}

/** A fixed entry, as Envoy's `generic_key` action (`descriptor_value`, key `generic_key`). */
export function genericKey<Req>(value: string, key = 'generic_key'): EntrySource<Req> {
  const entry: CallEntry = { key, value };
  return () => entry;
}

/**
 * The route under `key` (default `route`): Fastify's route pattern (`/users/:id`), Express's
 * mount path and route pattern when used on a route, else the request path without its query.
 */
export function route<Req extends RequestLike>(key = 'route'): EntrySource<Req> {
  return (req) => {
    const pattern = req.routeOptions?.url;
    if (pattern !== undefined) return { key, value: pattern };
    const expressPath = req.route?.path;
    if (typeof expressPath === 'string') {
      return { key, value: `${req.baseUrl ?? ''}${expressPath}` };
    }
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    return { key, value: query < 0 ? url : url.slice(0, query) };
  };
}

/**
 * The descriptors `option` gives for `req` (entry lists with a missing entry are dropped); a
 * promise only when the option's function returns one.
 */
export function descriptorsFor<Req>(
  option: DescriptorsOption<Req>,
  req: Req,
): readonly CallDescriptor[] | Promise<readonly CallDescriptor[]> {
  if (typeof option === 'function') return option(req);
  const out: CallDescriptor[] = [];
  outer: for (const sources of option) {
    const entries: CallEntry[] = [];
    for (const source of sources) {
      const entry = source(req);
      if (entry === undefined) continue outer;
      entries.push(entry);
    }
    if (entries.length > 0) out.push({ entries });
  }
  return out;
}
