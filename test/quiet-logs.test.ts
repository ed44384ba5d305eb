/**
 * Quiet by default: many events of one kind in one run are one line with the count and the first
 * few ids, on a terminal and in JSON logs; `--log-level debug` still logs each. Held to the demo,
 * whose fake server has no bytes for some files and answers some requests with faults.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Logger } from '../src/log.js';
import { RepeatedEvents, type RepeatedKind } from '../src/repeated-events.js';
import { runCli, temporaryDirectory } from './support.js';

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

const jsonLines = (logs: string): LogLine[] =>
  logs
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as LogLine);

const NOT_FOUND = 'File content not found on the server (404)';
const INFO = 30;
const DEBUG = 20;

describe('the demo, quiet by default', () => {
  let directory: ReturnType<typeof temporaryDirectory>;
  beforeAll(() => {
    directory = temporaryDirectory();
  });
  afterAll(() => directory.remove());

  it('says each kind of event once in JSON logs: the files without content in one line', async () => {
    const result = await runCli(['demo', '--db', join(directory.path, 'json.db')], {});
    expect(result.code).toBe(0);
    const shown = jsonLines(result.logs).filter(({ level }) => level >= INFO);
    const messages = shown.map(({ msg }) => msg);
    expect(messages.filter((msg, index) => messages.indexOf(msg) !== index)).toEqual([]);
    expect(messages).not.toContain(NOT_FOUND);
    const summary = shown.find(({ msg }) => msg.startsWith(`${NOT_FOUND} for `))!;
    expect(summary, result.logs).toBeDefined();
    expect(summary.count).toBeGreaterThan(5);
    expect(summary.ids).toHaveLength(5);
    expect(summary.msg).toBe(
      `${NOT_FOUND} for ${String(summary.count)} files (${(summary.ids as string[]).join(', ')} and ${String(
        (summary.count as number) - 5,
      )} more)`,
    );
    // The stored outcome says the same number.
    expect(result.stdout).toContain(`${String(summary.count)} missing (404)`);
    // Retries: one line per resource or for all file contents, never one per attempt.
    const retries = shown.filter(({ msg }) => msg.startsWith('Request failed; retrying'));
    expect(retries.length).toBeGreaterThan(0);
    const groups = retries.map((line) => String(line.group ?? line.path));
    expect(new Set(groups).size).toBe(groups.length);
  });

  it('says each kind of event once on a terminal', async () => {
    const result = await runCli(
      ['demo', '--db', join(directory.path, 'pretty.db'), '--log-format', 'pretty'],
      {},
    );
    expect(result.code).toBe(0);
    const lines = result.logs
      .split('\n')
      .map((line) => line.replace(/^\[[\d:.]+\]\s*/, '').trim())
      .filter((line) => /^(INFO|WARN|ERROR)/.test(line));
    expect(lines.filter((line, index) => lines.indexOf(line) !== index)).toEqual([]);
    expect(lines.filter((line) => line.includes(NOT_FOUND))).toEqual([
      expect.stringMatching(
        /^WARN.*: File content not found on the server \(404\) for \d+ files \(\d+(, \d+){4} and \d+ more\)( \{.*\})?$/,
      ),
    ]);
  });

  it('logs each event at debug level, and the summary as well', async () => {
    const result = await runCli(
      ['demo', '--db', join(directory.path, 'debug.db'), '--log-level', 'debug'],
      {},
    );
    expect(result.code).toBe(0);
    const lines = jsonLines(result.logs);
    const each = lines.filter(({ msg, level }) => msg === NOT_FOUND && level === DEBUG);
    const summary = lines.find(({ msg }) => msg.startsWith(`${NOT_FOUND} for `))!;
    expect(each.length).toBe(summary.count);
    expect(new Set(each.map(({ fileId }) => fileId)).size).toBe(each.length);
    expect(each.slice(0, 5).map(({ fileId }) => fileId)).toEqual(summary.ids);
    expect(
      lines.filter(
        ({ msg, level }) => msg.startsWith('Request failed; retrying (') && level === DEBUG,
      ).length,
    ).toBeGreaterThan(0);
  });
});

describe('RepeatedEvents', () => {
  const kind: RepeatedKind = {
    level: 'warn',
    message: 'Thing failed',
    summary: (count, group) => `Thing failed ${count} times in ${group ?? 'all'}`,
  };
  const record = () => {
    const logged: Array<{ level: string; fields: Record<string, unknown>; message: string }> = [];
    const at = (level: string) => (fields: Record<string, unknown>, message: string) =>
      logged.push({ level, fields, message });
    const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
    return { logged, events: new RepeatedEvents(logger as unknown as Logger) };
  };

  it('logs a kind seen once as the event itself', () => {
    const { logged, events } = record();
    events.add(kind, { id: '7', fields: { id: 7 } });
    events.flush();
    expect(logged).toEqual([
      { level: 'debug', fields: { id: 7 }, message: 'Thing failed' },
      { level: 'warn', fields: { id: 7 }, message: 'Thing failed' },
    ]);
  });

  it('sums per group, names the first five ids with how often each came, and forgets at flush', () => {
    const { logged, events } = record();
    for (const id of ['1', '1', '2', '3', '4', '5', '6', '7']) events.add(kind, { id, group: 'a' });
    events.add(kind, { id: 'x', group: 'b' });
    events.add(kind, { id: 'y', group: 'b' });
    events.flush();
    events.flush();
    const shown = logged.filter(({ level }) => level === 'warn');
    expect(shown.map(({ message }) => message)).toEqual([
      'Thing failed 8 times in a (1 ×2, 2, 3, 4, 5 and 2 more)',
      'Thing failed 2 times in b (x, y)',
    ]);
    expect(shown[0]!.fields).toEqual({ group: 'a', count: 8, ids: ['1', '2', '3', '4', '5'] });
    expect(logged.filter(({ level }) => level === 'debug')).toHaveLength(10);
  });
});
