/** Progress for people watching: a live line on a terminal, periodic log lines otherwise. */
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LiveArea } from '../src/cli/live-area.js';
import { createProgressEvents, createStageProgress } from '../src/cli/progress.js';
import { createLogger } from '../src/log.js';

function capture(
  isTTY: boolean,
): Writable & { isTTY: boolean; columns: number; text: () => string } {
  let written = '';
  const stream = new Writable({
    write(chunk, _encoding, callback) {
      written += chunk.toString();
      callback();
    },
  }) as Writable & { isTTY: boolean; columns: number; text: () => string };
  stream.isTTY = isTTY;
  stream.columns = 120;
  stream.text = () => written;
  return stream;
}

/** The JSON log lines written to a captured stream, none of them drawn with carriage returns. */
function logLines<Line>(stream: { text: () => string }): Line[] {
  expect(stream.text()).not.toContain('\r');
  return stream
    .text()
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Line);
}

/** What a terminal shows: each line as it stands after carriage returns and line clears. */
function screen(text: string): string[] {
  const escape = String.fromCharCode(27);
  return text.split('\n').map((line) => {
    const parts = line.split(`\r${escape}[2K`).flatMap((part) => part.split('\r'));
    return (parts[parts.length - 1] ?? '')
      .split(escape)
      .join('')
      .replace(/\[\d+m/g, '');
  });
}

function drive(
  events: ReturnType<typeof createProgressEvents>,
  clock: { now: number },
  log?: () => void,
): void {
  events.onRunStart?.({ runId: 1, kind: 'incremental', resources: 2 });
  events.onResourceStart?.({ resource: 'users', index: 0, total: 2 });
  clock.now += 1000;
  events.onPageWritten?.({ resource: 'users', rows: 500, valuesAltered: 0 });
  log?.();
  events.onResourceDone?.({} as never);
  events.onResourceStart?.({ resource: 'chat_messages', index: 1, total: 2 });
  for (let page = 0; page < 4; page += 1) {
    clock.now += 10_000;
    events.onPageWritten?.({ resource: 'chat_messages', rows: 1000, valuesAltered: 0 });
    log?.();
  }
  events.onResourceDone?.({} as never);
}

describe('progress', () => {
  it('draws a live line with resource i of n, rows, rows/s and done/total on a terminal', () => {
    const terminal = capture(true);
    const clock = { now: 0 };
    const logs = capture(false);
    drive(
      createProgressEvents(
        createLogger({ level: 'info', destination: logs }),
        new LiveArea(terminal),
        () => clock.now,
      ),
      clock,
    );
    expect(terminal.text()).toMatch(/\[1\/2\] users: 0 rows/);
    expect(terminal.text()).toMatch(
      /\[2\/2\] chat_messages: 4000 rows \| total 4500 rows, 110 rows\/s, 1\/2 done/,
    );
    expect(logs.text()).toBe('');
    // The status line is gone at the end.
    expect(screen(terminal.text()).at(-1)).toBe('');
  });

  it('never draws a log line into the progress line on a terminal', () => {
    const terminal = capture(true);
    const clock = { now: 0 };
    const area = new LiveArea(terminal);
    const logger = createLogger({ level: 'info', pretty: true, destination: area.logStream });
    let count = 0;
    drive(
      createProgressEvents(logger, area, () => clock.now),
      clock,
      () => logger.warn(`Schema: new table number ${++count}`),
    );
    const lines = screen(terminal.text()).filter((line) => line !== '');
    expect(lines).toHaveLength(5);
    for (const line of lines) {
      expect(line).toMatch(/WARN.*Schema: new table number \d$/);
      expect(line).not.toMatch(/rows\/s/);
    }
  });

  it('writes periodic progress log lines, not carriage returns, when not on a terminal', () => {
    const logs = capture(false);
    const clock = { now: 0 };
    drive(
      createProgressEvents(
        createLogger({ level: 'info', destination: logs }),
        new LiveArea(logs),
        () => clock.now,
      ),
      clock,
    );
    const lines = logLines<{ msg: string; rows: number }>(logs);
    // One line per 15 s at most: pages at 21 s and 41 s of the run.
    expect(lines.map((line) => line.rows)).toEqual([2500, 4500]);
    expect(lines[0]?.msg).toMatch(/^Progress: \[2\/2\] chat_messages: 2000 rows/);
  });

  it("draws a command's stages on a terminal: a new stage at once, the same one every 200 ms, cleared at the end", () => {
    const terminal = capture(true);
    const clock = { now: 0 };
    const logs = capture(false);
    const progress = createStageProgress(
      createLogger({ level: 'info', destination: logs }),
      new LiveArea(terminal),
      () => clock.now,
    );
    const chain = { stage: 'checking the audit chain', total: 4000, unit: 'entries' };
    progress.listener({ ...chain, done: 2000 });
    clock.now += 100;
    progress.listener({ ...chain, done: 4000 });
    progress.listener({ stage: 'checking chats', done: 2000, unit: 'versions' });
    clock.now += 250;
    progress.listener({ stage: 'checking chats', done: 3500, unit: 'versions' });
    const drawn = terminal.text();
    expect(drawn).toContain('checking the audit chain: 2,000 of 4,000 entries');
    // Within 200 ms of the last line, the same stage waits.
    expect(drawn).not.toContain('4,000 of 4,000');
    expect(drawn).toContain('checking chats: 2,000 versions');
    expect(drawn).toContain('checking chats: 3,500 versions');
    progress.end();
    expect(screen(terminal.text()).at(-1)).toBe('');
    expect(logs.text()).toBe('');
  });

  it("logs a command's stages every 15 s when not on a terminal", () => {
    const logs = capture(false);
    const clock = { now: 0 };
    const progress = createStageProgress(
      createLogger({ level: 'info', destination: logs }),
      new LiveArea(logs),
      () => clock.now,
    );
    for (let batch = 1; batch <= 10; batch += 1) {
      clock.now += 4000;
      progress.listener({ stage: 'checking chats', done: batch * 2000, unit: 'versions' });
    }
    progress.end();
    const lines = logLines<{ msg: string; done: number }>(logs);
    // At 16 s and 32 s of the run.
    expect(lines.map((line) => line.done)).toEqual([8000, 16000]);
    expect(lines[0]?.msg).toBe('Progress: checking chats: 8,000 versions');
  });
});
