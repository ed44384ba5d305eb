import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** A dialect's name, as a test of which dialect a warehouse is would write it. */
const DIALECT_NAME = '/^(sqlite|postgres)$/';
const DIALECT_TEST =
  'What differs between the dialects lives in src/warehouse/<dialect>/: ask the dialect (its DialectRules, src/warehouse/open.ts) instead of testing its name here.';

/**
 * Dialect tests (`=== 'postgres'`, `case 'sqlite':`) are written inside the dialect folders only
 * (docs/layout.md), and in the URL's parser, which reads which dialect a URL names.
 */
export const DIALECT_TESTS_ALLOWED = [
  'src/warehouse/sqlite/**',
  'src/warehouse/postgres/**',
  // The URL's parser: it decides the dialect, and what each kind of target is (a file or not).
  'src/warehouse/url.ts',
];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_' },
      ],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: DIALECT_TESTS_ALLOWED,
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: `BinaryExpression[operator=/^[!=]==?$/]:matches([left.value=${DIALECT_NAME}], [right.value=${DIALECT_NAME}])`,
          message: DIALECT_TEST,
        },
        { selector: `SwitchCase[test.value=${DIALECT_NAME}]`, message: DIALECT_TEST },
      ],
    },
  },
);
