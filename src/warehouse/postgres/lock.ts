/**
 * The PostgreSQL one-writer lock: a session advisory lock on a dedicated connection held until
 * release. When the process dies its session ends and PostgreSQL frees the lock, so no lock ever
 * has to be judged stale. `_ocs_lock` tells waiting processes (and people) who holds it; a
 * heartbeat keeps it fresh and doubles as a probe of the lock connection. If the record
 * disappears (someone removed it by hand) or the connection fails, this process stops writing.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { LockRecord } from '../reader.js';
import { OcsSyncError, WarehouseError } from '../../errors.js';
import { nowIso, toIsoText } from '../bookkeeping.js';
import {
  advisoryLockKey,
  connectionHint,
  safeCause,
  safeMessage,
  type PostgresConnection,
} from './connection.js';
import {
  LOCK_NAME,
  heartbeatIntervalMs,
  lockLostError,
  nextLockAttempt,
  type TakenLock,
  type WarehouseLogger,
} from '../writer-lock.js';

interface HeldLock {
  token: string;
  client: pg.Client;
  lost: boolean;
  heartbeat?: NodeJS.Timeout;
}

export class PostgresWriterLock {
  private heldLock?: HeldLock;

  constructor(
    private readonly connection: PostgresConnection,
    private readonly lockStaleAfterMs: number,
    private readonly logger?: WarehouseLogger,
  ) {}

  private table(name: string): string {
    return this.connection.table(name);
  }

  private get schema(): string {
    return this.connection.schema;
  }

  private get description(): string {
    return this.connection.description;
  }

  /** Throws when the lock connection ended or the lock record was removed. */
  assertNotLost(): void {
    if (this.heldLock?.lost) {
      throw lockLostError(
        'its lock connection ended or its lock record was removed',
        'Run again; check the network to the database and its idle-session settings.',
      );
    }
  }

  async acquire(waitMs: number, signal?: AbortSignal): Promise<TakenLock> {
    this.connection.assertOpen();
    if (this.heldLock) {
      throw new WarehouseError('This warehouse connection already holds the writer lock.');
    }
    const key = advisoryLockKey('writer', this.schema);
    const client = new pg.Client(this.connection.clientConfig);
    const held: HeldLock = { token: randomUUID(), client, lost: false };
    client.on('error', (error) => this.markLockLost(held, 'its connection failed', error));
    client.on('end', () => this.markLockLost(held, 'its connection ended'));
    const started = performance.now();
    let previous: LockRecord | undefined;
    try {
      await client.connect();
      for (let attempt = 0; ; attempt += 1) {
        const result = await client.query<{ locked: boolean }>(
          'SELECT pg_try_advisory_lock($1::bigint) AS locked',
          [key],
        );
        if (result.rows[0]?.locked) break;
        const holder = await this.lockHolder(client);
        await nextLockAttempt({ attempt, started, waitMs, signal, holder, logger: this.logger });
      }
      // A record left behind belongs to a holder whose session ended without releasing.
      previous = await this.lockHolder(client);
      const now = nowIso();
      await client.query(
        `INSERT INTO ${this.table('_ocs_lock')} (name, pid, host, since, heartbeat_at, owner_token)
         VALUES ($1, $2, $3, $4, $4, $5) ON CONFLICT (name) DO UPDATE SET pid = excluded.pid,
         host = excluded.host, since = excluded.since, heartbeat_at = excluded.heartbeat_at,
         owner_token = excluded.owner_token`,
        [LOCK_NAME, process.pid, hostname(), now, held.token],
      );
    } catch (error) {
      await client.end().catch(() => undefined);
      if (error instanceof OcsSyncError) throw error;
      throw new WarehouseError(
        `Taking the writer lock of ${this.description} failed: ${safeMessage(error)}`,
        { hint: connectionHint(error), cause: safeCause(error) },
      );
    }
    this.heldLock = held;
    this.startHeartbeat(held);
    return { release: () => this.releaseLock(held), previous };
  }

  private markLockLost(held: HeldLock, reason: string, error?: unknown): void {
    if (this.heldLock !== held || held.lost) return;
    held.lost = true;
    clearInterval(held.heartbeat);
    this.logger?.warn(
      { warehouse: this.description, reason, err: error ? safeMessage(error) : undefined },
      'Lost the warehouse lock; stopping writes',
    );
  }

  private startHeartbeat(held: HeldLock): void {
    const interval = heartbeatIntervalMs(this.lockStaleAfterMs);
    let beatStarted: number | undefined;
    held.heartbeat = setInterval(() => {
      if (beatStarted !== undefined) {
        // A beat that has not come back for this long means a dead connection.
        if (performance.now() - beatStarted > Math.max(this.lockStaleAfterMs, 2 * interval)) {
          this.markLockLost(held, 'its connection stopped answering');
        }
        return;
      }
      beatStarted = performance.now();
      held.client
        .query(
          `UPDATE ${this.table('_ocs_lock')} SET heartbeat_at = $1 WHERE name = $2 AND owner_token = $3`,
          [nowIso(), LOCK_NAME, held.token],
        )
        .then((result) => {
          if ((result.rowCount ?? 0) === 0 && this.heldLock === held && !held.lost) {
            held.lost = true;
            clearInterval(held.heartbeat);
            this.logger?.warn(
              { warehouse: this.description },
              'Another process took over or removed the warehouse lock record; stopping writes',
            );
          }
        })
        .catch((error: unknown) => {
          if (this.heldLock === held) {
            this.logger?.warn(
              { err: safeMessage(error) },
              'Could not refresh the warehouse lock heartbeat',
            );
          }
        })
        .finally(() => {
          beatStarted = undefined;
        });
    }, interval);
    held.heartbeat.unref();
  }

  private async lockHolder(client: pg.ClientBase): Promise<LockRecord | undefined> {
    const result = await client.query<{
      pid: number;
      host: string;
      since: Date | string;
      heartbeat_at: Date | string;
    }>(`SELECT pid, host, since, heartbeat_at FROM ${this.table('_ocs_lock')} WHERE name = $1`, [
      LOCK_NAME,
    ]);
    const row = result.rows[0];
    return row
      ? {
          pid: row.pid,
          host: row.host,
          since: toIsoText(row.since) ?? '',
          heartbeatAt: toIsoText(row.heartbeat_at) ?? '',
        }
      : undefined;
  }

  private async releaseLock(held: HeldLock): Promise<void> {
    if (this.heldLock !== held) return;
    this.heldLock = undefined;
    clearInterval(held.heartbeat);
    try {
      if (!held.lost) {
        await held.client.query(
          `DELETE FROM ${this.table('_ocs_lock')} WHERE name = $1 AND owner_token = $2`,
          [LOCK_NAME, held.token],
        );
        await held.client.query('SELECT pg_advisory_unlock($1::bigint)', [
          advisoryLockKey('writer', this.schema),
        ]);
      }
    } catch (error) {
      // Ending the session below frees the lock anyway.
      this.logger?.warn(
        { err: safeMessage(error) },
        'Could not release the warehouse lock cleanly',
      );
    } finally {
      await held.client.end().catch(() => undefined);
    }
  }

  /** Releases the lock if this process holds it (close() calls it too). */
  async releaseHeld(): Promise<void> {
    if (this.heldLock) await this.releaseLock(this.heldLock);
  }
}
