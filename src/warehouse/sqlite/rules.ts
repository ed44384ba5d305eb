/**
 * SQLite's answers to what the shared code asks of a dialect (../dialect-rules.ts): `?`
 * placeholders as they are, the audit head held by the write transaction, entries inserted in
 * batches, times kept as text in the fixed form, text made well-formed and JSON kept as sent.
 */
import { ENTRY_COLUMNS, HEAD_SELECT_SQL, HEAD_UPDATE_SQL, entryValues } from '../audit-chain.js';
import { wellFormedText } from '../canonical.js';
import type { DialectRules } from '../dialect-rules.js';

/** Entries per multi-row INSERT (9 parameters each, well under SQLite's limit). */
const ENTRIES_PER_INSERT = 100;

export const SQLITE_RULES: DialectRules = {
  name: 'sqlite',
  placeholders: (sql) => sql,
  // The write transaction the caller is in holds the whole file.
  headSelectSql: HEAD_SELECT_SQL,
  // A no-op write takes the write lock, so no append comes between reading the head and the end.
  holdHeadSql: 'UPDATE _ocs_audit_head SET seq = seq WHERE one = 1',
  insertEntries: async (run, entries, head) => {
    for (let start = 0; start < entries.length; start += ENTRIES_PER_INSERT) {
      const batch = entries.slice(start, start + ENTRIES_PER_INSERT);
      await run(
        `INSERT INTO _ocs_audit (${ENTRY_COLUMNS}) VALUES ${batch.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
        batch.flatMap(entryValues),
      );
    }
    await run(HEAD_UPDATE_SQL, [head.seq, head.hash]);
  },
  // Time columns hold the fixed form as text already.
  fixedTime: (column) => column,
  keptBetweenRuns: true,
  values: {
    // Lone surrogates cannot be stored as UTF-8: they come back as U+FFFD.
    text: wellFormedText,
    textChanges: (value) => wellFormedText(value) !== value,
    // A json column keeps the server's text.
    json: undefined,
    jsonChanges: () => false,
  },
};
