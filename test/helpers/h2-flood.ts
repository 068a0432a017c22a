/**
 * A raw HTTP/2 client that opens gRPC streams by writing HEADERS frames on a plain socket and
 * keeps no state per stream, so a test can hold tens of thousands of header-only requests open on
 * a server without the client's own memory growing with them. It answers the server's SETTINGS
 * and PINGs and ignores every other frame.
 */
import net from 'node:net';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

/** A 9-byte frame header followed by `payload`. */
function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header[3] = type;
  header[4] = flags;
  header.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([header, payload]);
}

/** An HPACK string literal (no Huffman coding), for lengths under 127. */
function literal(text: string): Buffer {
  const bytes = Buffer.from(text, 'latin1');
  if (bytes.length >= 127) throw new Error('literal too long for this encoder');
  return Buffer.concat([Buffer.from([bytes.length]), bytes]);
}

/**
 * The header block of a gRPC POST to `path`: static-table `:method POST` and `:scheme http`,
 * then literals without indexing (`:path`, `:authority`, `content-type`, `te`).
 */
function grpcHeaderBlock(path: string): Buffer {
  return Buffer.concat([
    Buffer.from([0x83, 0x86]),
    Buffer.from([0x04]),
    literal(path),
    Buffer.from([0x01]),
    literal('localhost'),
    Buffer.from([0x0f, 0x10]),
    literal('application/grpc'),
    Buffer.from([0x00]),
    literal('te'),
    literal('trailers'),
  ]);
}

/** One raw connection. */
export interface RawH2Connection {
  /** Open `count` more streams to `path` with headers only (no DATA, no END_STREAM). */
  openHeaderOnlyStreams(path: string, count: number): Promise<void>;
  /**
   * Round-trip a PING: on return the server has processed every frame sent before it (or the
   * connection is closed).
   */
  ping(): Promise<void>;
  /** Whether the server closed the connection (or it failed). */
  closed(): boolean;
  /** Resolves once the connection is closed. */
  readonly whenClosed: Promise<void>;
  /** Close the socket. */
  destroy(): void;
}

/** Connect to `host:port` and send the preface; resolves once connected. */
export async function rawH2Connect(host: string, port: number): Promise<RawH2Connection> {
  const socket = net.connect({ host, port });
  let isClosed = false;
  const whenClosed = new Promise<void>((resolve) => {
    socket.once('close', () => {
      isClosed = true;
      resolve();
    });
  });
  socket.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.write(Buffer.concat([PREFACE, frame(0x4, 0, 0, Buffer.alloc(0))]));
  let pending: Buffer = Buffer.alloc(0);
  const pingWaiters: (() => void)[] = [];
  socket.on('data', (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3);
      if (pending.length < 9 + length) break;
      const type = pending[3]!;
      const flags = pending[4]!;
      const payload = pending.subarray(9, 9 + length);
      if (type === 0x4 && (flags & 0x1) === 0) socket.write(frame(0x4, 0x1, 0, Buffer.alloc(0)));
      if (type === 0x6 && (flags & 0x1) === 0) socket.write(frame(0x6, 0x1, 0, payload));
      if (type === 0x6 && (flags & 0x1) !== 0) pingWaiters.shift()?.();
      pending = pending.subarray(9 + length);
    }
  });
  let nextStreamId = 1;
  return {
    async openHeaderOnlyStreams(path, count) {
      const block = grpcHeaderBlock(path);
      const batch: Buffer[] = [];
      for (let i = 0; i < count && !isClosed; i++) {
        // END_HEADERS only: the request stays open, waiting for a body that never comes.
        batch.push(frame(0x1, 0x4, nextStreamId, block));
        nextStreamId += 2;
        if (batch.length === 500 || i === count - 1) {
          const ok = socket.write(Buffer.concat(batch.splice(0)));
          if (!ok) {
            await Promise.race([
              new Promise<void>((resolve) => socket.once('drain', resolve)),
              whenClosed,
            ]);
          }
        }
      }
    },
    async ping() {
      if (isClosed) return;
      const answered = new Promise<void>((resolve) => pingWaiters.push(resolve));
      socket.write(frame(0x6, 0, 0, Buffer.alloc(8)));
      await Promise.race([answered, whenClosed]);
    },
    closed: () => isClosed,
    whenClosed,
    destroy: () => socket.destroy(),
  };
}
