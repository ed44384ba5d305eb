/**
 * `ocs-sync unseal`: open values stored under the reseal policy with the archive secret key, either
 * printed as JSON lines or written back in place (the column then holds the plaintext JSON text).
 * In-place runs are safe to repeat or resume: values already opened are no longer archived texts
 * and are skipped.
 */
import { KeyError, UsageError } from '../errors.js';
import type { Warehouse, WarehouseTools } from '../interfaces.js';
import { isArchived, openArchived } from './archive.js';
import { encodeJson } from './json-text.js';
import { SealedOpenError } from './sealed-open-error.js';

export interface UnsealTarget {
  table: string;
  column: string;
}

export interface UnsealOptions {
  secretKey: Uint8Array;
  targets: UnsealTarget[];
  /** Write the opened JSON text back into the column instead of printing it. */
  inPlace: boolean;
  /** Receives one JSON line per opened value (stdout mode), without the trailing newline. */
  write: (line: string) => void;
  /** Rows read (and updated) per round trip; default 500. */
  batchSize?: number;
  /** A target whose table or column does not exist: 'error' (default) or 'skip'. */
  onMissing?: 'error' | 'skip';
}

export interface UnsealResult {
  opened: number;
  /** Values that were null or not archived texts (for example already opened). */
  skipped: number;
}

export async function unsealArchived(
  warehouse: Pick<Warehouse, 'describeTable'> & {
    tools: Pick<WarehouseTools, 'readColumn' | 'updateColumn'>;
  },
  options: UnsealOptions,
): Promise<UnsealResult> {
  const batchSize = options.batchSize ?? 500;
  if (!Number.isInteger(batchSize) || batchSize < 1)
    throw new UsageError(`Batch size must be a positive integer, got ${batchSize}.`);
  const result: UnsealResult = { opened: 0, skipped: 0 };
  for (const { table, column } of options.targets) {
    const columns = await warehouse.describeTable(table);
    const problem =
      columns === undefined
        ? `table ${table} does not exist in the warehouse`
        : columns.some((spec) => spec.name === column)
          ? undefined
          : `table ${table} has no column ${column}`;
    if (problem !== undefined) {
      if (options.onMissing === 'skip') continue;
      throw new UsageError(`Cannot unseal ${table}.${column}: ${problem}.`);
    }
    let afterId: string | null = null;
    for (;;) {
      const batch = await warehouse.tools.readColumn(table, column, afterId, batchSize);
      if (batch.length === 0) break;
      const updates: Array<{ id: string; value: unknown }> = [];
      for (const { id, value } of batch) {
        if (!isArchived(value)) {
          result.skipped++;
          continue;
        }
        let opened: unknown;
        try {
          opened = openArchived(value, options.secretKey);
        } catch (error) {
          if (error instanceof SealedOpenError) {
            throw new KeyError(
              `Cannot open the archived value of ${table}.${column} in row id ${id}: ${error.reason}.`,
              {
                hint: 'Check that the archive secret key matches the archive public key used when syncing.',
              },
            );
          }
          throw error;
        }
        result.opened++;
        if (options.inPlace) {
          updates.push({ id, value: encodeJson(opened, 'compact') });
        } else {
          options.write(
            encodeJson(
              { resource: table, id: presentId(id), field: column, value: opened },
              'compact',
            ),
          );
        }
      }
      if (updates.length > 0) await warehouse.tools.updateColumn(table, column, updates);
      // Stop only on an empty page: a dialect may return fewer rows than asked before the end.
      afterId = (batch[batch.length - 1] as { id: string }).id;
    }
  }
  return result;
}

/** Ids are numbers on the server; print them as numbers when that is exact. */
function presentId(id: string): number | string {
  if (/^-?\d+$/.test(id)) {
    const number = Number(id);
    if (Number.isSafeInteger(number)) return number;
  }
  return id;
}
