/**
 * Server reflection data, independent of the transport that serves it.
 *
 * grpcurl, grpcui and Postman build a message from the FileDescriptorProtos a server sends, and
 * refuse any file whose imports or type references they cannot follow. @grpc/proto-loader's
 * descriptors merge each package into one made-up file with relative type names and no imports,
 * so they are not enough. This module builds real ones, one per `.proto` file, with the file's
 * real name, its imports and fully-qualified type names, for everything sluice serves:
 *
 * - `envoy/service/ratelimit/v3/rls.proto` and its imports from `proto/` (the RLS contract), and
 *   the well-known types they use (`google/protobuf/{duration,struct,timestamp,wrappers}.proto`);
 * - `grpc/health/v1/health.proto` (the file grpc-health-check serves);
 * - `grpc/reflection/v1/reflection.proto` and `grpc/reflection/v1alpha/reflection.proto` (the
 *   files @grpc/reflection serves).
 *
 * Two ways to use it:
 * - {@link reflectionPackageDefinition} feeds @grpc/reflection's `ReflectionService`, which
 *   answers the reflection stream (v1 and v1alpha). Its `addToServer` needs only an object with
 *   grpc-js's `addService(definition, handlers)`, so another transport can register the same
 *   handlers through a small adapter.
 * - {@link reflectionDescriptors} gives the encoded files and the two look-ups a reflection
 *   handler needs (by file name, by symbol), for a transport that answers the stream itself.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import type * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { RLQS_PROTO } from '../rlqs-wire.js';
import { PROTO_DIR, RLS_PROTO } from './proto.js';

/** The reflection data of everything sluice serves. */
export interface ReflectionDescriptors {
  /**
   * Every file as an encoded `google.protobuf.FileDescriptorProto`, keyed by its import name
   * (e.g. `envoy/service/ratelimit/v3/rls.proto`); a file comes after every file it imports.
   */
  readonly files: ReadonlyMap<string, Uint8Array>;
  /**
   * Fully-qualified names of the services (what ListServices answers):
   * `envoy.service.ratelimit.v3.RateLimitService`, `grpc.health.v1.Health`,
   * `grpc.reflection.v1.ServerReflection` and `grpc.reflection.v1alpha.ServerReflection`.
   */
  readonly services: readonly string[];
  /**
   * The file named `name`, followed by every file it imports (transitively), encoded; `undefined`
   * when no such file is served (reflection answers NOT_FOUND).
   */
  fileByName(name: string): readonly Uint8Array[] | undefined;
  /**
   * The file declaring `symbol`, a fully-qualified name without a leading dot (a service, method,
   * message, nested message, field, oneof, enum or enum value, e.g.
   * `envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit`), followed by every file it
   * imports (transitively), encoded; `undefined` when unknown (reflection answers NOT_FOUND).
   */
  fileContainingSymbol(symbol: string): readonly Uint8Array[] | undefined;
}

const require = createRequire(import.meta.url);

/**
 * The served files that do not come from `proto/`: their canonical import names (as grpc-go's
 * reflection names them) and where the package that implements the service ships them.
 */
const PACKAGE_FILES: readonly { readonly name: string; readonly source: string }[] = [
  {
    name: 'grpc/health/v1/health.proto',
    source: require.resolve('grpc-health-check/proto/health/v1/health.proto'),
  },
  {
    name: 'grpc/reflection/v1/reflection.proto',
    source: require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1/reflection.proto'),
  },
  {
    name: 'grpc/reflection/v1alpha/reflection.proto',
    source:
      require.resolve('@grpc/reflection/build/proto/grpc/reflection/v1alpha/reflection.proto'),
  },
];

let cached: ReflectionDescriptors | undefined;

/** Build (once per process) the reflection data of everything sluice serves. */
export function reflectionDescriptors(): ReflectionDescriptors {
  cached ??= buildDescriptors();
  return cached;
}

/**
 * The same files in the shape @grpc/reflection reads: a package definition whose one entry
 * carries every encoded file in `fileDescriptorProtos` (the only field ReflectionService reads).
 * `new ReflectionService(reflectionPackageDefinition())` then lists every service and resolves
 * every symbol with its imports.
 */
export function reflectionPackageDefinition(): protoLoader.PackageDefinition {
  const files = [...reflectionDescriptors().files.values()].map((bytes) => Buffer.from(bytes));
  const entry = {
    format: 'Protocol Buffer 3 FileDescriptorProto',
    type: {},
    fileDescriptorProtos: files,
  };
  // Not a real message definition: ReflectionService only walks `fileDescriptorProtos`.
  return { 'sluice.reflection.files': entry } as unknown as protoLoader.PackageDefinition;
}

/** A `.proto` file under construction: its declarations and the files they reference. */
interface FileBuild {
  readonly name: string;
  readonly pkg: string;
  readonly declarations: protobuf.ReflectionObject[];
  readonly dependencies: Set<string>;
}

function buildDescriptors(): ReflectionDescriptors {
  const root = new protobuf.Root();
  // Imports are written relative to proto/ (as protoc -I proto); google/protobuf/* files are
  // protobufjs's bundled copies and never reach this hook.
  root.resolvePath = (_origin, target) =>
    path.isAbsolute(target) ? target : path.join(PROTO_DIR, target);
  root.loadSync(
    [
      path.join(PROTO_DIR, RLS_PROTO),
      path.join(PROTO_DIR, RLQS_PROTO),
      ...PACKAGE_FILES.map((file) => file.source),
    ],
    {
      keepCase: true,
    },
  );
  root.resolveAll();

  const fileOf = fileNamer(root);
  const files = new Map<string, FileBuild>();
  const symbols = new Map<string, string>();
  const services: string[] = [];

  // Top-level declarations, grouped by the file that declares them.
  const collect = (ns: protobuf.NamespaceBase): void => {
    for (const nested of ns.nestedArray) {
      if (nested instanceof protobuf.Type || nested instanceof protobuf.Enum) {
        addDeclaration(nested);
      } else if (nested instanceof protobuf.Service) {
        addDeclaration(nested);
        services.push(qualified(nested));
      } else if (nested instanceof protobuf.Namespace) {
        collect(nested);
      }
    }
  };
  const addDeclaration = (object: protobuf.ReflectionObject): void => {
    const name = fileOf(object);
    let file = files.get(name);
    if (file === undefined) {
      file = {
        name,
        pkg: object.parent === null ? '' : qualified(object.parent),
        declarations: [],
        dependencies: new Set(),
      };
      files.set(name, file);
    }
    file.declarations.push(object);
  };
  collect(root);

  const encoded = new Map<string, Uint8Array>();
  const built = new Map<string, protobuf.Message>();
  for (const file of files.values()) {
    const referenced = (type: protobuf.ReflectionObject | null): string => {
      if (type === null) throw new Error('reflection: unresolved type');
      const owner = fileOf(topLevel(type));
      if (owner !== file.name) file.dependencies.add(owner);
      return `.${qualified(type)}`;
    };
    const messages: object[] = [];
    const enums: object[] = [];
    const fileServices: object[] = [];
    for (const declaration of file.declarations) {
      indexSymbols(declaration, file.name, symbols);
      if (declaration instanceof protobuf.Type)
        messages.push(messageProto(declaration, referenced));
      else if (declaration instanceof protobuf.Enum) enums.push(enumProto(declaration));
      else if (declaration instanceof protobuf.Service) {
        fileServices.push(serviceProto(declaration, referenced));
      }
    }
    built.set(
      file.name,
      descriptor.FileDescriptorProto.fromObject({
        name: file.name,
        package: file.pkg,
        dependency: [...file.dependencies].sort(),
        messageType: messages,
        enumType: enums,
        service: fileServices,
        syntax: 'proto3',
      }),
    );
  }

  // Imports before importers, so a client can build each file as it arrives.
  const visit = (name: string, seen: Set<string>): void => {
    if (encoded.has(name) || seen.has(name)) return;
    seen.add(name);
    for (const dependency of files.get(name)!.dependencies) visit(dependency, seen);
    encoded.set(name, descriptor.FileDescriptorProto.encode(built.get(name)!).finish());
  };
  for (const name of [...files.keys()].sort()) visit(name, new Set());

  const withImports = (name: string): Uint8Array[] => {
    const order: string[] = [];
    const walk = (current: string): void => {
      if (order.includes(current)) return;
      order.push(current);
      for (const dependency of files.get(current)!.dependencies) walk(dependency);
    };
    walk(name);
    return order.map((file) => encoded.get(file)!);
  };

  return {
    files: encoded,
    services: services.sort(),
    fileByName: (name) => (files.has(name) ? withImports(name) : undefined),
    fileContainingSymbol: (symbol) => {
      const file = symbols.get(symbol);
      return file === undefined ? undefined : withImports(file);
    },
  };
}

/**
 * Names each top-level declaration's file: `proto/`-relative for sluice's contract, the canonical
 * name for the packaged health and reflection files, and `google/protobuf/<x>.proto` for the
 * well-known types protobufjs bundles (those carry no file name, so their bundled sources are read
 * to see which file declares what).
 */
function fileNamer(root: protobuf.Root): (object: protobuf.ReflectionObject) => string {
  const packaged = new Map(PACKAGE_FILES.map((file) => [file.source, file.name]));
  const bundled = new Map<string, string>();
  for (const file of root.files) {
    const json = protobuf.common.get(file) as { nested?: Record<string, unknown> } | null;
    if (json !== null) indexBundled(json.nested ?? {}, '', file, bundled);
  }
  return (object) => {
    const source = object.filename;
    if (source === null) {
      const name = bundled.get(qualified(object));
      if (name === undefined) throw new Error(`reflection: no file declares ${object.fullName}`);
      return name;
    }
    return packaged.get(source) ?? path.relative(PROTO_DIR, source).split(path.sep).join('/');
  };
}

/** Records the top-level declarations of one bundled well-known-types file. */
function indexBundled(
  nested: Record<string, unknown>,
  prefix: string,
  file: string,
  into: Map<string, string>,
): void {
  for (const [name, value] of Object.entries(nested)) {
    const node = value as { fields?: unknown; values?: unknown; methods?: unknown; nested?: never };
    const full = prefix === '' ? name : `${prefix}.${name}`;
    if (node.fields !== undefined || node.values !== undefined || node.methods !== undefined) {
      into.set(full, file);
    } else if (node.nested !== undefined) {
      indexBundled(node.nested, full, file, into);
    }
  }
}

/** The fully-qualified name without the leading dot. */
function qualified(object: protobuf.ReflectionObject): string {
  return object.fullName.replace(/^\./, '');
}

/** The outermost message, enum or service that contains `object`. */
function topLevel(object: protobuf.ReflectionObject): protobuf.ReflectionObject {
  let current = object;
  while (current.parent instanceof protobuf.Type) current = current.parent;
  return current;
}

/** Every name a client may look a symbol up by, mapped to the file that declares it. */
function indexSymbols(
  object: protobuf.ReflectionObject,
  file: string,
  symbols: Map<string, string>,
): void {
  const name = qualified(object);
  symbols.set(name, file);
  if (object instanceof protobuf.Type) {
    for (const field of object.fieldsArray) symbols.set(`${name}.${field.name}`, file);
    for (const oneof of object.oneofsArray) symbols.set(`${name}.${oneof.name}`, file);
    for (const nested of object.nestedArray) indexSymbols(nested, file, symbols);
  } else if (object instanceof protobuf.Enum) {
    // Enum values are scoped like their enum's siblings, as in C++.
    const scope = name.slice(0, name.lastIndexOf('.') + 1);
    for (const value of Object.keys(object.values)) symbols.set(`${scope}${value}`, file);
  } else if (object instanceof protobuf.Service) {
    for (const method of object.methodsArray) symbols.set(`${name}.${method.name}`, file);
  }
}

/** `FieldDescriptorProto.Type` numbers of the scalar types. */
const SCALAR_TYPES: Readonly<Record<string, number>> = {
  double: 1,
  float: 2,
  int64: 3,
  uint64: 4,
  int32: 5,
  fixed64: 6,
  fixed32: 7,
  bool: 8,
  string: 9,
  bytes: 12,
  uint32: 13,
  sfixed32: 15,
  sfixed64: 16,
  sint32: 17,
  sint64: 18,
};
const TYPE_MESSAGE = 11;
const TYPE_ENUM = 14;
const LABEL_OPTIONAL = 1;
const LABEL_REPEATED = 3;

type Reference = (type: protobuf.ReflectionObject | null) => string;

/** protoc's JSON name: underscores dropped, the letter after each one upper-cased. */
function jsonName(name: string): string {
  return name.replace(/_+([a-zA-Z0-9]?)/g, (_m, next: string) => next.toUpperCase());
}

/** A `DescriptorProto` (plain object) for a message, with map entries spelled out as protoc does. */
function messageProto(type: protobuf.Type, referenced: Reference): object {
  const fields: object[] = [];
  const mapEntries: object[] = [];
  for (const field of type.fieldsArray) {
    if (field instanceof protobuf.MapField) {
      const entryName = `${field.name
        .split('_')
        .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
        .join('')}Entry`;
      mapEntries.push({
        name: entryName,
        field: [
          scalarOrReference('key', 1, field.keyType, null, LABEL_OPTIONAL, referenced),
          scalarOrReference('value', 2, field.type, field.resolvedType, LABEL_OPTIONAL, referenced),
        ],
        options: { mapEntry: true },
      });
      fields.push({
        name: field.name,
        jsonName: jsonName(field.name),
        number: field.id,
        label: LABEL_REPEATED,
        type: TYPE_MESSAGE,
        typeName: `.${qualified(type)}.${entryName}`,
      });
      continue;
    }
    const proto: Record<string, unknown> = scalarOrReference(
      field.name,
      field.id,
      field.type,
      field.resolvedType,
      field.repeated ? LABEL_REPEATED : LABEL_OPTIONAL,
      referenced,
    );
    if (field.partOf !== null) proto['oneofIndex'] = type.oneofsArray.indexOf(field.partOf);
    fields.push(proto);
  }
  return {
    name: type.name,
    field: fields,
    nestedType: [
      ...type.nestedArray
        .filter((nested): nested is protobuf.Type => nested instanceof protobuf.Type)
        .map((nested) => messageProto(nested, referenced)),
      ...mapEntries,
    ],
    enumType: type.nestedArray
      .filter((nested): nested is protobuf.Enum => nested instanceof protobuf.Enum)
      .map(enumProto),
    oneofDecl: type.oneofsArray.map((oneof) => ({ name: oneof.name })),
  };
}

/** A `FieldDescriptorProto` for a scalar, message or enum field. */
function scalarOrReference(
  name: string,
  number: number,
  typeName: string,
  resolved: protobuf.Type | protobuf.Enum | null,
  label: number,
  referenced: Reference,
): Record<string, unknown> {
  const proto: Record<string, unknown> = {
    name,
    jsonName: jsonName(name),
    number,
    label,
  };
  const scalar = SCALAR_TYPES[typeName];
  if (scalar !== undefined) {
    proto['type'] = scalar;
  } else {
    proto['type'] = resolved instanceof protobuf.Enum ? TYPE_ENUM : TYPE_MESSAGE;
    proto['typeName'] = referenced(resolved);
  }
  return proto;
}

/** An `EnumDescriptorProto` (plain object). */
function enumProto(type: protobuf.Enum): object {
  return {
    name: type.name,
    value: Object.entries(type.values).map(([name, number]) => ({ name, number })),
  };
}

/** A `ServiceDescriptorProto` (plain object). */
function serviceProto(service: protobuf.Service, referenced: Reference): object {
  return {
    name: service.name,
    method: service.methodsArray.map((method) => {
      method.resolve();
      return {
        name: method.name,
        inputType: referenced(method.resolvedRequestType),
        outputType: referenced(method.resolvedResponseType),
        clientStreaming: method.requestStream === true,
        serverStreaming: method.responseStream === true,
      };
    }),
  };
}
