// ESLint flat config: typescript-eslint with type-aware rules (see ../shared/STYLE.md, Tooling).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
    // Plain JavaScript helpers (scripts/*.mjs) run by npm before anything is built: no types.
    files: ['scripts/**/*.mjs'],
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
      },
    },
  },
);
