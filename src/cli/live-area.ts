/**
 * The bottom line of a terminal, owned by one writer: log lines pass through it, so a line is
 * never drawn on top of the progress status. The status is cleared before each log line and
 * redrawn after it. Off a terminal there is no status line and log lines pass untouched.
 */
import { Writable } from 'node:stream';

export type TerminalStream = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

const CLEAR_LINE = '\r\u001b[2K';

export class LiveArea {
  private status = '';
  /** Where log lines go: through the area, so they land above the status line. */
  readonly logStream: Writable & { isTTY?: boolean };

  constructor(readonly stream: TerminalStream) {
    this.logStream = Object.assign(
      new Writable({
        write: (chunk: Buffer | string, _encoding, callback) => {
          this.above(chunk.toString());
          callback();
        },
      }),
      { isTTY: stream.isTTY },
    );
  }

  get live(): boolean {
    return this.stream.isTTY === true;
  }

  /** Writes text (whole lines) above the status line. */
  above(text: string): void {
    if (!this.live || this.status === '') {
      this.stream.write(text);
      return;
    }
    this.stream.write(`${CLEAR_LINE}${text}${this.fitted()}`);
  }

  /** Replaces the status line (terminal only). */
  show(status: string): void {
    if (!this.live) return;
    this.status = status;
    this.stream.write(`${CLEAR_LINE}${this.fitted()}`);
  }

  /** Removes the status line. */
  clear(): void {
    if (!this.live || this.status === '') return;
    this.status = '';
    this.stream.write(CLEAR_LINE);
  }

  private fitted(): string {
    const width = Math.max(20, (this.stream.columns ?? 100) - 1);
    return this.status.length > width ? `${this.status.slice(0, width - 1)}…` : this.status;
  }
}
