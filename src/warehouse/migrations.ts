import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WarehouseError } from '../errors.js';
import { projectRoot } from '../package-info.js';

export interface Migration {
  version: number;
  name: string;
  /** File name inside schema/<dialect>/. */
  file: string;
  sql: string;
}

/** What a dialect does to apply its migrations; each call is its own transaction. */
export interface MigrationTarget {
  /** Creates `_ocs_migrations` when missing, then lists the versions already applied. */
  appliedVersions(): Promise<Set<number>>;
  /**
   * Runs the migration's SQL and records it in `_ocs_migrations`, in one transaction, and does
   * nothing when another process applied it meanwhile (re-check inside the transaction).
   */
  apply(migration: Migration): Promise<void>;
}

const MIGRATION_FILE = /^(\d{3,})_([a-z0-9_]+)\.sql$/;

export function schemaDirectory(dialect: 'sqlite' | 'postgres'): string {
  return join(projectRoot(), 'schema', dialect);
}

/** The dialect's migration files in version order. */
export function loadMigrations(
  dialect: 'sqlite' | 'postgres',
  directory = schemaDirectory(dialect),
): Migration[] {
  if (!existsSync(directory)) {
    throw new WarehouseError(
      `The warehouse migrations folder ${directory} is missing; the installation is incomplete.`,
    );
  }
  const migrations: Migration[] = [];
  for (const file of readdirSync(directory).sort()) {
    const match = MIGRATION_FILE.exec(file);
    if (!match) continue;
    migrations.push({
      version: Number(match[1]),
      name: match[2]!,
      file,
      sql: readFileSync(join(directory, file), 'utf8'),
    });
  }
  migrations.sort((a, b) => a.version - b.version);
  for (let index = 1; index < migrations.length; index += 1) {
    if (migrations[index]!.version === migrations[index - 1]!.version) {
      throw new WarehouseError(
        `Two migrations in ${directory} share version ${migrations[index]!.version}.`,
      );
    }
  }
  return migrations;
}

/** Which migrations still need applying; refuses a warehouse migrated by a newer ocs-sync. */
export function pendingMigrations(
  available: readonly Migration[],
  applied: ReadonlySet<number>,
): Migration[] {
  const known = new Set(available.map((migration) => migration.version));
  const unknown = [...applied].filter((version) => !known.has(version)).sort((a, b) => a - b);
  if (unknown.length > 0) {
    throw new WarehouseError(
      `The warehouse has migration${unknown.length === 1 ? '' : 's'} ${unknown.join(', ')} that this ocs-sync does not know.`,
      {
        hint: 'A newer ocs-sync wrote to this warehouse: upgrade ocs-sync, or point it at another warehouse.',
      },
    );
  }
  return available.filter((migration) => !applied.has(migration.version));
}

/** Applies the missing migrations in order; returns the ones applied now. */
export async function applyMigrations(
  dialect: 'sqlite' | 'postgres',
  target: MigrationTarget,
  available: readonly Migration[] = loadMigrations(dialect),
): Promise<Migration[]> {
  const pending = pendingMigrations(available, await target.appliedVersions());
  for (const migration of pending) {
    try {
      await target.apply(migration);
    } catch (error) {
      if (error instanceof WarehouseError) throw error;
      throw new WarehouseError(
        `Warehouse migration ${migration.file} failed: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    }
  }
  return pending;
}
