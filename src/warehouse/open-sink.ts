/**
 * Opening a page sink on another thread (the sync's page thread), from the setup the warehouse
 * gave (Warehouse.pageSinkSetup): the other place, with open.ts, that picks a dialect. Apart
 * from open.ts so the page thread loads only its dialect's page-writing code.
 */
import type { PageSink, PageSinkSetup } from '../interfaces.js';
import type { PostgresPageSinkSetup } from './postgres/page-sink.js';
import type { SqlitePageSinkSetup } from './sqlite/page-sink.js';

export async function openPageSink(setup: PageSinkSetup): Promise<PageSink> {
  if (setup.dialect === 'postgres') {
    const { openPostgresPageSink } = await import('./postgres/page-sink.js');
    return openPostgresPageSink(setup as PostgresPageSinkSetup);
  }
  const { openSqlitePageSink } = await import('./sqlite/page-sink.js');
  return openSqlitePageSink(setup as SqlitePageSinkSetup);
}
