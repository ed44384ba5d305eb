/**
 * What every mode of `npm run bench -- MODE` does around its measurements: parse the flags (a
 * usage error prints the usage and exits 2), run, hand the results to the caller, print them as
 * a report or as JSON (exit 0), or say why it failed (exit 1).
 */
export interface BenchMode<Options extends { json: boolean }, Results> {
  /** For the failure line: "The NAME benchmark failed". */
  name: string;
  parse(argv: string[]): Options;
  /** The error class `parse` throws for bad flags. */
  usageError: new (...args: never[]) => Error;
  run(options: Options): Promise<Results>;
  format(results: Results): string;
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
    return 0;
  } catch (error) {
    output.progress(
      `The ${mode.name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`,
    );
    return 1;
  }
}
