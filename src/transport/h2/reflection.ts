/**
 * Server reflection for the lean server: @grpc/reflection's `ReflectionService` answers the
 * requests (v1 and v1alpha, same wire format), registered through a stand-in for grpc-js's
 * `addService` so its handlers and (de)serializers can be called without a grpc-js server.
 * Reflection is not on the hot path; a call costs a protobufjs decode and encode per message.
 */
import { EventEmitter } from 'node:events';
import type * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import type { ReflectionHandler } from './methods.js';

/** One registered bidi method: its codec and its handler. */
interface Registered {
  readonly method: grpc.MethodDefinition<unknown, unknown>;
  readonly handler: (stream: EventEmitter & { write(value: unknown): boolean }) => void;
}

/**
 * A {@link ReflectionHandler} serving the files of `pkg` (a package definition whose entries carry
 * `fileDescriptorProtos`, as @grpc/proto-loader makes or transport/grpc/reflection.ts builds).
 */
export function createReflectionHandler(pkg: protoLoader.PackageDefinition): ReflectionHandler {
  const byPath = new Map<string, Registered>();
  new ReflectionService(pkg).addToServer({
    addService(
      definition: grpc.ServiceDefinition,
      implementation: grpc.UntypedServiceImplementation,
    ) {
      for (const [name, method] of Object.entries(definition)) {
        byPath.set(method.path, {
          method: method as grpc.MethodDefinition<unknown, unknown>,
          handler: implementation[name] as Registered['handler'],
        });
      }
    },
  });
  return {
    paths: [...byPath.keys()],
    answer(path, request) {
      const registered = byPath.get(path);
      if (registered === undefined) throw new Error(`no reflection method ${path}`);
      const { method, handler } = registered;
      const decoded = method.requestDeserialize(request);
      let out: Buffer | undefined;
      // The handler writes its answer synchronously from its 'data' listener.
      const stream = Object.assign(new EventEmitter(), {
        write(value: unknown): boolean {
          out = method.responseSerialize(value);
          return true;
        },
        end(): void {},
      });
      handler(stream);
      stream.emit('data', decoded);
      if (out === undefined) throw new Error('reflection produced no answer');
      return out;
    },
  };
}
