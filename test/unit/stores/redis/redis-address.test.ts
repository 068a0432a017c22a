/**
 * `REDIS_URL` addresses as the reference writes them (src/stores/redis/address.ts,
 * docs/configuration.md): `host:port`, `[v6]:port`, and `redis://` / `rediss://` URLs with
 * credentials and a database.
 */
import { describe, expect, it } from 'vitest';
import { SluiceError } from '../../../../src/errors.js';
import { parseAddress } from '../../../../src/stores/redis/address.js';

describe('parseAddress: host:port', () => {
  it('parses a host name, an IPv4 and a bracketed IPv6 literal, trimming spaces', () => {
    expect(parseAddress('redis.internal:6380')).toEqual({
      host: 'redis.internal',
      port: 6380,
      tls: false,
    });
    expect(parseAddress('  127.0.0.1:7000 ')).toEqual({
      host: '127.0.0.1',
      port: 7000,
      tls: false,
    });
    expect(parseAddress('[::1]:6379')).toEqual({ host: '::1', port: 6379, tls: false });
    expect(parseAddress('[fe80::1:2]:1')).toEqual({ host: 'fe80::1:2', port: 1, tls: false });
  });

  it.each([
    ['no port', 'redis.internal'],
    ['an empty port', 'redis.internal:'],
    ['a port that is not a number', 'redis.internal:63a'],
    ['text after the port', 'redis.internal:6379x'],
    ['text before the host', 'x y:6379:1'],
    ['an unbracketed IPv6 literal', '::1:6379'],
    ['an empty string', ''],
    ['a bare port', ':6379'],
    ['another scheme', 'http://redis.internal:6379'],
    ['a scheme that only ends in redis', 'myredis://redis.internal:6379'],
  ])('refuses %s (%j) naming the expected forms', (_, text) => {
    expect(() => parseAddress(text)).toThrow(
      'expected host:port or a redis:// URL for every address',
    );
  });
});

describe('parseAddress: URLs', () => {
  it('redis:// with user, password and database', () => {
    expect(parseAddress('redis://alice:s3cret@redis.internal:6390/2')).toEqual({
      host: 'redis.internal',
      port: 6390,
      username: 'alice',
      password: 's3cret',
      db: 2,
      tls: false,
    });
  });

  it('defaults the port to 6379 and leaves absent parts undefined', () => {
    expect(parseAddress('redis://redis.internal')).toEqual({
      host: 'redis.internal',
      port: 6379,
      username: undefined,
      password: undefined,
      db: undefined,
      tls: false,
    });
    // A bare `/` is no database; neither is a path that is not an integer.
    expect(parseAddress('redis://redis.internal/').db).toBeUndefined();
    expect(parseAddress('redis://redis.internal/x').db).toBeUndefined();
    expect(parseAddress('redis://redis.internal/1.5').db).toBeUndefined();
    expect(parseAddress('redis://redis.internal/0').db).toBe(0);
    expect(parseAddress('redis://redis.internal/15').db).toBe(15);
  });

  it('a password without a user, and percent-encoded credentials', () => {
    expect(parseAddress('redis://:p%40ss%3Aword@h:1')).toMatchObject({
      username: undefined,
      password: 'p@ss:word',
    });
    expect(parseAddress('redis://us%20er@h:1')).toMatchObject({
      username: 'us er',
      password: undefined,
    });
  });

  it('rediss:// is TLS, in any case; the scheme is recognised case-insensitively', () => {
    expect(parseAddress('rediss://h:6380').tls).toBe(true);
    expect(parseAddress('REDISS://h:6380')).toMatchObject({ host: 'h', port: 6380, tls: true });
    expect(parseAddress('Redis://h:6380')).toMatchObject({ host: 'h', port: 6380, tls: false });
    expect(parseAddress('  redis://h:6380  ').port).toBe(6380);
  });

  it('removes the brackets of an IPv6 host, and only those', () => {
    expect(parseAddress('redis://[::1]:6379').host).toBe('::1');
    expect(parseAddress('redis://[2001:db8::7]/3')).toMatchObject({
      host: '2001:db8::7',
      port: 6379,
      db: 3,
    });
  });
});

describe('parseAddress: what it refuses or leaves out', () => {
  it('an address it cannot read is INVALID_SETTINGS', () => {
    let error: unknown;
    try {
      parseAddress('redis.internal');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(SluiceError);
    expect((error as SluiceError).code).toBe('INVALID_SETTINGS');
  });

  it('a URL path that is not a database number selects no database', () => {
    expect(parseAddress('redis://redis.internal:6379/abc').db).toBeUndefined();
    expect(parseAddress('redis://redis.internal:6379/1.5').db).toBeUndefined();
    expect(parseAddress('redis://redis.internal:6379/').db).toBeUndefined();
  });
});
