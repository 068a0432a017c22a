import { ReflectionService } from '@grpc/reflection';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { describe, expect, it, vi } from 'vitest';
import {
  reflectionDescriptors,
  reflectionPackageDefinition,
} from '../../../../src/transport/grpc/reflection.js';

interface Field {
  name: string;
  typeName?: string;
}
interface Message {
  name: string;
  field: Field[];
  nestedType: Message[];
  enumType: { name: string }[];
}
interface File {
  name: string;
  package: string;
  dependency: string[];
  messageType: Message[];
  enumType: { name: string }[];
  service: { name: string; method: { inputType: string; outputType: string }[] }[];
}

function decode(bytes: Uint8Array): File {
  return descriptor.FileDescriptorProto.toObject(descriptor.FileDescriptorProto.decode(bytes), {
    arrays: true,
  }) as File;
}

/** Every fully-qualified type name (with the leading dot) a file declares. */
function declared(file: File): Set<string> {
  const names = new Set<string>();
  const add = (scope: string, message: Message): void => {
    const name = `${scope}.${message.name}`;
    names.add(name);
    for (const nested of message.nestedType) add(name, nested);
    for (const e of message.enumType) names.add(`${name}.${e.name}`);
  };
  for (const message of file.messageType) add(`.${file.package}`, message);
  for (const e of file.enumType) names.add(`.${file.package}.${e.name}`);
  return names;
}

/** Every type name a file refers to. */
function referenced(file: File): string[] {
  const names: string[] = [];
  const walk = (message: Message): void => {
    for (const field of message.field) if (field.typeName) names.push(field.typeName);
    message.nestedType.forEach(walk);
  };
  file.messageType.forEach(walk);
  for (const service of file.service) {
    for (const method of service.method) names.push(method.inputType, method.outputType);
  }
  return names;
}

describe('reflection descriptors', () => {
  const data = reflectionDescriptors();
  const files = new Map([...data.files].map(([name, bytes]) => [name, decode(bytes)]));

  it('has one file per .proto with its real import name, imports listed before importers', () => {
    expect([...files.keys()].sort()).toEqual([
      'envoy/config/core/v3/base.proto',
      'envoy/extensions/common/ratelimit/v3/ratelimit.proto',
      'envoy/service/rate_limit_quota/v3/rlqs.proto',
      'envoy/service/ratelimit/v3/rls.proto',
      'envoy/type/v3/ratelimit_strategy.proto',
      'envoy/type/v3/ratelimit_unit.proto',
      'envoy/type/v3/token_bucket.proto',
      'google/protobuf/duration.proto',
      'google/protobuf/struct.proto',
      'google/protobuf/timestamp.proto',
      'google/protobuf/wrappers.proto',
      'grpc/health/v1/health.proto',
      'grpc/reflection/v1/reflection.proto',
      'grpc/reflection/v1alpha/reflection.proto',
    ]);
    const order = [...files.keys()];
    for (const [name, file] of files) {
      expect(file.name).toBe(name);
      for (const dependency of file.dependency) {
        expect(order.indexOf(dependency)).toBeLessThan(order.indexOf(name));
      }
    }
    expect(files.get('envoy/service/ratelimit/v3/rls.proto')!.dependency).toEqual([
      'envoy/config/core/v3/base.proto',
      'envoy/extensions/common/ratelimit/v3/ratelimit.proto',
      'google/protobuf/duration.proto',
      'google/protobuf/struct.proto',
      'google/protobuf/timestamp.proto',
    ]);
  });

  it('names every referenced type fully, declared in the file itself or one it imports', () => {
    for (const file of files.values()) {
      const visible = new Set(declared(file));
      for (const dependency of file.dependency) {
        for (const name of declared(files.get(dependency)!)) visible.add(name);
      }
      for (const name of referenced(file)) {
        expect(name, `${file.name} refers to ${name}`).toMatch(/^\./);
        expect(visible.has(name), `${file.name} refers to ${name}`).toBe(true);
      }
    }
  });

  it('lists the services and finds files by symbol and by name, with their imports', () => {
    expect(data.services).toEqual([
      'envoy.service.rate_limit_quota.v3.RateLimitQuotaService',
      'envoy.service.ratelimit.v3.RateLimitService',
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]);
    const names = (list: readonly Uint8Array[] | undefined): string[] =>
      (list ?? []).map((bytes) => decode(bytes).name);
    const entry = names(
      data.fileContainingSymbol('envoy.extensions.common.ratelimit.v3.RateLimitDescriptor.Entry'),
    );
    expect(entry[0]).toBe('envoy/extensions/common/ratelimit/v3/ratelimit.proto');
    expect(entry.slice(1).sort()).toEqual([
      'envoy/type/v3/ratelimit_unit.proto',
      'google/protobuf/wrappers.proto',
    ]);
    expect(
      names(
        data.fileContainingSymbol('envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit'),
      ),
    ).toHaveLength(8);
    expect(
      names(data.fileContainingSymbol('envoy.service.ratelimit.v3.RateLimitResponse.OK'))[0],
    ).toBe('envoy/service/ratelimit/v3/rls.proto');
    expect(names(data.fileByName('grpc/health/v1/health.proto'))).toEqual([
      'grpc/health/v1/health.proto',
    ]);
    expect(data.fileByName('health.proto')).toBeUndefined();
    expect(
      names(
        data.fileContainingSymbol(
          'envoy.service.rate_limit_quota.v3.RateLimitQuotaService.StreamRateLimitQuotas',
        ),
      ).sort(),
    ).toEqual([
      'envoy/service/rate_limit_quota/v3/rlqs.proto',
      'envoy/type/v3/ratelimit_strategy.proto',
      'envoy/type/v3/ratelimit_unit.proto',
      'envoy/type/v3/token_bucket.proto',
      'google/protobuf/duration.proto',
      'google/protobuf/wrappers.proto',
    ]);
    expect(data.fileContainingSymbol('envoy.service.ratelimit.v3.Nope')).toBeUndefined();
  });

  it('spells out map fields as protoc does (a nested map_entry message)', () => {
    const struct = files
      .get('google/protobuf/struct.proto')!
      .messageType.find((m) => m.name === 'Struct')!;
    expect(struct.field).toEqual([
      expect.objectContaining({
        name: 'fields',
        label: 3,
        type: 11,
        typeName: '.google.protobuf.Struct.FieldsEntry',
      }),
    ]);
    expect(struct.nestedType).toEqual([
      expect.objectContaining({
        name: 'FieldsEntry',
        options: expect.objectContaining({ mapEntry: true }),
        field: [
          expect.objectContaining({ name: 'key', number: 1, label: 1, type: 9 }),
          expect.objectContaining({
            name: 'value',
            number: 2,
            label: 1,
            type: 11,
            typeName: '.google.protobuf.Value',
          }),
        ],
      }),
    ]);
  });

  it('feeds @grpc/reflection, which resolves every reference without a warning', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    try {
      new ReflectionService(reflectionPackageDefinition());
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
    }
  });
});
