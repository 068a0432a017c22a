/**
 * protobufjs roots for the contract tests that hold proto/ to Envoy's published protos (the copy
 * in @grpc/grpc-js-xds, `ENVOY_INCLUDE_DIRS`): load one file into a fresh root against chosen
 * include dirs, list what a root declares, and list where two roots disagree.
 */
import fs from 'node:fs';
import path from 'node:path';
import protobuf from 'protobufjs';

/**
 * Load `file` (a path relative to an include dir, or absolute) and its imports into a fresh root
 * with snake_case field names, each import resolved against `includeDirs` in order.
 */
export function loadProtoRoot(file: string, includeDirs: readonly string[]): protobuf.Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => {
    if (path.isAbsolute(target)) return target;
    for (const dir of includeDirs) {
      const candidate = path.join(dir, target);
      if (fs.existsSync(candidate)) return candidate;
    }
    // protobufjs carries the google/protobuf well-known types itself.
    return target;
  };
  root.loadSync(file, { keepCase: true });
  root.resolveAll();
  return root;
}

/** What a root declares that the contract tests compare: messages, enums and services. */
type Declaration = protobuf.Type | protobuf.Enum | protobuf.Service;

/**
 * Every message, enum and service under the packages `namespaces` of `root` (nested ones
 * included), by full name without the leading dot.
 */
export function protoDeclarations(
  root: protobuf.Root,
  namespaces: readonly string[],
): Map<string, Declaration> {
  const found = new Map<string, Declaration>();
  const visit = (ns: protobuf.NamespaceBase): void => {
    for (const nested of ns.nestedArray) {
      if (
        nested instanceof protobuf.Type ||
        nested instanceof protobuf.Enum ||
        nested instanceof protobuf.Service
      ) {
        found.set(nested.fullName.slice(1), nested);
      }
      if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) visit(nested);
    }
  };
  for (const name of namespaces) {
    const ns = root.lookup(name);
    if (ns instanceof protobuf.Namespace) visit(ns);
  }
  return found;
}

/** A field as the wire and the JSON mapping see it: number, type, label, map and oneof. */
function fieldShape(field: protobuf.Field): string {
  return JSON.stringify({
    id: field.id,
    type: field.resolvedType ? field.resolvedType.fullName : field.type,
    repeated: field.repeated,
    map: field.map,
    oneof: field.partOf?.name,
  });
}

/** A method as a client sees it: request and response types and which side streams. */
function methodShape(method: protobuf.Method): string {
  return JSON.stringify({
    request: method.resolvedRequestType?.fullName,
    response: method.resolvedResponseType?.fullName,
    requestStream: method.requestStream ?? false,
    responseStream: method.responseStream ?? false,
  });
}

/** Where two roots disagree, and how many fields, enum values and methods were compared. */
export interface ProtoComparison {
  /** One line per disagreement (`<full name>: ...`); empty when `ours` matches `theirs`. */
  readonly mismatches: string[];
  /** Fields, enum values and methods found on both sides and compared. */
  readonly compared: number;
}

/**
 * Compare every message, enum and service `ours` declares under `namespaces` with the one of the
 * same full name in `theirs`: each field must exist there with the same number, type, label, map
 * and oneof, each enum value with the same number, each method with the same types and streams.
 * A field, value or method named in `newerThanTheirs` may be missing from `theirs` (a copy older
 * than the API), but must match where it exists.
 */
export function compareProtos(
  ours: protobuf.Root,
  theirs: protobuf.Root,
  namespaces: readonly string[],
  newerThanTheirs: ReadonlySet<string> = new Set(),
): ProtoComparison {
  const mismatches: string[] = [];
  let compared = 0;
  /** Compare one member found on our side; `theirShape` undefined when theirs lacks it. */
  const member = (full: string, ourShape: string, theirShape: string | undefined): void => {
    if (theirShape === undefined) {
      if (!newerThanTheirs.has(full)) mismatches.push(`${full}: not in their protos`);
      return;
    }
    compared++;
    if (ourShape !== theirShape) mismatches.push(`${full}: ours ${ourShape}, theirs ${theirShape}`);
  };
  for (const [name, declared] of protoDeclarations(ours, namespaces)) {
    const other = theirs.lookup(name);
    if (declared instanceof protobuf.Type) {
      if (!(other instanceof protobuf.Type)) {
        mismatches.push(`${name}: no such message in their protos`);
        continue;
      }
      for (const field of declared.fieldsArray) {
        const match = other.fields[field.name];
        member(`${name}.${field.name}`, fieldShape(field), match && fieldShape(match));
      }
    } else if (declared instanceof protobuf.Enum) {
      if (!(other instanceof protobuf.Enum)) {
        mismatches.push(`${name}: no such enum in their protos`);
        continue;
      }
      for (const [value, id] of Object.entries(declared.values)) {
        const match = other.values[value];
        member(`${name}.${value}`, String(id), match === undefined ? undefined : String(match));
      }
    } else {
      if (!(other instanceof protobuf.Service)) {
        mismatches.push(`${name}: no such service in their protos`);
        continue;
      }
      for (const method of declared.methodsArray) {
        const match = other.methods[method.name];
        member(`${name}.${method.name}`, methodShape(method), match && methodShape(match));
      }
    }
  }
  return { mismatches, compared };
}
