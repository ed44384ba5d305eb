/**
 * The canonical form, as docs/audit.md ("The canonical form") states it: re-implemented here from
 * that text alone (not from src/), and held to what the warehouse stores on every dialect, for
 * values that each dialect renders its own way (an offset date-time, NUL and a lone surrogate,
 * doubles past 2^53, nested JSON). The same data gives the same digests on SQLite and PostgreSQL.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import { startFakeServer } from '../src/fake-server/server.js';
import { parseJsonExact } from '../src/json.js';
import { workingChatbots } from './chatbot-choice-support.js';
import { canonicalJson, integralNumberText, rowCanonicalizer } from '../src/warehouse/canonical.js';
import {
  ADMIN_KEY,
  createTestWarehouse,
  runCli,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  testDialects,
} from './support.js';
import {
  auditEnv,
  makeAuditKeys,
  openAuditBed,
  tamper,
  verifyJson,
  type AuditBed,
} from './audit-support.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

// ---------------------------------------------------------------- the spec's rules, by hand

/** A string: U+0000 left out, lone surrogates as U+FFFD, then escaped as the spec says. */
function specString(text: string): string {
  let cleaned = '';
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code === 0) continue;
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        cleaned += text[index]! + text[index + 1]!;
        index += 1;
      } else cleaned += '\uFFFD';
      continue;
    }
    cleaned += code >= 0xdc00 && code <= 0xdfff ? '\uFFFD' : text[index]!;
  }
  const short: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
  let out = '"';
  for (const character of cleaned) {
    const code = character.charCodeAt(0);
    if (character === '"') out += '\\"';
    else if (character === '\\') out += '\\\\';
    else if (code < 0x20) out += short[code] ?? `\\u${code.toString(16).padStart(4, '0')}`;
    else out += character;
  }
  return `${out}"`;
}

/** A number: an integer as its digits (a double past 2^53 as its shortest decimal's integer). */
function specNumber(value: number | bigint): string {
  if (typeof value === 'bigint') return value.toString();
  if (!Number.isInteger(value)) return String(value);
  if (Object.is(value, -0)) return '0';
  const [mantissa, exponent] = value.toExponential().split('e') as [string, string];
  const digits = mantissa.replace('-', '').replace('.', '');
  const places = Number(exponent) - (digits.length - 1);
  const magnitude = places >= 0 ? digits + '0'.repeat(places) : digits.slice(0, places);
  return (value < 0 ? '-' : '') + magnitude.replace(/^0+(?=\d)/, '');
}

function specValue(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number' || typeof value === 'bigint') return specNumber(value);
  if (typeof value === 'string') return specString(value);
  if (Array.isArray(value)) return `[${value.map(specValue).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).map(
    ([key, item]) => [specString(key), item] as const,
  );
  // Keys sorted by UTF-16 code units (compared as the JSON text of each key, after cleaning).
  entries.sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0));
  return `{${entries.map(([key, item]) => `${key}:${specValue(item)}`).join(',')}}`;
}

/** A date-time in the server's own form: UTC, `Z`, six fraction digits only when not zero. */
function serverForm(text: string): string {
  const match = /^(.{19})(\.\d+)?(Z|[+-]\d\d:\d\d)$/.exec(text);
  if (!match) return text;
  const [, clock, fraction = '', zone] = match;
  let micros = Math.round(Number((fraction || '.0').padEnd(10, '0').slice(0, 10)) * 1e6);
  let at = Date.parse(`${clock}${zone === 'Z' ? 'Z' : zone}`);
  if (micros === 1_000_000) {
    micros = 0;
    at += 1000;
  }
  const base = new Date(at).toISOString().slice(0, 19);
  return micros === 0 ? `${base}Z` : `${base}.${String(micros).padStart(6, '0')}Z`;
}

/**
 * A row's canonical text: its non-null data fields, keys sorted, date-times in server form; and
 * `_ocs_served_under`, the choice's key, when it was served under a chatbot choice.
 */
function specRow(
  served: Record<string, unknown>,
  types: Map<string, string>,
  servedUnder?: string,
): string {
  const row = servedUnder === undefined ? served : { ...served, _ocs_served_under: servedUnder };
  const names =
    servedUnder === undefined ? [...types.keys()] : [...types.keys(), '_ocs_served_under'];
  const fields = names.filter((name) => row[name] !== null && row[name] !== undefined).sort();
  return `{${fields
    .map((name) => {
      const value = row[name];
      const shown =
        types.get(name) === 'datetime' && typeof value === 'string' ? serverForm(value) : value;
      return `${specString(name)}:${specValue(shown)}`;
    })
    .join(',')}}`;
}

describe('the canonical form', () => {
  it('writes numbers, text, date-times and nesting as docs/audit.md says', () => {
    const cases: unknown[] = [
      1e21,
      -(2 ** 60),
      1.5e300,
      -0,
      0.1,
      1e-7,
      123456789n * 10n ** 20n,
      'a\u0000b\uD800c"\\\n\t\u0001é😀',
      { b: [1, null, { d: true, c: 'x' }], a: {}, '\u0000k': 1, é: 2, z: 3 },
    ];
    for (const value of cases) expect(canonicalJson(storable(value))).toBe(specValue(value));
    expect(integralNumberText(2 ** 60)).toBe('1152921504606847000');
    expect(specNumber(1e21)).toBe('1000000000000000000000');
    const columns = [
      { name: 'at', type: 'datetime' as const },
      { name: 'text', type: 'text' as const },
      { name: 'later', type: 'json' as const },
    ];
    const row = { id: 1, at: '2026-01-01T12:00:00.5+02:00', text: 'x\u0000y', later: null };
    const types = new Map(columns.map((column) => [column.name, column.type]));
    expect(rowCanonicalizer(columns)(row)).toBe(specRow(row, types));
    expect(specRow(row, types)).toBe('{"at":"2026-01-01T10:00:00.500000Z","text":"xy"}');
  });
});

/** The same NUL and lone-surrogate cleaning the rows get (canonicalJson alone does not clean). */
function storable(value: unknown): unknown {
  if (typeof value === 'string') return specString(value) && cleanText(value);
  if (Array.isArray(value)) return value.map(storable);
  if (value !== null && typeof value === 'object' && typeof value !== 'bigint') {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [cleanText(key), storable(item)]),
    );
  }
  return value;
}

function cleanText(text: string): string {
  return JSON.parse(specString(text)) as string;
}

// ---------------------------------------------------------------- held to what is stored

/** Values each dialect renders its own way, put into rows as the server sends them. */
function awkward(resource: string, row: Record<string, unknown>): Record<string, unknown> {
  if (resource === 'chat_messages' && Number(row.id) % 3 === 0) {
    return {
      ...row,
      created_at: '2026-01-01T12:00:00.25+02:00',
      content: `nul\u0000 and a lone \uD800 surrogate, "quoted" \\ é`,
      metadata: { z: 1e21, a: [1.5e300, -0, 0.1, 1e-7], nested: { b: 'é', a: null } },
    };
  }
  if (resource === 'collections' && Number(row.id) % 2 === 0) {
    return { ...row, search_dense_weight: 1e21 };
  }
  return row;
}

const RESOURCES = ['chats', 'chat_messages', 'collections', 'participants'];

/** The rows the server serves of a resource (under a choice's key), exactly as it sends them. */
async function servedPage(
  bed: AuditBed,
  resource: string,
  selection?: string,
): Promise<{ results: Array<Record<string, unknown>> }> {
  const query = selection === undefined ? '' : `&selection=${selection}`;
  const response = await fetch(`${bed.server.url}/api/export/${resource}/?limit=1000${query}`, {
    headers: { 'X-Api-Key': ADMIN_KEY },
  });
  return parseJsonExact(await response.text()) as { results: Array<Record<string, unknown>> };
}

/** Each column's logical type, as `_ocs_columns` records it. */
function columnTypes(bed: AuditBed, resource: string): Map<string, string> {
  return new Map(
    tamper(
      bed.warehouse,
      `SELECT column_name, column_type FROM _ocs_columns WHERE table_name = '${resource}';`,
    )
      .trim()
      .split('\n')
      .map((line) => line.split('|') as [string, string]),
  );
}

describe.each(splitDialects)('digests held to docs/audit.md (%s)', (dialect) => {
  let bed: AuditBed;

  beforeAll(async () => {
    bed = await openAuditBed(dialect, {
      dataset: { rowsPerResource: 12, seed: 9, nulChars: true },
      resources: RESOURCES,
      server: { transformRow: awkward },
    });
    const synced = await runCli(['sync'], bed.env);
    expect(synced.code, synced.stderr).toBe(0);
  });
  afterAll(() => bed.close());

  it('every version digest is the SHA-256 of the canonical text of the row the server sent', async () => {
    for (const resource of RESOURCES) {
      const page = await servedPage(bed, resource);
      const types = columnTypes(bed, resource);
      const stored = new Map(
        tamper(bed.warehouse, `SELECT id, _content_hash FROM ${resource}__history;`)
          .trim()
          .split('\n')
          .map((line) => line.split('|') as [string, string]),
      );
      expect(page.results.length).toBeGreaterThan(0);
      for (const row of page.results) {
        expect(stored.get(String(row.id)), `${resource} ${String(row.id)}`).toBe(
          sha256(specRow(row, types)),
        );
      }
    }
    const { result, report } = await verifyJson(bed.env, bed.keys);
    expect(report.problems).toEqual([]);
    expect(result.code).toBe(0);
  });

  it("every entry's hash is the SHA-256 of its lines as docs/audit.md says", () => {
    const rows = tamper(
      bed.warehouse,
      'SELECT seq, run_id, table_name, row_id, operation, at, digest, prev_hash, hash FROM _ocs_audit ORDER BY seq;',
    )
      .trim()
      .split('\n')
      .map((line) => line.split('|'));
    let previous = '0'.repeat(64);
    for (const [seq, run, table, row, operation, at, digest, prev, hash] of rows) {
      expect(prev).toBe(previous);
      const input = ['ocs-sync audit entry v1', seq, run, table, row, operation, at, digest, prev];
      expect(hash).toBe(sha256(input.join('\n')));
      previous = hash!;
    }
    expect(rows.length).toBeGreaterThan(50);
  });
});

describe.each(splitDialects)(
  'digests and kinds under a chatbot choice, held to docs/audit.md (%s)',
  (dialect) => {
    let bed: AuditBed;
    const SCOPED = ['chatbots', 'participants', 'sessions', 'chats'];

    beforeAll(async () => {
      bed = await openAuditBed(dialect, {
        dataset: {
          scoped: true,
          seed: 6,
          rowsPerResource: 8,
          rowCounts: { chatbots: 3, sessions: 16 },
        },
        resources: SCOPED,
        server: { chatbotChoice: { chosen: [] } },
      });
    });
    afterAll(() => bed.close());

    const working = () => workingChatbots(bed.dataset);
    const sync = async (...args: string[]) => {
      const synced = await runCli(['sync', ...args], bed.env);
      expect(synced.code, synced.stderr).toBe(0);
    };

    it("a version's digest covers the choice's key it was served under; each version's kind is its entry's operation's", async () => {
      const [a, b] = working();
      bed.server.choice!.set([a!, b!]);
      await sync();
      bed.server.choice!.set([a!]);
      await sync('--full-refresh');
      bed.server.choice!.set([a!, b!]);
      await sync();
      const key = bed.server.choice!.key();
      for (const resource of SCOPED) {
        const page = await servedPage(bed, resource, key);
        const types = columnTypes(bed, resource);
        const open = new Map(
          tamper(
            bed.warehouse,
            `SELECT id, _content_hash, _ocs_served_under FROM ${resource}__history WHERE _valid_to IS NULL;`,
          )
            .trim()
            .split('\n')
            .map((line) => line.split('|') as [string, string, string])
            .map(([id, hash, servedUnder]) => [id, { hash, servedUnder }]),
        );
        expect(page.results.length).toBeGreaterThan(0);
        for (const row of page.results) {
          const stored = open.get(String(row.id));
          expect(stored?.servedUnder, `${resource} ${String(row.id)}`).toBe(key);
          expect(stored?.hash, `${resource} ${String(row.id)}`).toBe(
            sha256(specRow(row, types, key)),
          );
        }
      }
      // The spec's table: create and change open `served` versions, the others their own kind.
      const kindOf: Record<string, string> = {
        create: 'served',
        change: 'served',
        scope_exit: 'scope_exit',
        scope_return: 'scope_return',
      };
      for (const resource of SCOPED) {
        const kinds = tamper(
          bed.warehouse,
          `SELECT _ocs_version_kind FROM ${resource}__history ORDER BY id, _version_id;`,
        )
          .trim()
          .split('\n');
        const operations = tamper(
          bed.warehouse,
          `SELECT operation FROM _ocs_audit WHERE table_name = '${resource}' AND operation IN ('create', 'change', 'scope_exit', 'scope_return') ORDER BY row_id, seq;`,
        )
          .trim()
          .split('\n');
        expect(kinds, resource).toEqual(operations.map((operation) => kindOf[operation]));
      }
      expect(
        tamper(
          bed.warehouse,
          'SELECT DISTINCT _ocs_version_kind FROM sessions__history ORDER BY 1;',
        )
          .trim()
          .split('\n'),
      ).toEqual(['scope_exit', 'scope_return', 'served']);
      const { result, report } = await verifyJson(bed.env, bed.keys);
      expect(report.problems).toEqual([]);
      expect(result.code).toBe(0);
    });
  },
);

describe.runIf(testDialects.length === 2 && splitDialects.includes('postgres'))(
  'SQLite and PostgreSQL',
  () => {
    it('the same data gives the same digests on both', async () => {
      const dataset = createSampleDataset({ rowsPerResource: 12, seed: 9, nulChars: true });
      const server = await startFakeServer({
        dataset,
        teamPublicKeyPem: teamKeys().publicKey,
        transformRow: awkward,
      });
      const directory = temporaryDirectory();
      const warehouses = await Promise.all(testDialects.map((name) => createTestWarehouse(name)));
      try {
        const keys = await makeAuditKeys(directory.path);
        const digests: string[][] = [];
        for (const warehouse of warehouses) {
          const env = {
            ...syncEnv(server.url, warehouse.env),
            ...auditEnv(keys),
            OCS_AUDIT_CHECKPOINT_FILE: `${directory.path}/${warehouse.dialect}.jsonl`,
            OCS_RESOURCES: RESOURCES.join(','),
          };
          expect((await runCli(['sync'], env)).code).toBe(0);
          digests.push(
            tamper(
              warehouse,
              "SELECT table_name, row_id, operation, digest FROM _ocs_audit WHERE operation IN ('create', 'change') ORDER BY seq;",
            )
              .trim()
              .split('\n'),
          );
        }
        expect(digests[0]!.length).toBeGreaterThan(40);
        expect(digests[1]).toEqual(digests[0]);
      } finally {
        await server.close();
        for (const warehouse of warehouses) await warehouse.dispose();
        directory.remove();
      }
    });
  },
);
