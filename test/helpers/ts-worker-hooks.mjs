/**
 * Module hooks that let a worker thread started by the sources under test run them: vitest
 * transforms the TypeScript it imports itself, but a `node:worker_threads` Worker (the rule set
 * build, src/config/offthread.ts) is plain Node. Registered by ./ts-worker-register.mjs, which the
 * vitest projects pass in `execArgv`; workers inherit it. A `./x.js` import that does not exist
 * next to an `x.ts` resolves to the `.ts`, which is transpiled (types dropped, no type check).
 * Built code (dist/) never goes through here.
 */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

/** The TypeScript compiler, loaded on the first `.ts` file only. */
let typescript;

export async function resolve(specifier, context, nextResolve) {
  if (specifier.endsWith('.js') && (specifier.startsWith('.') || specifier.startsWith('file:'))) {
    const url = new URL(specifier, context.parentURL);
    if (url.protocol === 'file:' && !existsSync(fileURLToPath(url))) {
      const ts = new URL(`${url.href.slice(0, -3)}.ts`);
      if (existsSync(fileURLToPath(ts)))
        return { url: ts.href, format: 'module', shortCircuit: true };
    }
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !url.endsWith('.ts')) return nextLoad(url, context);
  typescript ??= (await import('typescript')).default;
  const fileName = fileURLToPath(url);
  const { outputText } = typescript.transpileModule(readFileSync(fileName, 'utf8'), {
    fileName,
    compilerOptions: {
      module: typescript.ModuleKind.ESNext,
      target: typescript.ScriptTarget.ES2023,
      verbatimModuleSyntax: true,
    },
  });
  return { format: 'module', source: outputText, shortCircuit: true };
}
