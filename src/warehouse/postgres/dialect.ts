/**
 * The PostgreSQL dialect as the opener (../open.ts) sees it: its rules, and what opens its
 * warehouse, reader, probe and page sink, each loaded (with the driver) when first asked.
 */
import type { Dialect } from '../dialect.js';
import type { PostgresPageSinkSetup } from './page-sink.js';
import { POSTGRES_RULES } from './rules.js';

export const POSTGRES_DIALECT: Dialect<{ dialect: 'postgres'; connectionString: string }> = {
  rules: POSTGRES_RULES,

  async openWarehouse(target, options) {
    const { PostgresWarehouse } = await import('./warehouse.js');
    return new PostgresWarehouse({
      url: target.connectionString,
      schema: options.schema,
      poolSize: options.poolSize,
      statementTimeoutSeconds: options.statementTimeoutSeconds,
      lockStaleAfterSeconds: options.lockStaleAfterSeconds,
      logger: options.logger,
    });
  },

  async openReader(target, options) {
    const { openPostgresReader } = await import('./reader.js');
    return openPostgresReader(target.connectionString, {
      schema: options.schema ?? 'ocs',
      statementTimeoutSeconds: options.statementTimeoutSeconds,
    });
  },

  async probe(target, schema, readLock) {
    const { probePostgres } = await import('./reader.js');
    return probePostgres(target.connectionString, schema, readLock);
  },

  async openPageSink(setup) {
    const { openPostgresPageSink } = await import('./page-sink.js');
    return openPostgresPageSink(setup as PostgresPageSinkSetup);
  },

  async columnTypes() {
    return (await import('./values.js')).POSTGRES_TYPE;
  },
};
