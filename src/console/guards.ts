/**
 * What the console refuses before doing any work (docs/operations-console.md, "Security" and
 * "Cost"): cross-site POSTs, resets without the credential the listener needs, and JSON requests
 * past one budget shared by every client.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type http from 'node:http';
import type { Clock } from '../clock.js';

/**
 * JSON answers (`/api/*`) the console gives per second over all clients, and the burst allowed
 * above that; past them it answers 429. The page asks for two every 2 s; a loop of requests,
 * however many clients run it, costs the calls no more than this many answers.
 */
export const API_PER_SECOND = 10;
const API_BURST = 20;

/**
 * The shared budget of JSON answers: a token bucket of {@link API_BURST}, refilled at
 * {@link API_PER_SECOND}, read from `clock` (no timer). Returns whether one more may be answered.
 */
export function createApiBudget(clock: Clock): () => boolean {
  let tokens = API_BURST;
  let refilledAt = clock();
  return () => {
    const at = clock();
    tokens = Math.min(API_BURST, tokens + (Math.max(0, at - refilledAt) / 1000) * API_PER_SECOND);
    refilledAt = at;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };
}

/**
 * Why a state-changing or body-carrying request is refused, or `undefined` when it may go on:
 * only POST with a JSON body, and no cross-site origin, so a web page elsewhere cannot make the
 * operator's browser call it (a JSON content type needs a CORS preflight, never answered here).
 */
export function refusePost(req: http.IncomingMessage): [number, string] | undefined {
  if (req.method !== 'POST') return [405, 'use POST with a JSON body'];
  const type = (req.headers['content-type'] ?? '').split(';', 1)[0]!.trim().toLowerCase();
  if (type !== 'application/json') return [415, 'the body must be application/json'];
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return [403, 'unreadable Origin header'];
    }
    if (host !== req.headers.host) return [403, `cross-origin request from ${origin} refused`];
  } else if (origin === 'null') {
    return [403, 'cross-origin request refused'];
  }
  return undefined;
}

/** SHA-256 of a token: digests compare in constant time whatever the lengths. */
export function resetTokenDigest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/**
 * Why a reset is refused for its credential, or `undefined` when it may go on: with a token set,
 * the request must carry it as a bearer credential; without one, a listener off loopback refuses
 * every reset (anyone who can reach the port could otherwise reset any counter).
 */
export function refuseCredential(
  req: http.IncomingMessage,
  tokenDigest: Buffer | undefined,
  onLoopback: boolean,
): [number, string] | undefined {
  if (tokenDigest === undefined) {
    if (onLoopback) return undefined;
    return [
      403,
      'counter reset on a debug listener off loopback needs a credential: set DEBUG_CONSOLE_RESET_TOKEN and send it as Authorization: Bearer <token>',
    ];
  }
  const header = req.headers.authorization ?? '';
  const given = header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
  if (given !== '' && timingSafeEqual(resetTokenDigest(given), tokenDigest)) return undefined;
  return [
    401,
    'counter reset needs the DEBUG_CONSOLE_RESET_TOKEN as Authorization: Bearer <token>',
  ];
}
