/**
 * Keeping secrets out of the logs (docs/operations-http.md "Secrets"): credentials inside URLs
 * (`redis://user:pass@host`) and the values of the `*_AUTH` variables. Two layers: `redactUrl()`
 * for code that logs an address on purpose, and a line scrubber in the logger that removes every
 * known secret value from every line, whatever field or message it ended up in.
 */

/** Environment variables whose whole value is a secret (the reference's names). */
const SECRET_VARIABLES = [
  'REDIS_AUTH',
  'REDIS_SENTINEL_AUTH',
  'REDIS_PERSECOND_AUTH',
  'REDIS_PERSECOND_SENTINEL_AUTH',
  'DEBUG_CONSOLE_RESET_TOKEN',
] as const;

/** Environment variables that hold URLs whose credentials are secret. */
const URL_VARIABLES = ['REDIS_URL', 'REDIS_PERSECOND_URL'] as const;

/** Text put where a secret was. */
export const REDACTED = '[redacted]';

/**
 * The `user:password@` part of a URL: after a scheme anywhere, or at the start of the value or of
 * a comma-separated item even without a scheme (`user:pass@host:6379`, a mistyped REDIS_URL that
 * the error refusing it would otherwise quote). Group 1 is what precedes it, group 2 the userinfo.
 * The scheme is at most 32 characters: unbounded, a long value without `://` took time quadratic
 * in its length (0.9 s for 10,000 characters).
 */
const USERINFO =
  /((?:^|,)\s*(?:[a-z][a-z0-9+.-]{0,31}:\/\/)?|[a-z][a-z0-9+.-]{0,31}:\/\/)([^@/\s,]*)@/gi;

/**
 * `url` (or a comma-separated list of URLs, as `REDIS_URL` allows for clusters) with any
 * `user:password@` part replaced by `[redacted]@`.
 */
export function redactUrl(url: string): string {
  return url.replace(USERINFO, (_m, before: string) => `${before}${REDACTED}@`);
}

/** The secret strings found in `env`: `*_AUTH` values and the userinfo parts of URLs. */
export function secretsFromEnv(env: NodeJS.ProcessEnv): string[] {
  const secrets = new Set<string>();
  for (const name of SECRET_VARIABLES) {
    const value = env[name];
    if (value !== undefined && value !== '') secrets.add(value);
  }
  for (const name of URL_VARIABLES) {
    const value = env[name];
    if (value === undefined) continue;
    for (const match of value.matchAll(USERINFO)) {
      const userinfo = match[2]!;
      if (userinfo === '') continue;
      secrets.add(userinfo);
      // The password alone too, in case a client library logs it apart from the user.
      const colon = userinfo.indexOf(':');
      const parts = [userinfo];
      if (colon >= 0 && colon < userinfo.length - 1) parts.push(userinfo.slice(colon + 1));
      for (const part of parts) {
        secrets.add(part);
        try {
          secrets.add(decodeURIComponent(part));
        } catch {
          // Not percent-encoded text; the raw form is already covered.
        }
      }
    }
  }
  // Longest first, so a secret that contains another is removed whole.
  return [...secrets].filter((s) => s.length >= 3).sort((a, b) => b.length - a.length);
}

/** `line` with every occurrence of every secret (and its JSON-escaped form) replaced. */
export function scrubSecrets(line: string, secrets: readonly string[]): string {
  let out = line;
  for (const secret of secrets) {
    if (out.includes(secret)) out = out.split(secret).join(REDACTED);
    const escaped = JSON.stringify(secret).slice(1, -1);
    if (escaped !== secret && out.includes(escaped)) out = out.split(escaped).join(REDACTED);
  }
  return out;
}
