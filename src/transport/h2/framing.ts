/**
 * gRPC over HTTP/2 framing details the lean server needs: `grpc-timeout` parsing, `grpc-message`
 * percent-encoding, and the 5-byte length prefix of every message.
 */

/** Bytes before each message: a compressed flag (0 or 1) and the length, uint32 big-endian. */
export const PREFIX_BYTES = 5;

/** Milliseconds per `grpc-timeout` unit letter. */
const TIMEOUT_UNIT_MS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1_000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/**
 * The deadline of a `grpc-timeout` header value (at most 8 digits, then one of `HMSmun`), in ms
 * from now; `undefined` when absent; `NaN` when malformed.
 */
export function parseGrpcTimeout(value: string | string[] | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') return NaN;
  const n = value.length;
  if (n < 2 || n > 9) return NaN;
  const unit = TIMEOUT_UNIT_MS[value[n - 1]!];
  if (unit === undefined) return NaN;
  let amount = 0;
  for (let i = 0; i < n - 1; i++) {
    const c = value.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return NaN;
    amount = amount * 10 + c;
  }
  return amount * unit;
}

/**
 * Percent-encode a status message for `grpc-message`: bytes outside printable ASCII and `%` itself
 * become `%XX` of their UTF-8 encoding.
 */
export function encodeGrpcMessage(message: string): string {
  let plain = true;
  for (let i = 0; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      plain = false;
      break;
    }
  }
  if (plain) return message;
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out +=
      byte < 0x20 || byte > 0x7e || byte === 0x25
        ? `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
        : String.fromCharCode(byte);
  }
  return out;
}

/** Write the 5-byte prefix for an uncompressed message of `length` bytes at the start of `buf`. */
export function writePrefix(buf: Buffer, length: number): void {
  buf[0] = 0;
  buf.writeUInt32BE(length, 1);
}

/** `message` with an uncompressed 5-byte prefix in front. */
export function frame(message: Uint8Array): Buffer {
  const buf = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
  writePrefix(buf, message.length);
  buf.set(message, PREFIX_BYTES);
  return buf;
}
