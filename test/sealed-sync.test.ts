/**
 * Sealed fields end to end, through the CLI (`main`), against the fake export server (which seals
 * each sealed field under the team public key as the real server does) into a real warehouse of
 * every test dialect: the four secrets policies, per-resource overrides, the missing-key and
 * no-public-key skips, values that do not open, keygen/unseal, and that no secret reaches output.
 */
import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { chmodSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { FakeDataset } from '../src/fake-server/dataset.js';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import type { FakeManifestDocument } from '../src/fake-server/openapi.js';
import { startFakeServer, type FakeServer } from '../src/fake-server/server.js';
import { ARCHIVE_PREFIX } from '../src/sealing/archive.js';
import { encodeJson } from '../src/sealing/json-text.js';
import { openSealedValue } from '../src/sealing/open.js';
import {
  createTestWarehouse,
  docsSqlBlocks,
  expectWarehouseEqualsSource,
  runCli,
  sourceRowsAsStored,
  syncEnv,
  teamKeys,
  temporaryDirectory,
  splitDialects,
  type CliResult,
  type TestWarehouse,
  FAST_RETRIES_YAML,
  closeCliTestBed,
  openCliTestBed,
} from './support.js';

/** 20 rows per resource in pages of 7: three pages, so "an earlier page" exists. */
const PAGE_SIZE = 7;
const ROWS_PER_RESOURCE = 20;
/** Overrides syncEnv's OCS_PRIVATE_KEY: the run has no private key at all. */
const NO_PRIVATE_KEY = { OCS_PRIVATE_KEY: undefined };
/** Every sealed value on the wire is base64 of `{"k": "`…: this prefix marks a leaked token. */
const TOKEN_PREFIX = Buffer.from('{"k": "').toString('base64').slice(0, 8);

type Env = Record<string, string | undefined>;
type StoredRow = Record<string, unknown>;

interface SealedResource {
  resource: string;
  fields: string[];
}

function sealedResourcesOf(dataset: FakeDataset): SealedResource[] {
  return (dataset.fixture ?? [])
    .filter((entry) => entry.sealedFields.length > 0)
    .map((entry) => ({ resource: entry.resource, fields: entry.sealedFields }));
}

/** A value as it reads back from a JSON column (bigint-safe JSON text, parsed again). */
function asJsonColumnValue(value: unknown): unknown {
  return JSON.parse(encodeJson(value, 'compact'));
}

let otherKeyPem: string | undefined;
/** A second, unrelated 2048-bit private key (the "wrong key"); generated once per file. */
function otherPrivateKey(): string {
  otherKeyPem ??= generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  }).privateKey;
  return otherKeyPem;
}

/** Flip one character in the middle of the Fernet token inside a sealed value's envelope. */
function tamperToken(sealed: string): string {
  const envelope = JSON.parse(Buffer.from(sealed, 'base64').toString('utf8')) as {
    k: string;
    v: string;
  };
  const middle = Math.floor(envelope.v.length / 2);
  const flipped = envelope.v[middle] === 'A' ? 'B' : 'A';
  const v = envelope.v.slice(0, middle) + flipped + envelope.v.slice(middle + 1);
  return Buffer.from(
    `{"k": ${JSON.stringify(envelope.k)}, "v": ${JSON.stringify(v)}}`,
    'utf8',
  ).toString('base64');
}

/** The OpenAPI document without the sealed-field marker on `fields` (all fields when omitted). */
function withoutSealedMarkers(document: unknown, fields?: string[]): unknown {
  const copy = structuredClone(document) as {
    components: {
      schemas: Record<string, { properties?: Record<string, { description?: string }> }>;
    };
  };
  for (const schema of Object.values(copy.components.schemas)) {
    for (const [name, property] of Object.entries(schema.properties ?? {})) {
      if (fields && !fields.includes(name)) continue;
      if (property.description?.startsWith('Sealed under')) delete property.description;
    }
  }
  return copy;
}

function everythingPrinted(result: CliResult): string {
  return result.stdout + result.stderr + result.logs;
}

/** Log lines as objects (pino JSON). */
function logLines(result: CliResult): Array<Record<string, unknown>> {
  return result.logs
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe.each(splitDialects)('sealed fields end to end through the CLI (%s)', (dialect) => {
  let server: FakeServer;
  let dataset: FakeDataset;
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let configFile: string;
  /** What the server sent for each sealed value: `resource/id/field` -> token. */
  let served: Map<string, string>;

  const start = async (options: Partial<Parameters<typeof startFakeServer>[0]> = {}) => {
    dataset = createSampleDataset({ rowsPerResource: ROWS_PER_RESOURCE, seed: 13 });
    const sealedFields = new Map(
      sealedResourcesOf(dataset).map((entry) => [entry.resource, entry.fields]),
    );
    served = new Map();
    server = await startFakeServer({
      dataset,
      teamPublicKeyPem: teamKeys().publicKey,
      // Records the tokens on the wire (transformRow sees rows after sealing).
      transformRow: (resource, row) => {
        for (const field of sealedFields.get(resource) ?? []) {
          if (typeof row[field] === 'string')
            served.set(`${resource}/${String(row.id)}/${field}`, row[field]);
        }
        return row;
      },
      ...options,
    });
  };
  const sync = (env: Env = {}, extraArgs: string[] = []) =>
    runCli(['--config', configFile, 'sync', ...extraArgs], {
      ...syncEnv(server.url, warehouse.env, { OCS_PAGE_SIZE: String(PAGE_SIZE) }),
      ...env,
    });
  const statusJson = async () => {
    const status = await runCli(['status', '--json'], warehouse.env);
    const { resources } = JSON.parse(status.stdout) as {
      resources: Array<{ resource: string; rows: number; last_error: string | null }>;
    };
    // Exit 5 exactly when some resource's last attempt ended with an error.
    expect(status.code).toBe(resources.some((row) => row.last_error !== null) ? 5 : 0);
    return resources.map((row) => ({ ...row, lastError: row.last_error }));
  };
  const firstId = (resource: string) => dataset.rows(resource)[0]?.id;
  const secondId = (resource: string) => dataset.rows(resource)[1]?.id;
  /** Each sealed resource's stored rows: ids equal to the source, unsealed columns equal too. */
  const expectSealedTables = async (
    checkValue: (
      stored: unknown,
      plaintext: unknown,
      where: { resource: string; id: string; field: string },
    ) => void,
  ) => {
    for (const { resource, fields } of sealedResourcesOf(dataset)) {
      const stored = await warehouse.readTable(resource);
      const source = sourceRowsAsStored(dataset, resource);
      expect(
        stored.map((row) => row.id),
        `${resource} ids`,
      ).toEqual(source.map((row) => row.id));
      stored.forEach((row, index) => {
        const sourceRow = source[index]!;
        for (const field of fields) {
          checkValue(row[field], sourceRow[field], { resource, id: String(row.id), field });
        }
      });
      const withoutSealed = (rows: StoredRow[]) =>
        rows.map((row) =>
          Object.fromEntries(Object.entries(row).filter(([key]) => !fields.includes(key))),
        );
      expect(withoutSealed(stored), `${resource} unsealed columns`).toEqual(withoutSealed(source));
    }
  };
  const columnTypes = async (resource: string) =>
    Object.fromEntries(
      (
        await warehouse.query(
          `SELECT column_name, column_type FROM "_ocs_columns" WHERE table_name = '${resource}'`,
        )
      ).map((row) => [row.column_name, row.column_type]),
    );
  /** The SQL type of a column: PostgreSQL's data_type, SQLite's declared type. */
  const sqlType = async (table: string, column: string) => {
    if (dialect === 'postgres') {
      const [row] = await warehouse.query(
        `SELECT data_type FROM information_schema.columns WHERE table_schema = '${warehouse.env.OCS_WAREHOUSE_SCHEMA}' ` +
          `AND table_name = '${table}' AND column_name = '${column}'`,
      );
      return row?.data_type;
    }
    const columns = await warehouse.query(`PRAGMA table_info("${table}")`);
    return columns.find((row) => row.name === column)?.type;
  };
  const writeConfig = (yaml: string) => writeFileSync(configFile, FAST_RETRIES_YAML + yaml);

  beforeEach(async () => {
    ({ directory, warehouse, configFile } = await openCliTestBed(dialect));
  });
  afterEach(() => closeCliTestBed({ directory, warehouse, configFile }, server));

  it('plaintext (the default with a private key): sealed columns hold the opened JSON values', async () => {
    await start();
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    // The wire carried tokens that open to the stored values, not the values themselves.
    const sealed = sealedResourcesOf(dataset);
    expect(sealed.map((entry) => entry.resource)).toEqual(
      expect.arrayContaining(['llm_providers', 'chatbot_channels', 'participant_data']),
    );
    const expectedTokens = sealed.reduce(
      (sum, { resource, fields }) =>
        sum +
        sourceRowsAsStored(dataset, resource).reduce(
          (n, row) => n + fields.filter((f) => row[f] !== null).length,
          0,
        ),
      0,
    );
    expect(served.size).toBe(expectedTokens);
    for (const token of served.values()) expect(token.startsWith(TOKEN_PREFIX)).toBe(true);
    expect(await columnTypes('llm_providers')).toMatchObject({ config: 'json' });
    expect(await sqlType('llm_providers', 'config')).toBe(
      dialect === 'postgres' ? 'jsonb' : 'TEXT',
    );
    expect(await columnTypes('participant_data')).toMatchObject({
      data: 'json',
      encryption_key: 'json',
    });
  });

  it('sealed: stores the server tokens as received, needs no private key', async () => {
    await start();
    const result = await sync({ ...NO_PRIVATE_KEY, OCS_SECRETS_DEFAULT: 'sealed' });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const privateKey = createPrivateKey(teamKeys().privateKey);
    let checked = 0;
    await expectSealedTables((stored, plaintext, { resource, id, field }) => {
      const where = `${resource}/${id}/${field}`;
      expect(typeof stored, where).toBe('string');
      expect(stored, where).toBe(served.get(where));
      expect(asJsonColumnValue(openSealedValue(stored as string, privateKey)), where).toEqual(
        plaintext,
      );
      checked += 1;
    });
    expect(checked).toBe(served.size);
    expect(await columnTypes('llm_providers')).toMatchObject({ config: 'text' });
    await expectWarehouseEqualsSource(warehouse, dataset, {
      skip: sealedResourcesOf(dataset).map((e) => e.resource),
    });
  });

  it('reseal: keygen --archive, sync stores archive ciphertext only, unseal prints and opens it in place', async () => {
    await start();
    const keysDir = join(directory.path, 'archive-keys');
    const keygen = await runCli(['keygen', '--archive', '--out', keysDir], {});
    expect(keygen.code).toBe(0);
    const publicKey = /OCS_ARCHIVE_PUBLIC_KEY=(\S+)/.exec(keygen.stdout)?.[1];
    expect(publicKey).toBeDefined();
    expect(readFileSync(join(keysDir, 'ocs-archive-public.key'), 'utf8').trim()).toBe(publicKey);
    const secretKeyFile = join(keysDir, 'ocs-archive-secret.key');
    expect(statSync(secretKeyFile).mode & 0o777).toBe(0o600);
    const secretKeyText = readFileSync(secretKeyFile, 'utf8').trim();
    expect(keygen.stdout).not.toContain(secretKeyText);

    writeConfig(`secrets:\n  default: reseal\n  archive_public_key: ${publicKey}\n`);
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const sealed = sealedResourcesOf(dataset);
    const plaintexts: string[] = [];
    let archived = 0;
    await expectSealedTables((stored, plaintext, { resource, id, field }) => {
      expect(typeof stored).toBe('string');
      expect((stored as string).startsWith(ARCHIVE_PREFIX), `${resource}/${id}/${field}`).toBe(
        true,
      );
      expect(stored).not.toBe(served.get(`${resource}/${id}/${field}`));
      plaintexts.push(typeof plaintext === 'string' ? plaintext : JSON.stringify(plaintext));
      archived += 1;
    });
    expect(archived).toBe(served.size);
    // No plaintext anywhere in the stored sealed tables (the api keys are the telling part).
    for (const { resource } of sealed) {
      const dump = JSON.stringify(
        await warehouse.query(`SELECT * FROM "${resource}"`),
        (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value),
      );
      for (const config of sourceRowsAsStored(dataset, resource).map((row) => row.config)) {
        const apiKey = (config as { api_key?: string } | undefined)?.api_key;
        if (apiKey) expect(dump).not.toContain(apiKey);
      }
    }
    expect(plaintexts.length).toBeGreaterThan(0);

    // To stdout: one JSON line per value, the warehouse untouched.
    const printed = await runCli(['unseal', '--archive-key', secretKeyFile], warehouse.env);
    expect(printed.stderr).toBe('');
    expect(printed.code).toBe(0);
    const lines = printed.stdout
      .split('\n')
      .filter((line) => line !== '')
      .map(
        (line) =>
          JSON.parse(line) as { resource: string; id: number; field: string; value: unknown },
      );
    // Each value exactly once (a dialect that pages by id text instead of number would repeat rows).
    expect(lines).toHaveLength(served.size);
    const opened = new Map(
      lines.map((line) => [`${line.resource}/${line.id}/${line.field}`, line.value]),
    );
    await expectSealedTables((stored, plaintext, { resource, id, field }) => {
      expect((stored as string).startsWith(ARCHIVE_PREFIX)).toBe(true);
      expect(opened.get(`${resource}/${id}/${field}`), `${resource}/${id}/${field}`).toEqual(
        plaintext,
      );
    });
    expect(printed.logs).not.toContain(secretKeyText);

    // Only some resources.
    const some = await runCli(
      ['unseal', '--archive-key', secretKeyFile, '--resource', 'llm_providers'],
      warehouse.env,
    );
    expect(some.code).toBe(0);
    const someLines = some.stdout.split('\n').filter((line) => line !== '');
    expect(someLines).toHaveLength(ROWS_PER_RESOURCE);
    expect(
      someLines.every(
        (line) => (JSON.parse(line) as { resource: string }).resource === 'llm_providers',
      ),
    ).toBe(true);

    // In place: the columns (text) then hold the opened values as JSON text.
    const inPlace = await runCli(
      ['unseal', '--archive-key', secretKeyFile, '--in-place'],
      warehouse.env,
    );
    expect(inPlace.code).toBe(0);
    expect(inPlace.stdout).toBe('');
    expect(inPlace.logs).toMatch(new RegExp(`"opened":${served.size}\\b`));
    expect(await columnTypes('llm_providers')).toMatchObject({ config: 'text' });
    expect(await sqlType('llm_providers', 'config')).toBe(dialect === 'postgres' ? 'text' : 'TEXT');
    await expectSealedTables((stored, plaintext, where) => {
      expect(typeof stored, `${where.resource}/${where.id}/${where.field}`).toBe('string');
      expect(JSON.parse(stored as string), `${where.resource}/${where.id}/${where.field}`).toEqual(
        plaintext,
      );
    });
    await expectWarehouseEqualsSource(warehouse, dataset, {
      skip: sealed.map((entry) => entry.resource),
    });
    // Repeating finds nothing left to open.
    const again = await runCli(
      ['unseal', '--archive-key', secretKeyFile, '--in-place'],
      warehouse.env,
    );
    expect(again.code).toBe(0);
    expect(again.logs).toMatch(/"opened":0\b/);
  });

  it('reseal without an archive public key stops at start with the setting to fix', async () => {
    await start();
    const result = await sync({ OCS_SECRETS_DEFAULT: 'reseal' });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /secrets\.default asks for reseal, which needs secrets\.archive_public_key \(OCS_ARCHIVE_PUBLIC_KEY\)/,
    );
    expect(server.requests).toEqual([]);
  });

  it('drop: sealed columns are null, no private key needed', async () => {
    await start();
    const result = await sync({ ...NO_PRIVATE_KEY, OCS_SECRETS_DEFAULT: 'drop' });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    let dropped = 0;
    await expectSealedTables((stored) => {
      expect(stored).toBeNull();
      dropped += 1;
    });
    expect(dropped).toBeGreaterThanOrEqual(sealedResourcesOf(dataset).length * ROWS_PER_RESOURCE);
    await expectWarehouseEqualsSource(warehouse, dataset, {
      skip: sealedResourcesOf(dataset).map((e) => e.resource),
    });
  });

  it('a per-resource policy overrides the default', async () => {
    await start();
    writeConfig('secrets:\n  default: plaintext\n  resources:\n    participant_data: drop\n');
    const result = await sync();
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const participantData = await warehouse.readTable('participant_data');
    expect(participantData).toHaveLength(ROWS_PER_RESOURCE);
    for (const row of participantData) {
      expect(row.data).toBeNull();
      expect(row.encryption_key).toBeNull();
    }
    const source = sourceRowsAsStored(dataset, 'participant_data');
    expect(participantData.map((row) => row.participant)).toEqual(
      source.map((row) => row.participant),
    );
    // Every other sealed resource is opened as the default says.
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: ['participant_data'] });
  });

  it('without a private key, the default policy skips the sealed resources with a fix, syncs the rest, exits 3', async () => {
    await start();
    const sealed = sealedResourcesOf(dataset);
    const result = await sync(NO_PRIVATE_KEY);
    expect(result.code).toBe(3);
    // Said once, naming every resource, with the fix once.
    const sealedList = sealed.map((entry) => entry.resource).join(', ');
    expect(result.stdout).toContain(
      `skipped ${sealedList}: Not requested: their sealed fields need the team's private key to be opened`,
    );
    expect(result.stdout.match(/hint: Set OCS_PRIVATE_KEY_FILE/g)).toHaveLength(1);
    const skippedLogs = logLines(result).filter((line) => /Not requested/.test(String(line.msg)));
    expect(skippedLogs).toHaveLength(1);
    expect(skippedLogs[0]?.level).toBe(40);
    expect((skippedLogs[0]?.resources as string[]).sort()).toEqual(
      sealed.map((entry) => entry.resource).sort(),
    );
    const summary = logLines(result).find((line) => line.msg === 'Sync partial');
    expect((summary?.skipped as string[]).sort()).toEqual(
      sealed.map((entry) => entry.resource).sort(),
    );
    // Nothing was even asked of the server for them.
    const sealedNames = new Set(sealed.map((entry) => entry.resource));
    expect(
      server.requests.filter((request) => request.resource && sealedNames.has(request.resource)),
    ).toEqual([]);
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: [...sealedNames] });

    const status = await statusJson();
    for (const resource of sealedNames) {
      expect(status.find((row) => row.resource === resource)?.lastError, resource).toMatch(
        /private key/,
      );
    }
    expect(status.find((row) => row.resource === 'users')?.lastError).toBeNull();

    // Following the hint fixes it.
    const fixed = await sync();
    expect(fixed.code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const after = await statusJson();
    expect(after.find((row) => row.resource === 'llm_providers')?.lastError).toBeNull();
  });

  it("when the server has no public key registered, skips with the server's reason and the keygen hint", async () => {
    await start({ teamPublicKeyPem: undefined });
    const sealed = sealedResourcesOf(dataset);
    const sealedNames = sealed.map((entry) => entry.resource);
    const result = await sync();
    expect(result.code).toBe(3);
    // team/ says has_public_key: false, so they are not even requested: one message, one fix.
    expect(result.stdout).toContain(
      `skipped ${sealedNames.join(', ')}: Not requested: the team has no public key registered on the server`,
    );
    expect(result.stdout.match(/ocs-sync keygen/g)).toHaveLength(1);
    expect(
      server.requests.filter(
        (request) => request.resource && sealedNames.includes(request.resource),
      ),
    ).toEqual([]);
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: sealedNames });

    const status = await statusJson();
    for (const resource of sealedNames) {
      const lastError = status.find((row) => row.resource === resource)?.lastError;
      expect(lastError, resource).toMatch(/no public key registered/);
      expect(lastError, resource).toMatch(/ocs-sync keygen/);
    }
    const table = await runCli(['status'], warehouse.env);
    expect(table.stdout).toMatch(/llm_providers .*Not requested/);

    // The admin registers the key: the next run gets everything.
    server.options.teamPublicKeyPem = teamKeys().publicKey;
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('a team object without has_public_key: the sealed resources are asked, and the 400 or 409 skips them', async () => {
    for (const status of [400, 409]) {
      await start({ teamPublicKeyPem: undefined, team: { has_public_key: undefined } });
      const sealedNames = sealedResourcesOf(dataset).map((entry) => entry.resource);
      if (status === 409) {
        // What newer servers document for the same refusal.
        for (const name of sealedNames) {
          server.faults.failNext(
            1,
            {
              kind: 'status',
              status: 409,
              body: { detail: 'Team has no registered public key; secret data cannot be sealed.' },
            },
            { resource: name },
          );
        }
      }
      const result = await sync();
      expect(result.code).toBe(3);
      // One line for all of them: the same reason is said once.
      expect(result.stdout).toContain(
        `skipped ${sealedNames.join(', ')}: the server says "Team has no registered public key; secret data cannot be sealed."`,
      );
      expect(
        server.requests.filter((r) => r.status === status && r.resource).map((r) => r.resource),
      ).toEqual(sealedNames);
      await expectWarehouseEqualsSource(warehouse, dataset, { skip: sealedNames });
      await server.close();
      await warehouse.dispose();
      warehouse = await createTestWarehouse(dialect);
    }
  });

  it.skipIf(dialect !== 'sqlite')(
    'a new SQLite warehouse and its -wal/-shm files are 0600; opened secrets readable by others get one warning',
    async () => {
      await start();
      const path = warehouse.env.OCS_WAREHOUSE_URL!;
      expect((await sync()).code).toBe(0);
      expect(statSync(path).mode & 0o777).toBe(0o600);
      // SQLite gives its companion files the database file's mode: see them while a writer has them.
      const db = new Database(path);
      db.pragma('journal_mode = WAL');
      db.exec('CREATE TABLE wal_probe (x); INSERT INTO wal_probe VALUES (1); DROP TABLE wal_probe');
      for (const companion of [`${path}-wal`, `${path}-shm`]) {
        expect(statSync(companion).mode & 0o777, companion).toBe(0o600);
      }
      db.close();
      expect((await sync()).logs).not.toMatch(/can be read by group or others/);

      chmodSync(path, 0o644);
      const exposed = await sync();
      expect(exposed.code).toBe(0);
      const warnings = exposed.logs.match(/can be read by group or others[^"]*/g) ?? [];
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toContain(`Run: chmod 600 ${path}`);

      // Nothing opened is stored under the sealed policy: no warning for the same mode.
      writeConfig('secrets:\n  default: sealed\n');
      await warehouse.dispose();
      warehouse = await createTestWarehouse(dialect);
      const sealedOnly = warehouse.env.OCS_WAREHOUSE_URL!;
      expect((await sync()).code).toBe(0);
      chmodSync(sealedOnly, 0o644);
      expect((await sync()).logs).not.toMatch(/can be read by group or others/);
    },
  );

  it.skipIf(dialect !== 'postgres')(
    "the docs' PostgreSQL grants keep tables with sealed fields from analysts, as written",
    async () => {
      writeConfig('history: true\n');
      await start();
      expect((await sync()).code).toBe(0);
      const [block] = docsSqlBlocks('secrets-grants');
      expect(block).toBeDefined();
      const schema = warehouse.env.OCS_WAREHOUSE_SCHEMA!;
      const role = `analysts_${schema}`;
      await warehouse.query(`CREATE ROLE "${role}" NOLOGIN`);
      try {
        await warehouse.query(
          block!.replace(/\bocs\b/g, schema).replace(/\banalysts\b/g, `"${role}"`),
        );
        await warehouse.query(`SET ROLE "${role}"`);
        const [users] = await warehouse.query('SELECT count(*) AS n FROM users');
        expect(Number(users?.n)).toBe(dataset.rows('users').length);
        expect(await warehouse.query('SELECT count(*) FROM chat_messages__history')).toHaveLength(
          1,
        );
        for (const table of [
          'llm_providers',
          'llm_providers__history',
          'participant_data',
          '_ocs_state',
        ]) {
          await expect(warehouse.query(`SELECT * FROM "${table}"`), table).rejects.toThrow(
            /permission denied/,
          );
        }
      } finally {
        await warehouse.query('RESET ROLE');
        await warehouse.query(`DROP OWNED BY "${role}"; DROP ROLE "${role}"`);
      }
    },
  );

  describe('which fields are sealed: the schema marks them, the values show them', () => {
    it('a field the schema does not mark but whose values are sealed is found, opened and remembered', async () => {
      await start();
      server.options.openApi = withoutSealedMarkers(server.openApi(), ['encryption_key']);
      const result = await sync();
      expect(result.code).toBe(0);
      expect(result.logs).toMatch(
        /participant_data: encryption_key hold sealed values the server's schema does not mark; treated as sealed fields/,
      );
      await expectWarehouseEqualsSource(warehouse, dataset);
      const [state] = await warehouse.query(
        `SELECT value FROM "_ocs_state" WHERE key = 'sealed_fields'`,
      );
      expect(JSON.parse(String(state?.value)).participant_data).toEqual(['data', 'encryption_key']);
    });

    it('a secret resource with no field marked (or no schema at all) is opened by shape alone', async () => {
      await start();
      server.options.openApi = withoutSealedMarkers(server.openApi());
      const unmarked = await sync();
      expect(unmarked.code).toBe(0);
      await expectWarehouseEqualsSource(warehouse, dataset);

      await server.close();
      await warehouse.dispose();
      warehouse = await createTestWarehouse(dialect);
      await start({ serveOpenApi: false });
      const noSchema = await sync();
      expect(noSchema.code).toBe(0);
      expect(noSchema.logs).toMatch(/does not publish its export schema/);
      // Types from the rows: a null-only field has no column yet, so compare what is there.
      for (const { resource, fields } of sealedResourcesOf(dataset)) {
        const stored = await warehouse.readTable(resource);
        const source = sourceRowsAsStored(dataset, resource);
        for (const field of fields) {
          expect(
            stored.map((row) => row[field] ?? null),
            `${resource}.${field}`,
          ).toEqual(source.map((row) => row[field]));
        }
      }
      expect(everythingPrinted(noSchema)).not.toContain(TOKEN_PREFIX);
    });

    it('null and an empty string in a marked field are stored as they came: nothing was sealed', async () => {
      await start({
        transformRow: (resource, row) => {
          if (resource !== 'llm_providers') return row;
          if (row.id === firstId('llm_providers')) return { ...row, config: null };
          if (row.id === secondId('llm_providers')) return { ...row, config: '' };
          return row;
        },
      });
      const result = await sync();
      expect(result.code).toBe(0);
      const stored = await warehouse.readTable('llm_providers');
      expect(stored[0]?.config).toBeNull();
      expect(stored[1]?.config).toBe('');
      const source = sourceRowsAsStored(dataset, 'llm_providers');
      expect(stored.slice(2)).toEqual(source.slice(2));
    });

    it('a marked field carrying a plain value fails its resource at that page, storing nothing of it', async () => {
      await start({
        transformRow: (resource, row) =>
          resource === 'llm_providers' && row.id === secondId('llm_providers')
            ? { ...row, config: { api_key: 'sk-live-unsealed-leak' } }
            : row,
      });
      const result = await sync();
      expect(result.code).toBe(3);
      expect(result.stdout).toContain(
        `failed llm_providers: Cannot open sealed field llm_providers.config of row id ${secondId('llm_providers')}: the server's schema marks it sealed, but its value (a JSON object) is not a sealed value; the page was not stored`,
      );
      expect(everythingPrinted(result)).not.toContain('sk-live-unsealed-leak');
      expect(await warehouse.readTable('llm_providers')).toEqual([]);
      const others = sealedResourcesOf(dataset)
        .map((entry) => entry.resource)
        .filter((name) => name !== 'llm_providers');
      await expectWarehouseEqualsSource(warehouse, dataset, { resources: others });
    });

    it('sealed values in a resource the manifest does not mark secret are opened, or refused without a key', async () => {
      const notSecret = (manifest: FakeManifestDocument): FakeManifestDocument => ({
        ...manifest,
        entries: manifest.entries.map((entry) =>
          entry.resource === 'llm_providers' ? { ...entry, secret: false } : entry,
        ),
      });
      await start({ transformManifest: notSecret });
      server.options.openApi = withoutSealedMarkers(server.openApi(), ['config']);
      const opened = await sync();
      expect(opened.code).toBe(0);
      await expectWarehouseEqualsSource(warehouse, dataset);

      await server.close();
      await warehouse.dispose();
      warehouse = await createTestWarehouse(dialect);
      await start({ transformManifest: notSecret });
      server.options.openApi = withoutSealedMarkers(server.openApi(), ['config']);
      const refused = await sync(NO_PRIVATE_KEY);
      expect(refused.code).toBe(3);
      expect(refused.stdout).toContain(
        `skipped llm_providers: config hold sealed values and the "plaintext" policy needs the team's private key, which is not configured; nothing sealed was stored.`,
      );
      expect(await warehouse.readTable('llm_providers')).toEqual([]);
    });
  });

  it('a wrong private key fails each sealed resource at its first page, naming resource, row and field', async () => {
    await start();
    const sealed = sealedResourcesOf(dataset);
    const sealedNames = sealed.map((entry) => entry.resource);
    const wrong = await sync({ OCS_PRIVATE_KEY: otherPrivateKey() });
    expect(wrong.code).toBe(3);
    const firstId = String(dataset.ids('llm_providers')[0]);
    expect(wrong.stdout).toContain(
      `failed llm_providers: Cannot open sealed field llm_providers.config of row id ${firstId}: key does not match (RSA-OAEP failed)`,
    );
    for (const { resource, fields } of sealed) {
      expect(wrong.stdout).toMatch(
        new RegExp(
          `failed ${resource}: Cannot open sealed field ${resource}\\.(${fields.join('|')}) of row id \\d+: key does not match`,
        ),
      );
      expect(await warehouse.readTable(resource), resource).toEqual([]);
    }
    expect(wrong.stdout).toMatch(
      /hint: Check that the private key matches the public key registered on the team/,
    );
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: sealedNames });
    for (const token of served.values())
      expect(everythingPrinted(wrong)).not.toContain(token.slice(20, 60));
    const status = await statusJson();
    expect(status.find((row) => row.resource === 'llm_providers')?.lastError).toMatch(
      new RegExp(`llm_providers\\.config of row id ${firstId}`),
    );

    // The right key gets everything; then new rows under the wrong key leave the table as it was.
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const before = await warehouse.readTable('llm_providers');
    const [added] = dataset.insert('llm_providers', 2);
    const again = await sync({ OCS_PRIVATE_KEY: otherPrivateKey() });
    expect(again.code).toBe(3);
    expect(again.stdout).toContain(
      `failed llm_providers: Cannot open sealed field llm_providers.config of row id ${String(added!.id)}`,
    );
    expect(await warehouse.readTable('llm_providers')).toEqual(before);
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
  });

  it('a tampered token stops its resource at that page; earlier pages stay, the others go on', async () => {
    await start();
    const ids = dataset.ids('llm_providers').map(String);
    // Row index 9 is on the second page (rows 7..13).
    const tamperedId = ids[9]!;
    const recordServed = server.options.transformRow!;
    server.options.transformRow = (resource, row) => {
      const sent = recordServed(resource, row);
      return resource === 'llm_providers' && String(row.id) === tamperedId
        ? { ...sent, config: tamperToken(sent.config as string) }
        : sent;
    };
    const result = await sync();
    expect(result.code).toBe(3);
    expect(result.stdout).toContain(
      `failed llm_providers: Cannot open sealed field llm_providers.config of row id ${tamperedId}: HMAC mismatch: tampered or wrong key`,
    );
    expect(result.stdout.match(/^ {2}failed /gm)).toHaveLength(1);
    const stored = await warehouse.readTable('llm_providers');
    expect(stored).toEqual(sourceRowsAsStored(dataset, 'llm_providers').slice(0, PAGE_SIZE));
    expect(everythingPrinted(result)).not.toContain(
      served.get(`llm_providers/${tamperedId}/config`)!.slice(20, 60),
    );
    await expectWarehouseEqualsSource(warehouse, dataset, { skip: ['llm_providers'] });

    // Untampered, the next run resumes at that page.
    server.options.transformRow = recordServed;
    server.requests.length = 0;
    expect((await sync()).code).toBe(0);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const firstRequest = server.requests.find((request) => request.resource === 'llm_providers');
    expect(firstRequest?.query.cursor).toBeDefined();
  });

  /** Plaintext secrets of the dataset that must never be printed or logged. */
  const distinctivePlaintexts = (): string[] => {
    const secrets: string[] = [];
    for (const { resource, fields } of sealedResourcesOf(dataset)) {
      for (const row of sourceRowsAsStored(dataset, resource)) {
        for (const field of fields) {
          const value = row[field];
          const apiKey = (value as { api_key?: unknown } | null)?.api_key;
          if (typeof apiKey === 'string') secrets.push(apiKey);
          if (typeof value === 'string' && value.length >= 8) secrets.push(value);
        }
      }
    }
    return secrets;
  };
  const expectNoSecrets = (text: string, extra: string[] = []) => {
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).not.toMatch(/MII[A-Za-z0-9+/]{20}/);
    expect(text).not.toContain(TOKEN_PREFIX);
    for (const token of served.values()) expect(text).not.toContain(token.slice(20, 60));
    for (const secret of [...distinctivePlaintexts(), ...extra]) expect(text).not.toContain(secret);
  };

  it('at trace level, no plaintext, token or key material reaches the output (plaintext policy)', async () => {
    await start();
    expect(distinctivePlaintexts().length).toBeGreaterThan(ROWS_PER_RESOURCE * 4);
    const result = await sync({ OCS_LOG_LEVEL: 'trace' });
    expect(result.code).toBe(0);
    expectNoSecrets(everythingPrinted(result));
    // A failing run too: the error names the row, never the value.
    const failing = await runCli(
      ['--config', configFile, 'sync', '--full-refresh', 'llm_providers'],
      {
        ...syncEnv(server.url, warehouse.env, {
          OCS_PAGE_SIZE: String(PAGE_SIZE),
          OCS_LOG_LEVEL: 'trace',
        }),
        OCS_PRIVATE_KEY: otherPrivateKey(),
      },
    );
    expect(failing.code).toBe(3);
    expectNoSecrets(everythingPrinted(failing));
  });

  it('at trace level, no plaintext, token, archive key or key material reaches the output (reseal policy)', async () => {
    await start();
    const keysDir = join(directory.path, 'archive-keys');
    const keygen = await runCli(['keygen', '--archive', '--out', keysDir], {});
    expect(keygen.code).toBe(0);
    const secretKeyFile = join(keysDir, 'ocs-archive-secret.key');
    const archiveSecret = readFileSync(secretKeyFile, 'utf8').trim();
    const publicKey = readFileSync(join(keysDir, 'ocs-archive-public.key'), 'utf8').trim();
    const result = await sync({
      OCS_LOG_LEVEL: 'trace',
      OCS_SECRETS_DEFAULT: 'reseal',
      OCS_ARCHIVE_PUBLIC_KEY: publicKey,
    });
    expect(result.code).toBe(0);
    const printed = everythingPrinted(result);
    expectNoSecrets(printed, [archiveSecret]);
    expect(printed).not.toContain(ARCHIVE_PREFIX);

    // unseal prints the values on stdout (asked for), but not in its logs.
    const unsealed = await runCli(['unseal', '--archive-key', secretKeyFile], {
      ...warehouse.env,
      OCS_LOG_LEVEL: 'trace',
    });
    expect(unsealed.code).toBe(0);
    expect(unsealed.stdout).toContain(distinctivePlaintexts()[0]!);
    expectNoSecrets(unsealed.stderr + unsealed.logs, [archiveSecret]);
    const inPlace = await runCli(['unseal', '--archive-key', secretKeyFile, '--in-place'], {
      ...warehouse.env,
      OCS_LOG_LEVEL: 'trace',
    });
    expect(inPlace.code).toBe(0);
    expectNoSecrets(everythingPrinted(inPlace), [archiveSecret]);
  });
});

describe('team keys through the CLI', () => {
  let directory: ReturnType<typeof temporaryDirectory>;
  let warehouse: TestWarehouse;
  let server: FakeServer | undefined;
  let dataset: FakeDataset;

  beforeEach(async () => {
    directory = temporaryDirectory();
    warehouse = await createTestWarehouse('sqlite');
    dataset = createSampleDataset({ rowsPerResource: 5, seed: 21 });
  });
  afterEach(async () => {
    await server?.close();
    server = undefined;
    await warehouse.dispose();
    directory.remove();
  });

  it('keygen, register, sync: from a new key pair to the first opened row; refuses to overwrite; warns on 0640', async () => {
    const keysDir = join(directory.path, 'keys');
    const keygen = await runCli(['keygen', '--out', keysDir, '--bits', '2048'], {});
    expect(keygen.stderr).toBe('');
    expect(keygen.code).toBe(0);
    const privateKeyFile = join(keysDir, 'ocs-team-private.pem');
    const publicKeyFile = join(keysDir, 'ocs-team-public.pem');
    expect(statSync(privateKeyFile).mode & 0o777).toBe(0o600);
    const publicKeyPem = /-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/.exec(
      keygen.stdout,
    )?.[0];
    expect(publicKeyPem).toBeDefined();
    expect(readFileSync(publicKeyFile, 'utf8').trim()).toBe(publicKeyPem);
    expect(keygen.stdout).toMatch(/Register this public key on your team in Open Chat Studio/);
    expect(keygen.stdout).toContain(`OCS_PRIVATE_KEY_FILE=${privateKeyFile}`);
    expect(keygen.stdout).not.toContain('PRIVATE KEY-----');
    const privateKeyPem = readFileSync(privateKeyFile, 'utf8');
    expect(createPrivateKey(privateKeyPem).asymmetricKeyDetails?.modulusLength).toBe(2048);

    const again = await runCli(['keygen', '--out', keysDir, '--bits', '2048'], {});
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`Refusing to overwrite ${privateKeyFile}: it already exists.`);
    expect(readFileSync(privateKeyFile, 'utf8')).toBe(privateKeyPem);
    expect(readFileSync(publicKeyFile, 'utf8').trim()).toBe(publicKeyPem);

    server = await startFakeServer({ dataset, teamPublicKeyPem: publicKeyPem });
    const env = {
      ...syncEnv(server.url, warehouse.env),
      OCS_PRIVATE_KEY: undefined,
      OCS_PRIVATE_KEY_FILE: privateKeyFile,
    };
    const first = await runCli(['sync'], env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.logs).not.toMatch(/accessible to group or others/);
    await expectWarehouseEqualsSource(warehouse, dataset);
    const [firstProvider] = await warehouse.readTable('llm_providers');
    expect(firstProvider?.config).toEqual(sourceRowsAsStored(dataset, 'llm_providers')[0]?.config);
    expect((firstProvider?.config as { api_key: string }).api_key).toMatch(/^sk-/);

    chmodSync(privateKeyFile, 0o640);
    const exposed = await runCli(['sync'], env);
    expect(exposed.code).toBe(0);
    const warning = logLines(exposed).find((line) =>
      /accessible to group or others/.test(String(line.msg)),
    );
    expect(warning?.level).toBe(40);
    expect(warning?.msg).toBe(
      `Private key file ${privateKeyFile} is accessible to group or others (mode 0640); restrict it with: chmod 600 ${privateKeyFile}`,
    );
  });

  it('keygen refuses a key shorter than 2048 bits', async () => {
    const result = await runCli(
      ['keygen', '--out', join(directory.path, 'small'), '--bits', '1024'],
      {},
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/RSA key size 1024 is not allowed; use 2048 to 16384 bits/);
  });

  it('refuses a non-RSA or short private key at start, before asking the server anything', async () => {
    server = await startFakeServer({ dataset, teamPublicKeyPem: teamKeys().publicKey });
    const ec = generateKeyPairSync('ec', {
      namedCurve: 'prime256v1',
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const ecRun = await runCli(['sync'], {
      ...syncEnv(server.url, warehouse.env),
      OCS_PRIVATE_KEY: ec.privateKey,
    });
    expect(ecRun.code).toBe(1);
    expect(ecRun.stderr).toMatch(
      /The OCS_PRIVATE_KEY holds a key of type ec \(curve prime256v1\); sealed values need an RSA key \(RSA-OAEP\) of at least 2048 bits\./,
    );
    expect(everythingPrinted(ecRun)).not.toContain('PRIVATE KEY');

    const short = generateKeyPairSync('rsa', {
      modulusLength: 1024,
      privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const shortRun = await runCli(['sync'], {
      ...syncEnv(server.url, warehouse.env),
      OCS_PRIVATE_KEY: short.privateKey,
    });
    expect(shortRun.code).toBe(1);
    expect(shortRun.stderr).toMatch(/holds an RSA key of 1024 bits; at least 2048 bits are needed/);
    expect(shortRun.stderr).toMatch(/hint: Generate a new key pair with `ocs-sync keygen`/);
    expect(everythingPrinted(shortRun)).not.toMatch(/MII[A-Za-z0-9+/]{20}/);
    expect(server.requests).toEqual([]);
  });
});
