/** Log settings' allowed values, apart from the schema so the command line can offer them cheaply. */
export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error' | 'fatal' | 'silent';
export type LogFormat = 'json' | 'pretty';

export const LOG_LEVELS = [
  'trace',
  'debug',
  'info',
  'warn',
  'error',
  'fatal',
  'silent',
] as const satisfies readonly LogLevel[];

/** `pretty` on a terminal, JSON lines elsewhere, unless `--log-format` says otherwise. */
export const LOG_FORMATS = ['json', 'pretty'] as const satisfies readonly LogFormat[];
