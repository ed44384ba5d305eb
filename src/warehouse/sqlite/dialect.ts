/**
 * The SQLite dialect as the opener (../open.ts) sees it: its rules, and what opens its warehouse,
 * reader, probe and page sink, each loaded when first asked. The checks of a warehouse file's
 * place (the folder exists, this user may write it) are here, before the file is created.
 */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { WarehouseError } from '../../errors.js';
import type { Dialect } from '../dialect.js';
import { createPrivateSqliteFile } from './file.js';
import type { SqlitePageSinkSetup } from './page-sink.js';
import { SQLITE_RULES } from './rules.js';

const MEMORY = ':memory:';

/** The absolute path of a warehouse file, or `:memory:` as it is. */
function absolute(path: string): string {
  return path === MEMORY ? path : resolve(path);
}

export const SQLITE_DIALECT: Dialect<{ dialect: 'sqlite'; path: string }> = {
  rules: SQLITE_RULES,

  async openWarehouse(target, options) {
    const path = absolute(target.path);
    if (options.mustExist && path !== MEMORY && !existsSync(path)) {
      throw new WarehouseError(`There is no SQLite warehouse at ${path} yet.`, {
        hint: 'Check --warehouse / OCS_WAREHOUSE_URL, or run `ocs-sync sync` first to create it.',
      });
    }
    if (path !== MEMORY) {
      checkSqlitePlace(path);
      createPrivateSqliteFile(path, options.fileModes);
    }
    const { SqliteWarehouse } = await import('./warehouse.js');
    return new SqliteWarehouse({
      path,
      lockStaleAfterSeconds: options.lockStaleAfterSeconds,
      fileModes: options.fileModes,
      writerThread: options.writerThread,
      logger: options.logger,
    });
  },

  async openReader(target) {
    const { openSqliteReader } = await import('./reader.js');
    return openSqliteReader(absolute(target.path));
  },

  async probe(target, _schema, readLock) {
    const { probeSqlite } = await import('./probe.js');
    return probeSqlite(resolve(target.path), readLock);
  },

  async openPageSink(setup) {
    const { openSqlitePageSink } = await import('./page-sink.js');
    return openSqlitePageSink(setup as SqlitePageSinkSetup);
  },

  async columnTypes() {
    return (await import('./values.js')).SQLITE_TYPE;
  },
};

/**
 * A folder that does not exist is a typo until proven otherwise: it is named, never created.
 * A file or folder this user may not write gets the path and the fix.
 */
function checkSqlitePlace(path: string): void {
  const folder = dirname(path);
  if (!existsSync(folder)) {
    throw new WarehouseError(
      `The folder ${folder} of the SQLite warehouse ${path} does not exist.`,
      {
        hint: `Check the path in --warehouse / OCS_WAREHOUSE_URL, or create the folder (mkdir -p ${folder}).`,
      },
    );
  }
  if (!statSync(folder).isDirectory()) {
    throw new WarehouseError(
      `${folder} (the folder of the SQLite warehouse ${path}) is not a folder.`,
      {
        hint: 'Check the path in --warehouse / OCS_WAREHOUSE_URL.',
      },
    );
  }
  const target = existsSync(path) ? path : folder;
  try {
    accessSync(target, constants.R_OK | constants.W_OK);
  } catch {
    throw new WarehouseError(
      `The SQLite warehouse ${path} cannot be written: ${target === path ? 'the file' : 'its folder'} is read-only for this user.`,
      {
        hint: `Give this user write access to ${target} (and its folder, for SQLite's journal files), or choose another path.`,
      },
    );
  }
}
