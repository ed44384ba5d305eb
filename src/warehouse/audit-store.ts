/**
 * The audit chain's own bookkeeping, written once with kysely for both dialects: turning it on,
 * checkpoints, the last verification. Appending entries is done where the data is written
 * (audit-chain.ts, sqlite/history.ts, postgres/history.ts, bookkeeping.ts, file-ledger.ts).
 */
import type { Kysely } from 'kysely';
import { AuditError } from '../errors.js';
import type {
  AuditSnapshot,
  AuditStore,
  CheckpointBody,
  CheckpointSigner,
  SignedCheckpoint,
  VerificationRecord,
} from '../interfaces.js';
import {
  CHECKPOINT_FORMAT,
  checkpointText,
  toCheckpoint,
  toHead,
  type SqlRun,
} from './audit-chain.js';
import { canonicalJson } from './canonical.js';
import { kyselyRun, nowIso } from './bookkeeping.js';
import type { DialectRules } from './dialect-rules.js';
import { AUDIT_STATE_KEY, AUDIT_VERIFICATION_STATE_KEY } from './state-keys.js';

export interface AuditStoreParts {
  rules: DialectRules;
  kysely: Kysely<never>;
  /** Runs work alone on the warehouse (SQLite: after every page handed over has committed). */
  exclusive: <T>(work: () => Promise<T>, what: string) => Promise<T>;
  openSnapshot: () => Promise<AuditSnapshot>;
  /** Called once the chain is on (loaded or enabled): every writer starts chaining. */
  onEnabled: () => void;
}

export class KyselyAuditStore implements AuditStore {
  private on = false;

  constructor(private readonly parts: AuditStoreParts) {}

  get enabled(): boolean {
    return this.on;
  }

  /** Reads whether the chain is on (after migrations). A chain with entries is on, state or not. */
  async load(): Promise<void> {
    const on = await this.parts.exclusive(
      () => this.inTransaction((run) => this.isOn(run)),
      'Reading the audit state',
    );
    if (on) this.turnOn();
  }

  async enable(): Promise<void> {
    if (this.on) return;
    await this.parts.exclusive(
      () =>
        this.inTransaction(async (run) => {
          if (await this.isOn(run)) return;
          const [runs] = await run('SELECT count(*) AS n FROM _ocs_runs', []);
          const [tables] = await run('SELECT count(*) AS n FROM _ocs_columns', []);
          if (Number(runs?.n ?? 0) > 0 || Number(tables?.n ?? 0) > 0) {
            throw new AuditError(
              'audit.enabled is on, but this warehouse already holds runs and tables without an audit chain: the chain must witness every version from the first run, so it cannot start on a warehouse that has data.',
              {
                hint: 'Point OCS_WAREHOUSE_URL at a new warehouse (or another PostgreSQL schema) and sync it with audit on from the start; keep this one as it is, or turn audit off for it.',
              },
            );
          }
          const now = nowIso();
          await run(
            'INSERT INTO _ocs_state (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING',
            [AUDIT_STATE_KEY, JSON.stringify({ since: now }), now],
          );
        }),
      'Turning the audit chain on',
    );
    this.turnOn();
  }

  /** What would rewrite or drop versions the chain holds is refused while it is on. */
  refuseRewrite(what: string): void {
    if (!this.on) return;
    throw new AuditError(
      `${what} is refused: this warehouse keeps an audit chain, and it would change versions the chain holds.`,
      {
        hint: 'An audit archive is append-only; make the change in a copy of the warehouse, or in a new one synced without audit.',
      },
    );
  }

  checkpoint(signer: CheckpointSigner): Promise<SignedCheckpoint | undefined> {
    const { rules } = this.parts;
    return this.parts.exclusive(
      () =>
        this.inTransaction(async (run) => {
          // Nothing appends between reading the head and storing its checkpoint.
          if (rules.holdHeadSql !== undefined) await run(rules.holdHeadSql, []);
          const [headRow] = await run(rules.headSelectSql, []);
          const head = toHead(headRow as { seq: unknown; hash: unknown } | undefined);
          if (head.seq === 0) return undefined;
          const [previous] = await run(
            'SELECT seq FROM _ocs_audit_checkpoints ORDER BY id DESC LIMIT 1',
            [],
          );
          const previousSeq = previous ? Number(previous.seq) : 0;
          const counts: Record<string, number> = {};
          for (const row of await run(
            'SELECT operation, count(*) AS n FROM _ocs_audit WHERE seq > ? AND seq <= ? GROUP BY operation',
            [previousSeq, head.seq],
          )) {
            counts[String(row.operation)] = Number(row.n);
          }
          const [lastRun] = await run('SELECT max(id) AS id FROM _ocs_runs', []);
          const body: CheckpointBody = {
            format: CHECKPOINT_FORMAT,
            run: lastRun?.id === null || lastRun?.id === undefined ? null : Number(lastRun.id),
            seq: head.seq,
            head: head.hash,
            previous_seq: previousSeq,
            counts,
            time: nowIso(),
            key: signer.publicKey,
          };
          const signed: SignedCheckpoint = {
            ...body,
            signature: signer.sign(checkpointText(body)),
          };
          await run(
            `INSERT INTO _ocs_audit_checkpoints
               (run_id, seq, previous_seq, head_hash, counts, created_at, public_key, signature)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
            [
              signed.run,
              signed.seq,
              signed.previous_seq,
              signed.head,
              canonicalJson(signed.counts),
              signed.time,
              signed.key,
              signed.signature,
            ],
          );
          return signed;
        }),
      'Writing an audit checkpoint',
    );
  }

  checkpoints(afterSeq = -1): Promise<SignedCheckpoint[]> {
    return this.parts.exclusive(
      () =>
        this.inTransaction(async (run) =>
          (
            await run('SELECT * FROM _ocs_audit_checkpoints WHERE seq > ? ORDER BY id', [afterSeq])
          ).map(toCheckpoint),
        ),
      'Reading the audit checkpoints',
    );
  }

  snapshot(): Promise<AuditSnapshot> {
    return this.parts.openSnapshot();
  }

  recordVerification(record: VerificationRecord): Promise<void> {
    return this.parts.exclusive(
      () =>
        this.inTransaction(async (run) => {
          const now = nowIso();
          await run(
            `INSERT INTO _ocs_state (key, value, updated_at) VALUES (?, ?, ?)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
            [AUDIT_VERIFICATION_STATE_KEY, JSON.stringify(record), now],
          );
        }),
      'Recording the audit verification',
    );
  }

  private async isOn(run: SqlRun): Promise<boolean> {
    const [state] = await run('SELECT value FROM _ocs_state WHERE key = ?', [AUDIT_STATE_KEY]);
    if (state) return true;
    const [head] = await run('SELECT seq FROM _ocs_audit_head WHERE one = 1', []);
    return Number(head?.seq ?? 0) > 0;
  }

  private turnOn(): void {
    if (this.on) return;
    this.on = true;
    this.parts.onEnabled();
  }

  private inTransaction<T>(work: (run: SqlRun) => Promise<T>): Promise<T> {
    return this.parts.kysely
      .transaction()
      .execute((trx) => work(kyselyRun(trx as unknown as Kysely<never>, this.parts.rules)));
  }
}
