/**
 * Which `Host` headers the debug listener answers (docs/operations-console.md, "Security"). A web
 * page anywhere can make its visitor's browser talk to a loopback or intranet port by pointing
 * its own name at that address (DNS rebinding); the browser then sends the page's name as
 * `Host`, and the same-origin checks pass. Answering only the names the listener is really reached
 * by stops that: an IP literal (a page served under an address is that address's own), `localhost`,
 * `DEBUG_HOST` when it is a name, and the names listed in `DEBUG_ALLOWED_HOSTS`.
 */
import net from 'node:net';

/** Decides whether a request's `Host` header names this listener. */
export type HostCheck = (host: string | undefined) => boolean;

/** The name part of a `Host` header (no port, no brackets, lower case, no final dot). */
function hostName(header: string): string {
  let name = header.trim().toLowerCase();
  if (name.startsWith('[')) {
    const end = name.indexOf(']');
    name = end < 0 ? name : name.slice(1, end);
  } else {
    const colon = name.indexOf(':');
    // One colon is a port; more would be a bare IPv6 address, which is not a valid Host.
    if (colon >= 0 && name.indexOf(':', colon + 1) < 0) name = name.slice(0, colon);
  }
  return name.endsWith('.') ? name.slice(0, -1) : name;
}

/** Whether `host` (a `DEBUG_HOST` value) is a loopback address or `localhost`. */
export function isLoopbackHost(host: string): boolean {
  const name = hostName(host);
  if (name === 'localhost' || name === '::1') return true;
  const v4 = name.startsWith('::ffff:') ? name.slice('::ffff:'.length) : name;
  return net.isIPv4(v4) && v4.startsWith('127.');
}

/**
 * The check for a listener bound to `listenHost`, also accepting `extraNames` (case-insensitive).
 * A request with no `Host` (HTTP/1.0) comes from no browser and is accepted.
 */
export function createHostCheck(listenHost: string, extraNames: readonly string[]): HostCheck {
  const names = new Set(['localhost', ...extraNames.map(hostName)]);
  const listen = hostName(listenHost);
  if (net.isIP(listen) === 0 && listen !== '') names.add(listen);
  return (host) => {
    if (host === undefined || host === '') return true;
    const name = hostName(host);
    return net.isIP(name) !== 0 || names.has(name);
  };
}
