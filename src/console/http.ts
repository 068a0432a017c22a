/**
 * What every console panel needs to answer over HTTP: the endpoint type, JSON answers, bounded
 * bodies and bounded display values. The routes are plain `transport/http` routes; the debug
 * server mounts them.
 */
import type http from 'node:http';
import { truncateForLog } from '../logging/limited.js';
import { send, type Route } from '../transport/http/server.js';

/** One endpoint of the console. */
export interface ConsoleEndpoint {
  readonly path: string;
  /** One line for the debug listener's endpoint list. */
  readonly help: string;
  readonly route: Route;
}

/** Longest value (entry key or value, domain, rule key) shown, characters; longer ones are cut. */
export const DISPLAY_MAX_CHARS = 200;
/** Largest JSON body of `/api/try` and `/api/reset`, bytes. */
const CONSOLE_MAX_BODY_BYTES = 64 * 1024;

/** The content type of every JSON answer. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/** Answer `body` as JSON, never cached (every panel shows live state). */
export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  res.setHeader('Cache-Control', 'no-store');
  send(res, status, JSON_TYPE, JSON.stringify(body));
}

/**
 * The body of `req` up to {@link CONSOLE_MAX_BODY_BYTES}; `undefined` (after answering 413)
 * when larger.
 */
export async function readBody(
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<Buffer | undefined> {
  const body = await new Promise<Buffer | undefined>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > CONSOLE_MAX_BODY_BYTES) tooLarge = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(tooLarge ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
  if (body === undefined) {
    sendJson(res, 413, { error: `the body is larger than ${CONSOLE_MAX_BODY_BYTES} bytes` });
  }
  return body;
}

/** `text` cut to `max` characters, saying how long it was (`abc... (4096 chars)`). */
export function cut(text: string, max = DISPLAY_MAX_CHARS): string {
  return truncateForLog(text, max);
}

/** `items` cut to `max`, with a last line saying how many more there were. */
export function capList(items: readonly string[], max: number, maxChars: number): string[] {
  const shown = items.slice(0, max).map((item) => cut(item, maxChars));
  if (items.length > max) shown.push(`and ${items.length - max} more`);
  return shown;
}
