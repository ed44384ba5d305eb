/**
 * What every mode of `npm run bench -- MODE` does around its measurements: parse the flags (a
 * usage error prints the usage and exits 2), run, hand the results to the caller, print them as
 * a report or as JSON (exit 0, or 1 when a mode that checks something found it broken), or say
 * why it failed (exit 1).
 */
import { parseArgs } from 'node:util';

/**
 * A mode's flags: each of `names` takes a value, each of `switches` none, plus `--json` and
 * `--help`. A flag that is not one of them, or `--help`, throws `usageError` with the usage.
 */
export function parseModeFlags<Name extends string, Switch extends string = never>(
  argv: string[],
  names: readonly Name[],
  usage: string,
  usageError: (message: string) => Error,
  switches: readonly Switch[] = [],
): { [Key in Name]?: string } & { [Key in Switch]?: boolean } & { json: boolean } {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        ...Object.fromEntries(names.map((name) => [name, { type: 'string' as const }])),
        ...Object.fromEntries(switches.map((name) => [name, { type: 'boolean' as const }])),
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw usageError(`${(error as Error).message}\n${usage}`);
  }
  if (values.help === true) throw usageError(usage);
  return {
    ...(values as { [Key in Name]?: string } & { [Key in Switch]?: boolean }),
    json: values.json === true,
  };
}

export interface BenchMode<Options extends { json: boolean }, Results> {
  /** For the failure line: "The NAME benchmark failed". */
  name: string;
  parse(argv: string[]): Options;
  /** The error class `parse` throws for bad flags. */
  usageError: new (...args: never[]) => Error;
  run(options: Options): Promise<Results>;
  format(results: Results): string;
  /** For a mode that checks something: false when it found it broken (exit 1, report printed). */
  passed?(results: Results): boolean;
}

export async function runBenchMode<Options extends { json: boolean }, Results>(
  mode: BenchMode<Options, Results>,
  argv: string[],
  output: {
    out(text: string): void;
    progress(text: string): void;
    results?(results: Results): void;
  },
): Promise<number> {
  let options: Options;
  try {
    options = mode.parse(argv);
  } catch (error) {
    if (!(error instanceof mode.usageError)) throw error;
    output.progress(error.message);
    return 2;
  }
  try {
    const results = await mode.run(options);
    output.results?.(results);
    output.out(options.json ? JSON.stringify(results, null, 2) : mode.format(results));
    return mode.passed?.(results) === false ? 1 : 0;
  } catch (error) {
    output.progress(
      `The ${mode.name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return 1;
  }
}
