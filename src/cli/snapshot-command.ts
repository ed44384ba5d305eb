/**
 * `ocs-sync snapshot create|list|restore`: a SQLite warehouse copied whole (SQLite's online
 * backup, while a sync may be writing), gzip-compressed, to `snapshot.dir` (a folder or a
 * bucket) as `<id>.db.gz`, named by its time, with its SHA-256 beside it (`<id>.db.gz.sha256`, as
 * `sha256sum` writes it). `restore` checks the digest and writes the warehouse atomically, and
 * refuses one that a process holds. PostgreSQL: pg_dump, said with the command (exit 2).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rename, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { isSqliteTarget } from '../warehouse/url.js';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip, createGzip } from 'node:zlib';
import type { Config } from '../config/schema.js';
import { ExitCode, OcsSyncError, UsageError } from '../errors.js';
import type { ObjectStore } from '../storage/store.js';
import { putFile, readObjectText } from '../storage/store.js';
import { backupSqlite, sqliteHeldBy } from '../warehouse/open.js';
import type { CommandContext } from './context.js';
import { formatTable } from './output.js';
import { createObjectStore, type Env } from './wiring.js';
import type { Logger } from '../log.js';

const ID = /^ocs-sync-(\d{8}T\d{6}(?:\d{3})?Z)$/;
const DATA = '.db.gz';
const DIGEST = '.db.gz.sha256';

export interface SnapshotInfo {
  id: string;
  time: string;
  bytes: number;
  sha256: string;
  location: string;
}

/** The snapshot's store; UsageError (exit 2) for PostgreSQL or no snapshot.dir. */
function snapshotStore(config: Config, env: Env): ObjectStore {
  if (!isSqliteTarget(config.warehouse.target)) {
    throw new UsageError(
      'ocs-sync snapshot copies a SQLite warehouse; this one is PostgreSQL: back it up with pg_dump or the managed service\'s backups (docs/off-the-box.md gives the command: pg_dump --format=custom --schema SCHEMA --file ocs.dump "$OCS_WAREHOUSE_URL").',
    );
  }
  if (config.snapshot.dir === undefined) {
    throw new UsageError(
      'snapshot.dir (OCS_SNAPSHOT_DIR) is not set: name a folder or s3://BUCKET/PREFIX for the snapshots.',
    );
  }
  return createObjectStore(config, env, config.snapshot.dir);
}

function timeOfId(id: string): string {
  const stamp = ID.exec(id)![1]!;
  return `${stamp.slice(0, 4)}-${stamp.slice(4, 6)}-${stamp.slice(6, 8)}T${stamp.slice(9, 11)}:${stamp.slice(11, 13)}:${stamp.slice(13, 15)}Z`;
}

/** Complete snapshots (the data and its digest both there), oldest first. */
async function listSnapshots(store: ObjectStore): Promise<SnapshotInfo[]> {
  const sizes = new Map<string, number>();
  const digests = new Set<string>();
  for await (const object of store.list('')) {
    if (object.key.endsWith(DIGEST)) digests.add(object.key.slice(0, -DIGEST.length));
    else if (object.key.endsWith(DATA)) sizes.set(object.key.slice(0, -DATA.length), object.size);
  }
  const ids = [...sizes.keys()].filter((id) => ID.test(id) && digests.has(id)).sort();
  const found: SnapshotInfo[] = [];
  for (const id of ids) {
    const text = (await readObjectText(store, `${id}${DIGEST}`)) ?? '';
    found.push({
      id,
      time: timeOfId(id),
      bytes: sizes.get(id)!,
      sha256: text.trim().split(/\s+/)[0] ?? '',
      location: store.where(`${id}${DATA}`),
    });
  }
  return found;
}

/** A stream stage that hashes what passes. */
function hasher(hash: ReturnType<typeof createHash>): Transform {
  return new Transform({
    transform(chunk: Buffer, _encoding, done: TransformCallback) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
}

export async function runSnapshotCreateCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const { made, pruned } = await createSnapshot(
    config,
    context.environment.env,
    context.logger(config),
  );
  context.output.out(
    options.json
      ? JSON.stringify(made, null, 2)
      : `Snapshot ${made.id}: ${made.bytes} bytes (gzip), sha256 ${made.sha256}, at ${made.location}` +
          (pruned.length > 0
            ? `; removed the ${pruned.length} oldest (snapshot.keep ${config.snapshot.keep})`
            : ''),
  );
  return ExitCode.ok;
}

/** One snapshot of the warehouse into snapshot.dir, then the oldest beyond snapshot.keep gone. */
export async function createSnapshot(
  config: Config,
  env: Env,
  logger: Logger,
): Promise<{ made: SnapshotInfo; pruned: string[] }> {
  const store = snapshotStore(config, env);
  const source = resolve((config.warehouse.target as { path: string }).path);
  const scratch = join(tmpdir(), `ocs-sync-snapshot-${randomUUID()}`);
  try {
    await stat(source).catch(() => {
      throw new OcsSyncError(
        `The warehouse ${source} does not exist: there is nothing to snapshot.`,
      );
    });
    const id = `ocs-sync-${new Date().toISOString().replace(/[-:]/g, '').replace('.', '')}`;
    // The copy and its compressed form stay private to this user (they hold team data): the
    // backup writes into the empty file made here.
    await (await open(`${scratch}.db`, 'wx', 0o600)).close();
    await backupSqlite(source, `${scratch}.db`);
    const hash = createHash('sha256');
    await pipeline(
      createReadStream(`${scratch}.db`),
      createGzip(),
      hasher(hash),
      createWriteStream(`${scratch}${DATA}`, { mode: 0o600 }),
    );
    const sha256 = hash.digest('hex');
    const { size } = await stat(`${scratch}${DATA}`);
    await putFile(store, `${id}${DATA}`, `${scratch}${DATA}`, {
      ifAbsent: true,
      contentType: 'application/gzip',
    });
    // The digest last: a snapshot without one is unfinished, and neither listed nor restored.
    const digest = Buffer.from(`${sha256}  ${id}${DATA}\n`);
    await store.put(`${id}${DIGEST}`, digest, { ifAbsent: true });
    const made: SnapshotInfo = {
      id,
      time: timeOfId(id),
      bytes: size,
      sha256,
      location: store.where(`${id}${DATA}`),
    };
    const pruned = await prune(store, config.snapshot.keep);
    logger.info({ id, bytes: size, pruned: pruned.length }, `Snapshot ${id} written`);
    return { made, pruned };
  } finally {
    await rm(`${scratch}.db`, { force: true });
    await rm(`${scratch}${DATA}`, { force: true });
    store.close();
  }
}

/** Removes the oldest snapshots beyond `keep` (their digest first: never a listed half). */
async function prune(store: ObjectStore, keep: number | undefined): Promise<string[]> {
  if (keep === undefined) return [];
  const all = await listSnapshots(store);
  const old = all.slice(0, Math.max(0, all.length - keep));
  for (const snapshot of old) {
    await store.delete(`${snapshot.id}${DIGEST}`);
    await store.delete(`${snapshot.id}${DATA}`);
  }
  return old.map((snapshot) => snapshot.id);
}

export async function runSnapshotListCommand(
  context: CommandContext,
  options: { json?: boolean },
): Promise<number> {
  const config = context.config({ server: false });
  const store = snapshotStore(config, context.environment.env);
  try {
    const snapshots = await listSnapshots(store);
    if (options.json) {
      context.output.out(JSON.stringify(snapshots, null, 2));
    } else if (snapshots.length === 0) {
      context.output.out(`No snapshots in ${store.location} yet (ocs-sync snapshot create).`);
    } else {
      context.output.out(
        formatTable(
          ['id', 'time', 'bytes', 'sha256'],
          snapshots.map((item) => [item.id, item.time, item.bytes, `${item.sha256.slice(0, 12)}…`]),
        ),
      );
    }
    return ExitCode.ok;
  } finally {
    store.close();
  }
}

export async function runSnapshotRestoreCommand(
  context: CommandContext,
  options: { to: string },
  [id = '']: string[],
): Promise<number> {
  const config = context.config({ server: false });
  const store = snapshotStore(config, context.environment.env);
  const target = resolve(options.to);
  const partial = join(dirname(target), `.${basename(target)}.restore-${randomUUID()}`);
  try {
    if (!ID.test(id)) {
      throw new UsageError(
        `${JSON.stringify(id)} is not a snapshot id (ocs-sync-YYYYMMDDTHHMMSSmmmZ): \`ocs-sync snapshot list\` shows them.`,
      );
    }
    const held = await sqliteHeldBy(target);
    if (held !== undefined) {
      throw new OcsSyncError(`Refusing to restore over ${target}: ${held}.`, {
        hint: 'Stop what uses it (the daemon, serve), or restore to another file with --to and swap it in while nothing runs.',
      });
    }
    const digestText = await readObjectText(store, `${id}${DIGEST}`);
    const read = digestText === undefined ? undefined : await store.get(`${id}${DATA}`);
    if (read === undefined) {
      throw new OcsSyncError(`There is no complete snapshot ${id} in ${store.location}.`, {
        hint: '`ocs-sync snapshot list` shows those there.',
      });
    }
    const expected = digestText!.trim().split(/\s+/)[0];
    // The compressed bytes first, checked whole before anything is unpacked from them.
    const hash = createHash('sha256');
    await pipeline(
      read.body,
      hasher(hash),
      createWriteStream(`${partial}.gz`, { mode: 0o600, flags: 'wx' }),
    );
    const actual = hash.digest('hex');
    if (actual !== expected) {
      throw new OcsSyncError(
        `The snapshot ${store.where(`${id}${DATA}`)} does not match its SHA-256 (${actual}, ${expected} recorded): it was changed or damaged; nothing was restored.`,
        { hint: 'Restore another snapshot (`ocs-sync snapshot list`).' },
      );
    }
    await pipeline(
      createReadStream(`${partial}.gz`),
      createGunzip(),
      createWriteStream(partial, { mode: 0o600, flags: 'wx' }),
    );
    const handle = await open(partial, 'r+');
    await handle.sync();
    await handle.close();
    // The old file's WAL would be replayed into the new one: it goes first (nothing holds it).
    await rm(`${target}-wal`, { force: true });
    await rm(`${target}-shm`, { force: true });
    await rename(partial, target);
    const folder = await open(dirname(target), 'r');
    await folder.sync();
    await folder.close();
    context.output.out(`Restored snapshot ${id} (sha256 checked) to ${target}.`);
    return ExitCode.ok;
  } finally {
    await rm(partial, { force: true });
    await rm(`${partial}.gz`, { force: true });
    store.close();
  }
}
