/** The operations settings: the reference's names and defaults, and clear errors. */
import { describe, expect, it } from 'vitest';
import { loadSettings } from '../../src/settings.js';

describe('operations settings', () => {
  it('defaults: HTTP on 0.0.0.0:8080, debug on loopback 6070, ratio 0.8, reference header names', () => {
    const s = loadSettings({});
    expect(s).toMatchObject({
      httpHost: '0.0.0.0',
      httpPort: 8080,
      debugHost: '127.0.0.1',
      debugPort: 6070,
      nearLimitRatio: 0.8,
      responseHeadersEnabled: false,
      responseHeadersFormat: 'reference',
      limitHeader: 'RateLimit-Limit',
      remainingHeader: 'RateLimit-Remaining',
      resetHeader: 'RateLimit-Reset',
      problemJsonEnabled: false,
      shutdownDelayMs: 0,
    });
  });

  it('reads every variable', () => {
    const s = loadSettings({
      HOST: '127.0.0.1',
      PORT: '18080',
      DEBUG_HOST: '0.0.0.0',
      DEBUG_PORT: '0',
      NEAR_LIMIT_RATIO: '0.5',
      LIMIT_RESPONSE_HEADERS_ENABLED: 'true',
      LIMIT_RESPONSE_HEADERS_FORMAT: 'IETF',
      LIMIT_LIMIT_HEADER: 'X-Limit',
      LIMIT_REMAINING_HEADER: 'X-Remaining',
      LIMIT_RESET_HEADER: 'X-Reset',
      LIMIT_PROBLEM_JSON_ENABLED: '1',
      SHUTDOWN_DELAY_MS: '2500',
    });
    expect(s).toMatchObject({
      httpHost: '127.0.0.1',
      httpPort: 18080,
      debugHost: '0.0.0.0',
      debugPort: 0,
      nearLimitRatio: 0.5,
      responseHeadersEnabled: true,
      responseHeadersFormat: 'ietf',
      limitHeader: 'X-Limit',
      remainingHeader: 'X-Remaining',
      resetHeader: 'X-Reset',
      problemJsonEnabled: true,
      shutdownDelayMs: 2500,
    });
  });

  it('names every invalid value in one error', () => {
    expect(() =>
      loadSettings({
        PORT: '70000',
        NEAR_LIMIT_RATIO: '1.5',
        LIMIT_RESPONSE_HEADERS_FORMAT: 'draft',
        LIMIT_RESPONSE_HEADERS_ENABLED: 'yes',
      }),
    ).toThrow(
      /PORT="70000".*\n.*NEAR_LIMIT_RATIO="1.5": expected a number from 0 to 1[\s\S]*LIMIT_RESPONSE_HEADERS_ENABLED="yes"[\s\S]*LIMIT_RESPONSE_HEADERS_FORMAT="draft": expected reference or ietf/,
    );
  });
});
