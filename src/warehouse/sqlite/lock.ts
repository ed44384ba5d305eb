/**
 * The SQLite one-writer lock: an exclusive lock on a side file beside the warehouse
 * (`<warehouse>-lock`, ../../file-lock.ts), held for the run. The kernel releases it when the
 * process dies, so a restart takes over at once, whatever its pid and host name. `_ocs_lock` only
 * tells people and waiting processes who holds it (pid, host, since); a heartbeat keeps its
 * `heartbeat_at` fresh and checks the side file is still the one locked.
 *
 * Only this connection's thread opens the side file: the writer thread (writer-thread.ts) commits
 * the pages this process hands it while the lock is held, and close() lets it finish before the
 * lock goes.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { WarehouseError } from '../../errors.js';
import { FileLock } from '../../file-lock.js';
import type { PrivateModes } from '../../private-files.js';
import { nowIso } from '../bookkeeping.js';
import type { LockRecord } from '../reader.js';
import type { SqliteConnection } from './connection.js';
import {
  LOCK_NAME,
  heartbeatIntervalMs,
  lockLostError,
  messageOf,
  nextLockAttempt,
  type TakenLock,
  type WarehouseLogger,
} from '../writer-lock.js';

export class SqliteWriterLock {
  private held?: { token: string; heartbeat: NodeJS.Timeout; file?: FileLock; lost: boolean };

  /** `lockFile`: the side file; undefined for `:memory:`, which no other process can open. */
  constructor(
    private readonly connection: SqliteConnection,
    private readonly lockFile: string | undefined,
    private readonly modes: PrivateModes | undefined,
    private readonly staleAfterMs: number,
    private readonly logger?: WarehouseLogger,
  ) {}

  /** Throws when the side file this process locked was deleted or replaced. */
  assertNotLost(): void {
    if (this.held?.lost) {
      throw lockLostError(
        `its lock file ${this.lockFile} was deleted or replaced`,
        'Leave the -lock file beside the warehouse alone while ocs-sync runs; run again.',
      );
    }
  }

  async acquire(waitMs: number, signal?: AbortSignal): Promise<TakenLock> {
    if (this.held)
      throw new WarehouseError('This warehouse connection already holds the writer lock.');
    const started = performance.now();
    for (let attempt = 0; ; attempt += 1) {
      const file = this.lockFile === undefined ? undefined : this.tryLockFile();
      if (this.lockFile === undefined || file) return this.startHolding(file);
      const holder = await this.connection.exclusive(() => this.recordedHolder());
      await nextLockAttempt({ attempt, started, waitMs, signal, holder, logger: this.logger });
    }
  }

  private tryLockFile(): FileLock | undefined {
    const path = this.lockFile!;
    try {
      return FileLock.tryTake(path, this.modes);
    } catch (error) {
      const foreign = (error as { code?: string }).code === 'SQLITE_NOTADB';
      throw new WarehouseError(
        `The writer lock file ${path} of ${this.connection.description} cannot be used: ${messageOf(error)}`,
        {
          hint: foreign
            ? 'It is not the (empty) file ocs-sync locks while it writes, and holds nothing of ours: remove it and run again.'
            : `ocs-sync creates it beside the warehouse and locks it while it writes: give this user write access to ${path} and its folder (a read-only or full disk cannot hold a writer).`,
          cause: error,
        },
      );
    }
  }

  private recordedHolder(): LockRecord | undefined {
    const row = this.connection.db
      .prepare('SELECT pid, host, since, heartbeat_at FROM _ocs_lock WHERE name = ?')
      .get(LOCK_NAME) as
      { pid: number; host: string; since: string; heartbeat_at: string } | undefined;
    return row
      ? { pid: row.pid, host: row.host, since: row.since, heartbeatAt: row.heartbeat_at }
      : undefined;
  }

  /** Records this process as the holder; a record left behind belonged to one that ended. */
  private async startHolding(file: FileLock | undefined): Promise<TakenLock> {
    const { connection } = this;
    const token = randomUUID();
    let previous: LockRecord | undefined;
    try {
      previous = await connection.exclusive(
        () =>
          connection.writeTransaction(() => {
            const left = this.recordedHolder();
            const now = nowIso();
            connection.db
              .prepare(
                `INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)
                 ON CONFLICT (name) DO UPDATE SET pid = excluded.pid, host = excluded.host, since = excluded.since,
                 heartbeat_at = excluded.heartbeat_at, owner_token = excluded.owner_token`,
              )
              .run(LOCK_NAME, process.pid, hostname(), now, now, token);
            return left;
          }),
        'Recording the writer lock',
      );
    } catch (error) {
      file?.release();
      throw error;
    }
    const heartbeat = setInterval(() => this.beat(token), heartbeatIntervalMs(this.staleAfterMs));
    heartbeat.unref();
    this.held = { token, heartbeat, file, lost: false };
    return { release: () => this.release(token), previous };
  }

  /** Keeps `heartbeat_at` fresh for people, and checks the locked file is still in its place. */
  private beat(token: string): void {
    const held = this.held;
    if (held?.token !== token || held.lost) return;
    if (held.file && !held.file.stillInPlace()) {
      held.lost = true;
      clearInterval(held.heartbeat);
      this.logger?.warn(
        { warehouse: this.connection.description, lockFile: this.lockFile },
        'The writer lock file was deleted or replaced; stopping writes',
      );
      return;
    }
    void this.connection
      .exclusive(() => {
        this.connection.db
          .prepare('UPDATE _ocs_lock SET heartbeat_at = ? WHERE name = ? AND owner_token = ?')
          .run(nowIso(), LOCK_NAME, token);
      })
      .catch((error: unknown) => {
        if (!this.connection.isClosed)
          this.logger?.warn(
            { err: messageOf(error) },
            'Could not refresh the warehouse lock heartbeat',
          );
      });
  }

  /** Releases the lock if this process holds it (close() calls it too). */
  async releaseHeld(): Promise<void> {
    if (this.held) await this.release(this.held.token);
  }

  private async release(token: string): Promise<void> {
    const held = this.held;
    if (held?.token !== token) return;
    clearInterval(held.heartbeat);
    this.held = undefined;
    try {
      if (!this.connection.isClosed) {
        await this.connection.exclusive(() => {
          this.connection.db
            .prepare('DELETE FROM _ocs_lock WHERE name = ? AND owner_token = ?')
            .run(LOCK_NAME, token);
        });
      }
    } catch (error) {
      // The record is information only: the lock itself goes with the file's connection below.
      this.logger?.warn({ err: messageOf(error) }, 'Could not remove the writer lock record');
    } finally {
      held.file?.release();
    }
  }
}
