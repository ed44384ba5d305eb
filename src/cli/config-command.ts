/**
 * `ocs-sync config`: the effective configuration, every setting with its value and where the
 * value came from (default, FILE:LINE, env VARIABLE, flag). Secrets show only as set / not set,
 * URLs without their password.
 */
import { loadConfigExplained } from '../config/load.js';
import { ExitCode } from '../errors.js';
import type { CommandContext } from './context.js';
import { formatTable } from './output.js';

export async function runConfigCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  const { settings } = loadConfigExplained({
    configPath: context.globals.config,
    env: context.environment.env,
    flags: context.configFlags(),
    needs: { server: false },
    team: context.globals.team,
  });
  if (options.json) {
    context.output.out(
      JSON.stringify(
        Object.fromEntries(
          settings.map((setting) => [
            setting.key,
            { value: setting.value, source: setting.source },
          ]),
        ),
        null,
        2,
      ),
    );
    return ExitCode.ok;
  }
  context.output.out(
    formatTable(
      ['key', 'value', 'source'],
      settings.map((setting) => [setting.key, showValue(setting.value), setting.source]),
    ),
  );
  return ExitCode.ok;
}

function showValue(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? '(none)' : value.join(', ');
  if (typeof value === 'string') return value;
  return JSON.stringify(value);
}
