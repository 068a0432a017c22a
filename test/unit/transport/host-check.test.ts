/**
 * The debug listener's `Host` check (src/transport/http/host-check.ts; issue 31, item 8) and what
 * counts as a loopback `DEBUG_HOST`.
 */
import { describe, expect, it } from 'vitest';
import { createHostCheck, isLoopbackHost } from '../../../src/transport/http/host-check.js';

describe('createHostCheck', () => {
  it('answers IP literals, localhost, DEBUG_HOST and DEBUG_ALLOWED_HOSTS, with or without a port', () => {
    const check = createHostCheck('0.0.0.0', ['Sluice-Debug.internal']);
    for (const host of [
      '127.0.0.1',
      '127.0.0.1:6070',
      '10.0.0.7:6070',
      '[::1]:6070',
      '[fe80::1]',
      'localhost',
      'LOCALHOST:6070',
      'localhost.',
      'sluice-debug.internal:6070',
      undefined,
      '',
    ]) {
      expect(check(host), String(host)).toBe(true);
    }
    for (const host of [
      'evil.example',
      'evil.example:6070',
      'localhost.evil.example',
      '127.0.0.1.nip.io',
      'sluice-debug.internal.evil.example',
    ]) {
      expect(check(host), host).toBe(false);
    }
  });

  it('a DEBUG_HOST that is a name is served', () => {
    const check = createHostCheck('debug.example', []);
    expect(check('debug.example:6070')).toBe(true);
    expect(check('other.example')).toBe(false);
  });
});

describe('isLoopbackHost', () => {
  it('127/8, ::1, localhost and the IPv4-mapped form are loopback; the rest is not', () => {
    for (const host of [
      '127.0.0.1',
      '127.1.2.3',
      '::1',
      '[::1]',
      'localhost',
      '::ffff:127.0.0.1',
    ]) {
      expect(isLoopbackHost(host), host).toBe(true);
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.1', 'sluice.example', '']) {
      expect(isLoopbackHost(host), host).toBe(false);
    }
  });
});
