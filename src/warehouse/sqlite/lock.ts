/**
 * The SQLite one-writer lock: a row in `_ocs_lock` with a heartbeat. A holder whose heartbeat is
 * too old, or whose process is gone from this host, is taken over.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Lock, LockHolder } from '../../interfaces.js';
import { LockHeldError, WarehouseError } from '../../errors.js';
import { nowIso } from '../bookkeeping.js';
import type { SqliteConnection } from './connection.js';
import {
  LOCK_NAME,
  LOCK_POLL_MS,
  heartbeatIntervalMs,
  lockLostError,
  messageOf,
  processExists,
  type WarehouseLogger,
} from '../writer-lock.js';

export class SqliteWriterLock {
  private held?: { token: string; heartbeat: NodeJS.Timeout; lost: boolean };

  constructor(
    private readonly connection: SqliteConnection,
    private readonly staleAfterMs: number,
    private readonly logger?: WarehouseLogger,
  ) {}

  /** Throws when this process held the lock and another one took it over. */
  assertNotLost(): void {
    if (this.held?.lost) {
      throw lockLostError(
        'another process took it over',
        'Another ocs-sync took over a lock it judged stale; check lock.stale_after_seconds.',
      );
    }
  }

  async acquire(waitMs: number): Promise<Lock> {
    if (this.held)
      throw new WarehouseError('This warehouse connection already holds the writer lock.');
    const started = performance.now();
    for (;;) {
      const attempt = await this.connection.exclusive(() => this.tryTake());
      if ('token' in attempt) return this.startHolding(attempt.token);
      const waited = performance.now() - started;
      if (waited >= waitMs) throw new LockHeldError(attempt.holder, waited);
      await sleep(Math.min(LOCK_POLL_MS, waitMs - waited));
    }
  }

  private tryTake(): { token: string } | { holder: LockHolder } {
    const { db } = this.connection;
    return this.connection.writeTransaction(() => {
      const row = db
        .prepare('SELECT pid, host, since, heartbeat_at FROM _ocs_lock WHERE name = ?')
        .get(LOCK_NAME) as
        { pid: number; host: string; since: string; heartbeat_at: string } | undefined;
      if (row) {
        const holder: LockHolder = { pid: row.pid, host: row.host, since: row.since };
        const stale = this.staleReason(row);
        if (!stale) return { holder };
        this.logger?.warn({ holder, reason: stale }, 'Taking over a stale warehouse lock');
        db.prepare('DELETE FROM _ocs_lock WHERE name = ?').run(LOCK_NAME);
      }
      const token = randomUUID();
      const now = nowIso();
      db.prepare(
        'INSERT INTO _ocs_lock (name, pid, host, since, heartbeat_at, owner_token) VALUES (?, ?, ?, ?, ?, ?)',
      ).run(LOCK_NAME, process.pid, hostname(), now, now, token);
      return { token };
    });
  }

  /** Why a held lock may be taken over, or undefined while its holder looks alive. */
  private staleReason(row: {
    pid: number;
    host: string;
    heartbeat_at: string;
  }): string | undefined {
    const beat = Date.parse(row.heartbeat_at);
    if (!Number.isFinite(beat) || Date.now() - beat > this.staleAfterMs) {
      return `no heartbeat since ${row.heartbeat_at}`;
    }
    if (row.host === hostname() && !processExists(row.pid)) {
      return `process ${row.pid} no longer exists`;
    }
    return undefined;
  }

  private startHolding(token: string): Lock {
    const { connection } = this;
    const heartbeat = setInterval(() => {
      void connection
        .exclusive(() => {
          const result = connection.db
            .prepare('UPDATE _ocs_lock SET heartbeat_at = ? WHERE name = ? AND owner_token = ?')
            .run(nowIso(), LOCK_NAME, token);
          if (result.changes === 0 && this.held?.token === token) {
            this.held.lost = true;
            clearInterval(heartbeat);
            this.logger?.warn(
              { warehouse: connection.description },
              'Another process took over the warehouse lock',
            );
          }
        })
        .catch((error: unknown) => {
          if (!connection.isClosed)
            this.logger?.warn(
              { err: messageOf(error) },
              'Could not refresh the warehouse lock heartbeat',
            );
        });
    }, heartbeatIntervalMs(this.staleAfterMs));
    heartbeat.unref();
    this.held = { token, heartbeat, lost: false };
    return { release: () => this.release(token) };
  }

  /** Releases the lock if this process holds it (close() calls it too). */
  async releaseHeld(): Promise<void> {
    if (this.held) await this.release(this.held.token);
  }

  private async release(token: string): Promise<void> {
    if (this.held?.token !== token) return;
    clearInterval(this.held.heartbeat);
    this.held = undefined;
    if (this.connection.isClosed) return;
    await this.connection.exclusive(() => {
      this.connection.db
        .prepare('DELETE FROM _ocs_lock WHERE name = ? AND owner_token = ?')
        .run(LOCK_NAME, token);
    });
  }
}
