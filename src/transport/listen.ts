/**
 * Binding a listener, for every server built on `node:net` (the lean gRPC server, the HTTP
 * servers): a bind failure (port in use, address not local) becomes an INVALID_SETTINGS error
 * that names the address and, for the gRPC port, the settings that move it.
 */
import type { AddressInfo, Server } from 'node:net';
import { SluiceError } from '../errors.js';

/** The settings that move the gRPC port, as both gRPC servers name them in a bind failure. */
export const GRPC_ADDRESS_SETTINGS = 'GRPC_HOST/GRPC_PORT or --grpc-host/--grpc-port';

/**
 * The error of a failed bind on `host:port`: `cannot listen on host:port (set <settings>): why`,
 * without the parenthesis when `settings` is `undefined`.
 */
export function listenFailure(
  host: string,
  port: number,
  err: Error,
  settings?: string,
): SluiceError {
  const hint = settings === undefined ? '' : ` (set ${settings})`;
  return new SluiceError(
    'INVALID_SETTINGS',
    `cannot listen on ${host}:${port}${hint}: ${err.message}`,
    {
      cause: err,
    },
  );
}

/**
 * Bind `server` to `host:port` (port 0 picks one); resolves to the bound port, or rejects with
 * {@link listenFailure}. Only the bind's own error is taken: later server errors are the
 * caller's to handle.
 */
export function listenOn(
  server: Server,
  host: string,
  port: number,
  settings?: string,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(listenFailure(host, port, err, settings));
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
