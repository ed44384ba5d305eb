/**
 * The warehouse URL: where rows land. Pure string handling, no I/O.
 *
 * Accepted forms:
 * - a file path (`./ocs-sync.db`, `/var/lib/ocs/ocs.db`) or `:memory:`  -> SQLite
 * - `sqlite:PATH`, `sqlite://PATH` (so `sqlite:///abs/path.db` is absolute), `sqlite::memory:`
 * - `file:///abs/path.db`                                               -> SQLite
 * - `postgres://…` or `postgresql://…` (libpq URL)                     -> PostgreSQL
 */

import { fileURLToPath } from 'node:url';
import { ConfigError } from '../errors.js';

export type WarehouseTarget =
  { dialect: 'sqlite'; path: string } | { dialect: 'postgres'; connectionString: string };

const SUPPORTED =
  'use a file path or sqlite:PATH for SQLite, or postgres://USER:PASSWORD@HOST:PORT/DATABASE for PostgreSQL';

/**
 * Parses a warehouse URL, or says what is wrong with it. `problem` is phrased to follow the name
 * of the setting ("warehouse.url <problem>") and never contains a password.
 */
export function checkWarehouseUrl(url: string): { target: WarehouseTarget } | { problem: string } {
  const text = url.trim();
  if (text === '') return { problem: `must not be empty; ${SUPPORTED}` };

  if (/^postgres(ql)?:/i.test(text)) {
    if (!/^postgres(ql)?:\/\//i.test(text)) {
      return { problem: `must be written postgres://…; ${SUPPORTED}` };
    }
    let parsed: URL;
    try {
      parsed = new URL(text);
    } catch {
      return {
        problem: `is not a valid PostgreSQL URL (${JSON.stringify(redactUrl(text))}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE with special characters in the password percent-encoded`,
      };
    }
    if (parsed.hash !== '') {
      return { problem: 'must not contain a #fragment (percent-encode # in a password as %23)' };
    }
    return { target: { dialect: 'postgres', connectionString: text } };
  }

  if (/^sqlite:/i.test(text)) {
    let path = text.slice('sqlite:'.length);
    if (path.startsWith('//')) path = path.slice(2);
    if (path === '') {
      return { problem: 'sqlite: needs a path, e.g. sqlite:./ocs-sync.db or sqlite::memory:' };
    }
    return { target: { dialect: 'sqlite', path } };
  }

  if (/^file:/i.test(text)) {
    try {
      return { target: { dialect: 'sqlite', path: fileURLToPath(text) } };
    } catch {
      return {
        problem: `is not a usable file: URL; write file:///absolute/path.db, or ${SUPPORTED}`,
      };
    }
  }

  // A scheme of two or more letters; one letter is a Windows drive (C:\…), which is a path.
  const scheme = /^([a-z][a-z0-9+.-]+):/i.exec(text);
  if (scheme) {
    return {
      problem: `uses the scheme ${JSON.stringify(`${scheme[1]}:`)}, which ocs-sync does not support; ${SUPPORTED}`,
    };
  }

  // `host=… dbname=…` is libpq's key/value form; as a file name it would silently make a SQLite file.
  if (/^(host|hostaddr|dbname|user|port|password|sslmode)\s*=/i.test(text)) {
    return {
      problem: `looks like a libpq key=value string; write it as a URL instead: postgres://USER:PASSWORD@HOST:PORT/DATABASE`,
    };
  }

  return { target: { dialect: 'sqlite', path: text } };
}

/** Parses a warehouse URL; throws ConfigError naming what is wrong (never the password). */
export function parseWarehouseUrl(url: string): WarehouseTarget {
  const result = checkWarehouseUrl(url);
  if ('problem' in result) throw new ConfigError([`warehouse.url ${result.problem}`]);
  return result.target;
}

const PASSWORD_PARAMETERS = ['password', 'sslpassword', 'passwd'];

/** The URL with any password (user info or `?password=`) replaced by `***`. Paths pass unchanged. */
export function redactUrl(url: string): string {
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(url)) return url;
  try {
    const parsed = new URL(url);
    let changed = false;
    if (parsed.password !== '') {
      parsed.password = '***';
      changed = true;
    }
    for (const name of PASSWORD_PARAMETERS) {
      if (parsed.searchParams.has(name)) {
        parsed.searchParams.set(name, '***');
        changed = true;
      }
    }
    return changed ? parsed.toString() : url;
  } catch {
    // Not parseable: still hide anything that looks like user:password@ or ?password=.
    return url
      .replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/?#@]*):[^/?#]*@/i, '$1:***@')
      .replace(/([?&](?:password|sslpassword|passwd)=)[^&#]*/gi, '$1***');
  }
}

/**
 * Whether another thread can write the warehouse (a page thread, SQLite's writer thread): not an
 * SQLite `:memory:` database, which only its one connection holds.
 */
export function writableFromAnotherThread(target: WarehouseTarget): boolean {
  return !isSqliteTarget(target) || target.path !== ':memory:';
}

/** The file an SQLite warehouse is kept in, as written; undefined for `:memory:` and PostgreSQL. */
export function sqliteFileOf(target: WarehouseTarget): string | undefined {
  return isSqliteTarget(target) && target.path !== ':memory:' ? target.path : undefined;
}

/** Whether the warehouse is a PostgreSQL database (a schema of it is the team's warehouse). */
export function isPostgresTarget(
  target: WarehouseTarget,
): target is Extract<WarehouseTarget, { dialect: 'postgres' }> {
  return target.dialect === 'postgres';
}

/** Whether the warehouse is an SQLite database (a file or `:memory:`), which `snapshot` copies. */
export function isSqliteTarget(
  target: WarehouseTarget,
): target is Extract<WarehouseTarget, { dialect: 'sqlite' }> {
  return target.dialect === 'sqlite';
}
