/**
 * Loads the project's own wire contract (`proto/`) at run time with @grpc/proto-loader.
 */
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { RLS_SERVICE_NAME } from '../rpc.js';

/** The directory holding sluice's `.proto` files. */
export const PROTO_DIR = fileURLToPath(new URL('../../../proto/', import.meta.url));

/** The RLS file, relative to {@link PROTO_DIR}. */
export const RLS_PROTO = 'envoy/service/ratelimit/v3/rls.proto';

/**
 * Loader options of every proto sluice loads with proto-loader (the RLS server and client, the xDS
 * client's ADS stream): snake_case fields as on the wire, enums as names,
 * 64-bit integers as JS numbers, absent fields left undefined (proto3 zero values are applied by
 * the mapping code, not by the decoder).
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: false,
  oneofs: true,
  includeDirs: [PROTO_DIR],
};

/** Load the RLS package definition (also used for server reflection). */
export function loadRlsPackage(): protoLoader.PackageDefinition {
  return protoLoader.loadSync(RLS_PROTO, LOADER_OPTIONS);
}

/** The RateLimitService service definition from a loaded package. */
export function rlsServiceDefinition(pkg: protoLoader.PackageDefinition): grpc.ServiceDefinition {
  return pkg[RLS_SERVICE_NAME] as grpc.ServiceDefinition;
}

/** A generic client constructor for RateLimitService (used by `sluice query` and tests). */
export function rlsClientConstructor(): grpc.ServiceClientConstructor {
  const pkg = loadRlsPackage();
  return grpc.makeGenericClientConstructor(rlsServiceDefinition(pkg), 'RateLimitService');
}
