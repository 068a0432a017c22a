/**
 * The closed set of error codes (src/errors.ts) and its documentation (docs/errors.md) stay in
 * step, as fastify checks its error codes: every code has a row, every row names a code that
 * exists, and the row's gRPC status is the one transport/status.ts answers.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, SluiceError, type ErrorCode } from '../../src/errors.js';
import { GRPC_STATUS_BY_CODE, GrpcStatus } from '../../src/transport/status.js';

const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');

/** The rows of the "Error codes" table: code -> gRPC status name. */
function documentedCodes(): Map<string, string> {
  const section = doc.split(/^## /m).find((part) => part.startsWith('Error codes'));
  if (section === undefined) throw new Error('docs/errors.md has no "## Error codes" section');
  const rows = new Map<string, string>();
  for (const line of section.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    const code = /^`([A-Z0-9_]+)`$/.exec(cells[1] ?? '')?.[1];
    if (code === undefined) continue;
    expect(rows.has(code), `${code} is documented twice`).toBe(false);
    rows.set(code, (cells[3] ?? '').replaceAll('`', ''));
  }
  return rows;
}

const codes = Object.keys(ERROR_CODES) as ErrorCode[];
const statusName = new Map<number, string>(
  Object.entries(GrpcStatus).map(([name, value]) => [value, name]),
);

describe('error codes', () => {
  it('every code in src/errors.ts has a row in docs/errors.md', () => {
    const documented = documentedCodes();
    expect(codes.filter((code) => !documented.has(code))).toEqual([]);
  });

  it('every code docs/errors.md documents exists in src/errors.ts', () => {
    const known = new Set<string>(codes);
    expect([...documentedCodes().keys()].filter((code) => !known.has(code))).toEqual([]);
  });

  it("each row's gRPC status is the one transport/status.ts answers", () => {
    const documented = documentedCodes();
    for (const code of codes) {
      expect(documented.get(code), code).toBe(statusName.get(GRPC_STATUS_BY_CODE[code]));
    }
  });

  it('SluiceError.is matches the class and, when given, the codes', () => {
    const timeout = new SluiceError('STORE_TIMEOUT', 'redis did not answer within 5ms');
    expect(SluiceError.is(timeout)).toBe(true);
    expect(SluiceError.is(timeout, 'STORE_TIMEOUT')).toBe(true);
    expect(SluiceError.is(timeout, 'INVALID_JSON', 'STORE_TIMEOUT')).toBe(true);
    expect(SluiceError.is(timeout, 'STORE_UNAVAILABLE')).toBe(false);
    // A plain Error with the same text is not one: failures are recognised by type, not text.
    expect(SluiceError.is(new Error('redis did not answer within 5ms'), 'STORE_TIMEOUT')).toBe(
      false,
    );
    expect(SluiceError.is({ code: 'STORE_TIMEOUT' }, 'STORE_TIMEOUT')).toBe(false);
  });
});
