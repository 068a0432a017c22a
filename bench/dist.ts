/**
 * Loads sluice from the production build (`dist/`, what `npm run build` emits and `npm start`
 * runs), typed from `src/`. Benchmarks measure that artifact rather than a second compilation,
 * and the build keeps its asset paths (`proto/`, `envoy/ratelimit/`) relative to `dist/`.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type * as AppModule from '../src/app.js';
import type * as ClockModule from '../src/clock.js';
import type * as KeysModule from '../src/limiter/keys.js';
import type * as LoggerModule from '../src/logging/logger.js';
import type * as SettingsModule from '../src/settings.js';
import type * as MemoryStoreModule from '../src/stores/memory/memory-store.js';
import type * as MappingModule from '../src/transport/grpc/mapping.js';
import type * as ProtoModule from '../src/transport/grpc/proto.js';

/** The repository root: the nearest ancestor of this file holding package.json and src/. */
export const REPO_ROOT = findRepoRoot(path.dirname(fileURLToPath(import.meta.url)));

/** The built CLI entry point. */
export const SLUICE_MAIN = path.join(REPO_ROOT, 'dist', 'main.js');

/** The sluice modules the benchmarks use, loaded from `dist/`. */
export interface Sluice {
  readonly app: typeof AppModule;
  readonly clock: typeof ClockModule;
  readonly keys: typeof KeysModule;
  readonly logger: typeof LoggerModule;
  readonly settings: typeof SettingsModule;
  readonly memoryStore: typeof MemoryStoreModule;
  readonly mapping: typeof MappingModule;
  readonly proto: typeof ProtoModule;
}

/** Import every module of {@link Sluice} from `dist/`; throws naming the fix when it is missing. */
export async function loadSluice(): Promise<Sluice> {
  if (!existsSync(SLUICE_MAIN)) {
    throw new Error(`${SLUICE_MAIN} does not exist: run \`npm run build\` first`);
  }
  const [app, clock, keys, logger, settings, memoryStore, mapping, proto] = await Promise.all([
    load<typeof AppModule>('app.js'),
    load<typeof ClockModule>('clock.js'),
    load<typeof KeysModule>('limiter/keys.js'),
    load<typeof LoggerModule>('logging/logger.js'),
    load<typeof SettingsModule>('settings.js'),
    load<typeof MemoryStoreModule>('stores/memory/memory-store.js'),
    load<typeof MappingModule>('transport/grpc/mapping.js'),
    load<typeof ProtoModule>('transport/grpc/proto.js'),
  ]);
  return { app, clock, keys, logger, settings, memoryStore, mapping, proto };
}

async function load<T>(file: string): Promise<T> {
  return (await import(pathToFileURL(path.join(REPO_ROOT, 'dist', file)).href)) as T;
}

function findRepoRoot(start: string): string {
  for (let dir = start; ;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'src'))) {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no repository root above ${start}`);
    dir = parent;
  }
}
