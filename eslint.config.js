// ESLint flat config: typescript-eslint with type-aware rules (CONTRIBUTING.md, "Lint").
import { readdirSync } from 'node:fs';
import js from '@eslint/js';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/, top to bottom (ARCHITECTURE.md, "Layers"). A module may import from its own
 * layer and from any layer below it, never from one above: no back-arrows, type-only imports
 * included. Each entry lists the layer's files and folders, as paths under src/.
 */
const LAYERS = [
  {
    name: 'the entry points (main, app, workers, cli/, node/, settings*)',
    modules: [
      'main.ts',
      'node/',
      'app.ts',
      'workers.ts',
      'cli/',
      'settings.ts',
      'settings-grpc.ts',
      'settings-reader.ts',
      'settings-redis.ts',
      'settings-telemetry.ts',
      'settings-xds.ts',
      'shutdown-signals.ts',
    ],
  },
  { name: 'console/ (the operator application on top of the service)', modules: ['console/'] },
  { name: 'transport/', modules: ['transport/'] },
  { name: 'service/ and rlqs/', modules: ['service/', 'rlqs/'] },
  { name: 'limiter/ and tracing/', modules: ['limiter/', 'tracing/'] },
  { name: 'config/', modules: ['config/'] },
  { name: 'stores/', modules: ['stores/'] },
  { name: 'model.ts', modules: ['model.ts'] },
  { name: 'algorithms/', modules: ['algorithms/'] },
];

/**
 * Cross-cutting leaves: every layer but model.ts and algorithms/ may import them, and they import
 * nothing but each other.
 */
const LEAVES = {
  name: 'logging/, metrics/, clock.ts, errors.ts and version.ts',
  modules: ['logging/', 'metrics/', 'clock.ts', 'errors.ts', 'version.ts'],
};

/** Deepest folder nesting under src/ the rule covers (transport/h2/, for one, is 2). */
const MAX_DEPTH = 5;

/** A regex escape for module names. */
const escape = (text) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * One no-restricted-imports pattern: imports, from a file `depth` folders below src/, of any of
 * `target`'s modules. Imports are matched as written (`../../settings.js`), so the pattern
 * requires exactly the `../` that climb back to src/ from that depth.
 */
function forbid(layerName, target, depth) {
  const up = depth === 0 ? '\\./' : `(?:\\.\\./){${depth}}`;
  const names = target.modules.map((m) =>
    m.endsWith('/') ? escape(m) : `${escape(m.replace(/\.ts$/, '.js'))}$`,
  );
  return {
    regex: `^${up}(?:${names.join('|')})`,
    message: `Layering (ARCHITECTURE.md, "Layers"): ${layerName} may not import from ${target.name}. Let the lower module declare the type or options it needs, and the upper one pass them in.`,
  };
}

/** The files of `layer` that sit `depth` folders below src/ (0: src/ itself). */
function filesAt(layer, depth) {
  return layer.modules.flatMap((m) => {
    if (!m.endsWith('/')) return depth === 0 ? [`src/${m}`] : [];
    return depth === 0 ? [] : [`src/${m}${'*/'.repeat(depth - 1)}*.ts`];
  });
}

/**
 * Every entry of src/ must be in a layer, and no file deeper than MAX_DEPTH: else the rule would
 * silently not cover it. Fails the lint run with what to change.
 */
function checkCoverage() {
  const known = new Set([...LAYERS, LEAVES].flatMap((layer) => layer.modules));
  const src = new URL('./src/', import.meta.url);
  for (const entry of readdirSync(src, { withFileTypes: true })) {
    const name = entry.isDirectory() ? `${entry.name}/` : entry.name;
    if (name.endsWith('.ts') || entry.isDirectory()) {
      if (!known.has(name)) {
        throw new Error(`eslint.config.js: src/${name} is in no layer; add it to LAYERS or LEAVES`);
      }
    }
  }
  for (const file of readdirSync(src, { recursive: true })) {
    if (file.endsWith('.ts') && file.split('/').length - 1 > MAX_DEPTH) {
      throw new Error(`eslint.config.js: src/${file} is deeper than MAX_DEPTH; raise it`);
    }
  }
}

/**
 * One config block per layer and folder depth: each forbids the layers above it; model.ts and
 * algorithms/ also forbid the leaves, and the leaves forbid every layer.
 */
function layerBlocks() {
  checkCoverage();
  const blocks = [];
  const add = (layer, forbidden) => {
    if (forbidden.length === 0) return;
    for (let depth = 0; depth <= MAX_DEPTH; depth++) {
      const files = filesAt(layer, depth);
      if (files.length === 0) continue;
      blocks.push({
        files,
        rules: {
          'no-restricted-imports': [
            'error',
            { patterns: forbidden.map((target) => forbid(layer.name, target, depth)) },
          ],
        },
      });
    }
  };
  LAYERS.forEach((layer, i) => {
    const bottom = layer.modules.includes('model.ts') || layer.modules.includes('algorithms/');
    add(layer, [...LAYERS.slice(0, i), ...(bottom ? [LEAVES] : [])]);
  });
  add(LEAVES, LAYERS);
  return blocks;
}

export default tseslint.config(
  {
    ignores: [
      'dist/',
      'node_modules/',
      '.cache/',
      'coverage/',
      '.stryker-tmp/',
      'reports/',
      'eslint.config.js',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
      'no-restricted-properties': [
        'error',
        {
          object: 'describe',
          property: 'only',
          message: 'Focused tests skip the rest of the suite.',
        },
        { object: 'it', property: 'only', message: 'Focused tests skip the rest of the suite.' },
        { object: 'test', property: 'only', message: 'Focused tests skip the rest of the suite.' },
      ],
    },
  },
  {
    // No import cycle in src/, type-only imports included (ARCHITECTURE.md, "Layers"): the layer
    // rule below forbids arrows up, this also catches a loop inside one layer. Imports are
    // written with `.js` (NodeNext) and resolve to the `.ts` sources.
    files: ['src/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/extensions': ['.ts', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/resolver-next': [createNodeResolver({ extensionAlias: { '.js': ['.ts', '.js'] } })],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      // Rooms a reader can hold (CONTRIBUTING.md, "Code shape"): comments and blank lines count.
      // The composition root, createApp, is the one function allowed past this, by a comment.
      'max-lines-per-function': ['error', { max: 150 }],
      'max-lines': ['error', { max: 600 }],
    },
  },
  {
    // Plain JavaScript helpers (scripts/*.mjs) run by npm before anything is built, and the
    // module hooks test workers load (test/helpers/*.mjs): no types.
    files: ['scripts/**/*.mjs', 'test/helpers/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly' },
    },
  },
  {
    // Only transport/ maps untyped protobuf shapes; tests poke at raw wire objects too.
    files: ['src/transport/**/*.ts', 'test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  // Layering (ARCHITECTURE.md, "Layers"): no module of src/ imports from a layer above its own.
  ...layerBlocks(),
  {
    // The debug console's page script: plain browser JavaScript, no type information.
    files: ['console/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'module',
      globals: {
        document: 'readonly',
        location: 'readonly',
        fetch: 'readonly',
        URLSearchParams: 'readonly',
        Intl: 'readonly',
        Node: 'readonly',
        setTimeout: 'readonly',
        prompt: 'readonly',
      },
    },
  },
);
