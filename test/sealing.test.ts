import {
  constants,
  createCipheriv,
  createHmac,
  generateKeyPairSync,
  publicEncrypt,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyError, SealedValueError, UsageError } from '../src/errors.js';
import type { ColumnSpec, Row, SealedFields } from '../src/interfaces.js';
import {
  ARCHIVE_PREFIX,
  isArchived,
  openArchived,
  resealForArchive,
} from '../src/sealing/archive.js';
import { decodeJson, encodeJson } from '../src/sealing/json-text.js';
import {
  generateArchiveKeyPair,
  generateTeamKeyPair,
  loadArchiveSecretKey,
  loadPrivateKey,
  parseArchivePublicKey,
} from '../src/sealing/keys.js';
import { openSealedValue, SealedOpenError } from '../src/sealing/open.js';
import { createSealedValueOpener } from '../src/sealing/open-pool.js';
import {
  applySealingPolicy as applyPolicy,
  needsPrivateKey,
  SECRET_POLICIES,
  sealedColumnType,
  type SecretPolicy,
} from '../src/sealing/policy.js';
import { sealValue } from '../src/sealing/seal.js';
import { NO_SEALED_FIELDS } from '../src/sync/sealed-fields.js';
import { unsealArchived } from '../src/sealing/unseal.js';
import nacl from 'tweetnacl';

const SECRET = { api_key: 'sk-live-very-secret-value', nested: { list: [1, 2, 'três'] } };

let teamPublic: KeyObject;
let teamPrivate: KeyObject;
let otherPrivate: KeyObject;
let otherPublic: KeyObject;
let workDir: string;

beforeAll(() => {
  ({ publicKey: teamPublic, privateKey: teamPrivate } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
  }));
  ({ privateKey: otherPrivate, publicKey: otherPublic } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
  }));
  workDir = mkdtempSync(path.join(tmpdir(), 'ocs-sealing-'));
});

afterAll(() => {
  rmSync(workDir, { recursive: true, force: true });
});

async function rejection(run: () => Promise<unknown>): Promise<Error> {
  try {
    await run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure, but it succeeded');
}

function failure(run: () => unknown): Error {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure, but it succeeded');
}

function openFailure(sealed: string, key: KeyObject = teamPrivate): SealedOpenError {
  const error = failure(() => openSealedValue(sealed, key));
  expect(error).toBeInstanceOf(SealedOpenError);
  if (sealed.length > 0) expect(error.message).not.toContain(sealed.slice(0, 20));
  return error as SealedOpenError;
}

function envelopeOf(sealed: string): { k: string; v: string } {
  return JSON.parse(Buffer.from(sealed, 'base64').toString('utf8')) as { k: string; v: string };
}

function makeEnvelope(k: string, v: string): string {
  return Buffer.from(JSON.stringify({ k, v })).toString('base64');
}

function base64Url(bytes: Buffer): string {
  return bytes.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
}

/** A sealed value built by hand, so tests can produce what sealValue never would. */
function handSealed(options: { plaintext: Buffer; pad: boolean }): string {
  const keyText = base64Url(randomBytes(32));
  const key = Buffer.from(keyText, 'base64url');
  const iv = randomBytes(16);
  const cipher = createCipheriv('aes-128-cbc', key.subarray(16), iv);
  cipher.setAutoPadding(options.pad);
  const ciphertext = Buffer.concat([cipher.update(options.plaintext), cipher.final()]);
  const header = Buffer.alloc(9);
  header[0] = 0x80;
  header.writeBigUInt64BE(1700000000n, 1);
  const signed = Buffer.concat([header, iv, ciphertext]);
  const mac = createHmac('sha256', key.subarray(0, 16)).update(signed).digest();
  const wrapped = publicEncrypt(
    { key: teamPublic, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' },
    Buffer.from(keyText),
  );
  return makeEnvelope(wrapped.toString('base64'), base64Url(Buffer.concat([signed, mac])));
}

describe('sealValue / openSealedValue', () => {
  it('round-trips every JSON kind, keeping integers past 2^53 exact', () => {
    const values: unknown[] = [
      SECRET,
      'plain string',
      '',
      null,
      42,
      -3.25,
      true,
      [],
      { unicode: 'héllo ✓ 日本語 😀', quote: '"\\\n' },
      { big: 9007199254740993n },
    ];
    for (const value of values) {
      expect(openSealedValue(sealValue(value, teamPublic), teamPrivate)).toEqual(value);
    }
  });

  it('accepts a PEM public key and makes a fresh token every time', () => {
    const pem = teamPublic.export({ type: 'spki', format: 'pem' }) as string;
    const first = sealValue(SECRET, pem);
    const second = sealValue(SECRET, pem);
    expect(first).not.toBe(second);
    expect(openSealedValue(first, teamPrivate)).toEqual(SECRET);
  });

  it('writes the envelope with Python json.dumps spacing and a padded base64url Fernet token', () => {
    const envelope = Buffer.from(sealValue(SECRET, teamPublic), 'base64').toString('utf8');
    expect(envelope).toMatch(/^\{"k": "[A-Za-z0-9+/]+=*", "v": "gAAAAA[A-Za-z0-9_-]+=*"\}$/);
    const token = Buffer.from(envelopeOf(Buffer.from(envelope).toString('base64')).v, 'base64url');
    expect(token[0]).toBe(0x80);
    expect((token.length - 57) % 16).toBe(0);
  });

  it('uses the given timestamp', () => {
    const sealed = sealValue('x', teamPublic, { timestamp: 1234567890 });
    const token = Buffer.from(envelopeOf(sealed).v, 'base64url');
    expect(token.readBigUInt64BE(1)).toBe(1234567890n);
  });

  it('accepts url-safe base64 without padding for the envelope and the wrapped key', () => {
    const sealed = sealValue(SECRET, teamPublic);
    const { k, v } = envelopeOf(sealed);
    const urlSafeK = k.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    const rewrapped = Buffer.from(JSON.stringify({ v, k: urlSafeK })).toString('base64url');
    expect(openSealedValue(rewrapped, teamPrivate)).toEqual(SECRET);
    expect(openSealedValue(`\n${sealed.slice(0, 40)}\n${sealed.slice(40)}\n`, teamPrivate)).toEqual(
      SECRET,
    );
  });

  it('refuses a tampered ciphertext before decrypting', () => {
    const sealed = sealValue(SECRET, teamPublic);
    const { k, v } = envelopeOf(sealed);
    const token = Buffer.from(v, 'base64url');
    token[30] = (token[30] as number) ^ 0x01;
    expect(openFailure(makeEnvelope(k, base64Url(token))).reason).toBe(
      'HMAC mismatch: tampered or wrong key',
    );
  });

  it('refuses a tampered HMAC', () => {
    const { k, v } = envelopeOf(sealValue(SECRET, teamPublic));
    const token = Buffer.from(v, 'base64url');
    token[token.length - 1] = (token[token.length - 1] as number) ^ 0x80;
    expect(openFailure(makeEnvelope(k, base64Url(token))).reason).toBe(
      'HMAC mismatch: tampered or wrong key',
    );
  });

  it('refuses an unknown version byte and a truncated token', () => {
    const { k, v } = envelopeOf(sealValue(SECRET, teamPublic));
    const token = Buffer.from(v, 'base64url');
    const versioned = Buffer.from(token);
    versioned[0] = 0x81;
    expect(openFailure(makeEnvelope(k, base64Url(versioned))).reason).toMatch(/version/);
    expect(openFailure(makeEnvelope(k, base64Url(token.subarray(0, 60)))).reason).toMatch(
      /wrong length/,
    );
    expect(openFailure(makeEnvelope(k, '***')).reason).toMatch(/Fernet token is not base64/);
  });

  it('refuses a value sealed for another key', () => {
    const error = openFailure(sealValue(SECRET, teamPublic), otherPrivate);
    expect(error.reason).toBe('key does not match (RSA-OAEP failed)');
  });

  it('refuses a wrapped key of another size', () => {
    const { privateKey: small } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    expect(openFailure(sealValue(SECRET, teamPublic), small).reason).toMatch(/key does not match/);
  });

  it('refuses text that is not a sealed value', () => {
    expect(openFailure('!!!not-a-token!!!').reason).toMatch(/^not a sealed value \(not base64\)/);
    expect(openFailure('').reason).toMatch(/^not a sealed value/);
    expect(openFailure(Buffer.from('hello there').toString('base64')).reason).toBe(
      'not a sealed value (envelope is not JSON)',
    );
    expect(openFailure(Buffer.from('[1,2]').toString('base64')).reason).toMatch(
      /not a JSON object/,
    );
    expect(openFailure(Buffer.from('{"k": 1, "v": "x"}').toString('base64')).reason).toMatch(
      /lacks/,
    );
    expect(openFailure(makeEnvelope('@@', 'x')).reason).toMatch(/"k"\) is not base64/);
    expect(failure(() => openSealedValue(42 as unknown as string, teamPrivate))).toBeInstanceOf(
      SealedOpenError,
    );
  });

  it('reports bad padding and non-JSON plaintext behind a valid HMAC', () => {
    const badPadding = handSealed({ plaintext: Buffer.alloc(16, 0), pad: false });
    expect(openFailure(badPadding).reason).toBe('bad padding');
    const notJson = handSealed({ plaintext: Buffer.from('api_key=sk-live-123'), pad: true });
    const error = openFailure(notJson);
    expect(error.reason).toBe('plaintext is not JSON');
    expect(error.message).not.toContain('sk-live-123');
    const notUtf8 = handSealed({ plaintext: Buffer.from([0xff, 0xfe, 0x22]), pad: true });
    expect(openFailure(notUtf8).reason).toBe('plaintext is not UTF-8');
  });

  it('needs a private key object', () => {
    expect(openFailure(sealValue(SECRET, teamPublic), teamPublic).reason).toMatch(
      /private key is needed/,
    );
  });
});

describe('JSON text', () => {
  it("matches Python's json.dumps defaults", () => {
    // json.dumps({"a": "é😀\x7f", "b": [1, 2.5, 1e-07, 0.0001, 1.2345e-05, -3.25, 123456.789, True, None]})
    expect(
      encodeJson(
        { a: 'é😀\x7f', b: [1, 2.5, 1e-7, 0.0001, 1.2345e-5, -3.25, 123456.789, true, null] },
        'python',
      ),
    ).toBe(
      '{"a": "\\u00e9\\ud83d\\ude00\\u007f", "b": [1, 2.5, 1e-07, 0.0001, 1.2345e-05, -3.25, 123456.789, true, null]}',
    );
    expect(encodeJson('tab\tquote"back\\\u0001', 'python')).toBe('"tab\\tquote\\"back\\\\\\u0001"');
    expect(encodeJson(1e22, 'python')).toBe('10000000000000000000000');
    expect(encodeJson(12345678901234567890n, 'python')).toBe('12345678901234567890');
  });

  it('encodes like JSON.stringify in compact style, plus bigint', () => {
    const value = { a: [1, 'é', null, undefined], b: undefined, c: new Date(0), d: 1.5 };
    expect(encodeJson(value, 'compact')).toBe(JSON.stringify(value));
    expect(encodeJson({ id: 2n ** 64n }, 'compact')).toBe('{"id":18446744073709551616}');
    expect(encodeJson(undefined, 'compact')).toBe('null');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => encodeJson(cyclic, 'compact')).toThrow(TypeError);
  });

  it('decodes unsafe integers as bigint and the last duplicate key', () => {
    expect(decodeJson('{"a": 9007199254740993, "b": 1.5, "c": 7, "a2": 1e400}')).toEqual({
      a: 9007199254740993n,
      b: 1.5,
      c: 7,
      a2: Infinity,
    });
    expect(decodeJson('{"x": 1, "x": 2}')).toEqual({ x: 2 });
  });
});

describe('archive format', () => {
  const archive = nacl.box.keyPair();

  it('round-trips and is recognised', () => {
    const text = resealForArchive(SECRET, archive.publicKey);
    expect(text.startsWith(ARCHIVE_PREFIX)).toBe(true);
    expect(isArchived(text)).toBe(true);
    expect(isArchived('plain')).toBe(false);
    expect(isArchived(null)).toBe(false);
    expect(text).not.toContain('sk-live');
    expect(openArchived(text, archive.secretKey)).toEqual(SECRET);
    expect(resealForArchive(SECRET, archive.publicKey)).not.toBe(text);
    expect(
      openArchived(resealForArchive({ n: 2n ** 70n }, archive.publicKey), archive.secretKey),
    ).toEqual({
      n: 2n ** 70n,
    });
  });

  it('refuses the wrong secret key and tampering without echoing the value', () => {
    const text = resealForArchive(SECRET, archive.publicKey);
    const wrong = failure(() => openArchived(text, nacl.box.keyPair().secretKey));
    expect(wrong).toBeInstanceOf(SealedOpenError);
    expect((wrong as SealedOpenError).reason).toMatch(/wrong archive secret key or tampered/);
    expect(wrong.message).not.toContain(
      text.slice(ARCHIVE_PREFIX.length, ARCHIVE_PREFIX.length + 20),
    );

    const packed = Buffer.from(text.slice(ARCHIVE_PREFIX.length), 'base64');
    packed[packed.length - 1] = (packed[packed.length - 1] as number) ^ 1;
    const tampered = ARCHIVE_PREFIX + packed.toString('base64');
    expect(
      (failure(() => openArchived(tampered, archive.secretKey)) as SealedOpenError).reason,
    ).toMatch(/tampered/);
  });

  it('refuses malformed texts and keys of the wrong size', () => {
    const reasonOf = (text: string) =>
      (failure(() => openArchived(text, archive.secretKey)) as SealedOpenError).reason;
    expect(reasonOf('hello')).toMatch(/not an archived value/);
    expect(reasonOf(`${ARCHIVE_PREFIX}***`)).toMatch(/not base64/);
    expect(reasonOf(`${ARCHIVE_PREFIX}AAAA`)).toMatch(/too short/);
    expect(failure(() => resealForArchive(1, new Uint8Array(31)))).toBeInstanceOf(KeyError);
    expect(failure(() => openArchived(`${ARCHIVE_PREFIX}AAAA`, new Uint8Array(5)))).toBeInstanceOf(
      KeyError,
    );
  });
});

/** Fields the server's schema marks sealed. */
function marked(...fields: string[]): SealedFields {
  return { marked: new Set(fields), all: new Set(fields) };
}

/** The same policy checks on this thread and on a pool of two threads (open-pool.ts). */
describe.each([
  ['on this thread', 0],
  ['on a pool of two threads', 2],
])('applySealingPolicy, values opened %s', (_where, threads) => {
  /** applySealingPolicy with an opener of its own keys, closed after. */
  const applySealingPolicy = async (
    ...[resource, rows, sealed, policy, keys]: Parameters<typeof applyPolicy>
  ): Promise<Row[]> => {
    const opener = createSealedValueOpener(keys, threads);
    try {
      return await applyPolicy(resource, rows, sealed, policy, keys, { opener });
    } finally {
      await opener.close();
    }
  };
  const archive = nacl.box.keyPair();
  let rows: Row[];
  let snapshot: string;

  beforeAll(() => {
    rows = [
      {
        id: 1,
        name: 'openai',
        config: sealValue(SECRET, teamPublic),
        extra: sealValue('x', teamPublic),
      },
      { id: 2, name: 'empty', config: null, extra: sealValue(7, teamPublic) },
      { id: 3n, name: 'no field' },
    ];
    snapshot = encodeJson(rows, 'compact');
  });

  const run = (
    policy: SecretPolicy,
    keys = { privateKey: teamPrivate, archivePublicKey: archive.publicKey },
  ) => applySealingPolicy('llm_providers', rows, marked('config', 'extra'), policy, keys);

  it('plaintext opens each sealed field; null stays null; absent stays absent', async () => {
    const out = await run('plaintext');
    expect(out).toEqual([
      { id: 1, name: 'openai', config: SECRET, extra: 'x' },
      { id: 2, name: 'empty', config: null, extra: 7 },
      { id: 3n, name: 'no field' },
    ]);
    expect(encodeJson(rows, 'compact')).toBe(snapshot);
    expect(out[0]).not.toBe(rows[0]);
  });

  it('sealed keeps the token as it came and needs no key', async () => {
    const out = await applySealingPolicy(
      'llm_providers',
      rows,
      marked('config', 'extra'),
      'sealed',
      {},
    );
    expect(out).toEqual(rows);
    expect(out[0]).not.toBe(rows[0]);
  });

  it('reseal stores archive texts that open to the original values', async () => {
    const out = await run('reseal');
    expect(isArchived(out[0]?.config)).toBe(true);
    expect(openArchived(out[0]?.config as string, archive.secretKey)).toEqual(SECRET);
    expect(openArchived(out[1]?.extra as string, archive.secretKey)).toBe(7);
    expect(out[1]?.config).toBeNull();
    expect(encodeJson(rows, 'compact')).toBe(snapshot);
  });

  it('drop stores null and needs no key', async () => {
    const out = await applySealingPolicy(
      'llm_providers',
      rows,
      marked('config', 'extra'),
      'drop',
      {},
    );
    expect(out.map((row) => [row.config, row.extra])).toEqual([
      [null, null],
      [null, null],
      [undefined, undefined],
    ]);
    expect(out[0]?.name).toBe('openai');
  });

  it('with no sealed fields, returns the rows untouched and needs no key', async () => {
    expect(await applySealingPolicy('llm_providers', rows, NO_SEALED_FIELDS, 'plaintext', {})).toBe(
      rows,
    );
  });

  it('null and an empty string in a sealed field mean nothing was sealed: kept as they are', async () => {
    const empty: Row[] = [
      { id: 1, config: '' },
      { id: 2, config: null },
    ];
    const keys = { privateKey: teamPrivate, archivePublicKey: archive.publicKey };
    for (const policy of ['plaintext', 'sealed', 'reseal'] as const) {
      expect(await applySealingPolicy('x', empty, marked('config'), policy, keys)).toEqual(empty);
    }
    expect(await applySealingPolicy('x', empty, marked('config'), 'drop', {})).toEqual([
      { id: 1, config: null },
      { id: 2, config: null },
    ]);
  });

  it('a field known sealed only from its values keeps a plain value as plain data', async () => {
    const mixed: Row[] = [
      { id: 1, config: sealValue(SECRET, teamPublic) },
      { id: 2, config: 'plain text' },
      { id: 3, config: { plain: true } },
    ];
    const detected = { marked: new Set<string>(), all: new Set(['config']) };
    expect(
      await applySealingPolicy('x', mixed, detected, 'plaintext', { privateKey: teamPrivate }),
    ).toEqual([
      { id: 1, config: SECRET },
      { id: 2, config: 'plain text' },
      { id: 3, config: { plain: true } },
    ]);
  });

  it('a value that does not open names resource, id and field, never the value', async () => {
    const bad: Row[] = [{ id: 12, config: sealValue(SECRET, teamPublic) }];
    const error = await rejection(() =>
      applySealingPolicy('llm_providers', bad, marked('config'), 'plaintext', {
        privateKey: otherPrivate,
      }),
    );
    expect(error).toBeInstanceOf(SealedValueError);
    expect(error.message).toBe(
      'Cannot open sealed field llm_providers.config of row id 12: key does not match (RSA-OAEP failed)',
    );
    expect(error).toMatchObject({ resource: 'llm_providers', rowId: '12', field: 'config' });

    const garbage: Row[] = [{ id: 13n, config: 'sk-live-plaintext-leak' }];
    const notSealed = await rejection(() =>
      applySealingPolicy('llm_providers', garbage, marked('config'), 'reseal', {
        privateKey: teamPrivate,
        archivePublicKey: archive.publicKey,
      }),
    );
    expect(notSealed).toBeInstanceOf(SealedValueError);
    expect(notSealed.message).toMatch(
      /row id 13: the server's schema marks it sealed, but its value \(a JSON string\) is not a sealed value/,
    );
    expect(notSealed.message).not.toContain('sk-live');
  });

  it('refuses a value that is not sealed in a marked field unless dropping it', async () => {
    const leaked: Row[] = [{ id: 5, config: { api_key: 'sk-live-unsealed' } }];
    for (const policy of ['plaintext', 'sealed', 'reseal'] as const) {
      const error = await rejection(() =>
        applySealingPolicy('llm_providers', leaked, marked('config'), policy, {
          privateKey: teamPrivate,
          archivePublicKey: archive.publicKey,
        }),
      );
      expect(error).toBeInstanceOf(SealedValueError);
      expect(error.message).toMatch(/its value \(a JSON object\) is not a sealed value/);
      expect(error.message).not.toContain('sk-live');
    }
    expect(
      (await applySealingPolicy('llm_providers', leaked, marked('config'), 'drop', {}))[0]?.config,
    ).toBeNull();
  });

  it('missing keys fail with KeyError before touching any row', async () => {
    expect(await rejection(() => run('plaintext', {} as never))).toBeInstanceOf(KeyError);
    expect(
      await rejection(() => run('reseal', { privateKey: teamPrivate } as never)),
    ).toBeInstanceOf(KeyError);
    expect(
      (await rejection(() => run('reseal', { archivePublicKey: archive.publicKey } as never)))
        .message,
    ).toMatch(/private key/);
    await expect(run('bogus' as SecretPolicy)).rejects.toThrow(/unknown secrets policy/);
  });

  it('the first problem in row order fails the page, whichever thread met it', async () => {
    // 40 values: cut into several chunks on a pool. Rows 25 and 33 were sealed to another key.
    const many: Row[] = Array.from({ length: 40 }, (_, index) => ({
      id: index + 1,
      config: sealValue({ n: index }, index === 25 || index === 33 ? otherPublic : teamPublic),
    }));
    const keys = { privateKey: teamPrivate };
    const error = await rejection(() =>
      applySealingPolicy('llm_providers', many, marked('config'), 'plaintext', keys),
    );
    expect(error.message).toBe(
      'Cannot open sealed field llm_providers.config of row id 26: key does not match (RSA-OAEP failed)',
    );
    // A plain value in a marked field before the first value that does not open: that one.
    const refusedFirst = many.map((row, index) =>
      index === 20 ? { ...row, config: 'plain' } : row,
    );
    expect(
      (
        await rejection(() =>
          applySealingPolicy('llm_providers', refusedFirst, marked('config'), 'plaintext', keys),
        )
      ).message,
    ).toMatch(/^Cannot open sealed field llm_providers\.config of row id 21: the server's schema/);
    // ... and after it: the value that does not open.
    const refusedLater = many.map((row, index) =>
      index === 30 ? { ...row, config: 'plain' } : row,
    );
    expect(
      (
        await rejection(() =>
          applySealingPolicy('llm_providers', refusedLater, marked('config'), 'plaintext', keys),
        )
      ).message,
    ).toMatch(/of row id 26: key does not match/);
    // Every value opened, in its place.
    const good = many.filter((_, index) => index !== 25 && index !== 33);
    const opened = await applySealingPolicy(
      'llm_providers',
      good,
      marked('config'),
      'plaintext',
      keys,
    );
    expect(opened.map((row) => (row.config as { n: number }).n)).toEqual(
      good.map((row) => Number(row.id) - 1),
    );
  });
});

describe('policy names', () => {
  it('policy helpers', () => {
    expect([...SECRET_POLICIES]).toEqual(['plaintext', 'sealed', 'reseal', 'drop']);
    expect(SECRET_POLICIES.filter(needsPrivateKey)).toEqual(['plaintext', 'reseal']);
    expect(SECRET_POLICIES.map(sealedColumnType)).toEqual(['json', 'text', 'text', 'text']);
  });
});

describe('loadPrivateKey', () => {
  const warnings: string[] = [];
  const warn = (message: string) => warnings.push(message);
  let dir: string;
  let pem: string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(workDir, 'load-'));
    pem = teamPrivate.export({ type: 'pkcs8', format: 'pem' }) as string;
  });

  function writeKey(name: string, content: string, mode = 0o600): string {
    const file = path.join(dir, name);
    writeFileSync(file, content);
    chmodSync(file, mode);
    return file;
  }

  /** A line of base64 key material that must never show up in a message. */
  function keyMaterialLine(text: string): string {
    return text.split('\n').find((line) => line.length > 40 && !line.startsWith('-----')) as string;
  }

  it('loads a 0600 PEM file without warning', () => {
    warnings.length = 0;
    const key = loadPrivateKey({ file: writeKey('ok.pem', pem) }, warn);
    expect(key.asymmetricKeyType).toBe('rsa');
    expect(openSealedValue(sealValue(SECRET, teamPublic), key)).toEqual(SECRET);
    expect(warnings).toEqual([]);
  });

  it('warns, naming the file and chmod 600, when group or others can read it', () => {
    warnings.length = 0;
    const file = writeKey('open.pem', pem, 0o640);
    loadPrivateKey({ file }, warn);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(file);
    expect(warnings[0]).toContain('chmod 600');
    expect(warnings[0]).toContain('0640');
  });

  it('loads PEM text, including one-line text with literal \\n', () => {
    expect(loadPrivateKey({ pem }, warn).asymmetricKeyType).toBe('rsa');
    expect(loadPrivateKey({ pem: pem.replace(/\n/g, '\\n') }, warn).asymmetricKeyType).toBe('rsa');
  });

  it('opens an encrypted PEM only with the right passphrase', () => {
    const encrypted = teamPrivate.export({
      type: 'pkcs8',
      format: 'pem',
      cipher: 'aes-256-cbc',
      passphrase: 'correct horse',
    }) as string;
    const file = writeKey('encrypted.pem', encrypted);
    expect(loadPrivateKey({ file, passphrase: 'correct horse' }, warn).asymmetricKeyType).toBe(
      'rsa',
    );

    const missing = failure(() => loadPrivateKey({ file }, warn));
    expect(missing).toBeInstanceOf(KeyError);
    expect(missing.message).toMatch(/encrypted/);
    expect((missing as KeyError).hint).toMatch(/OCS_PRIVATE_KEY_PASSPHRASE/);

    const wrong = failure(() => loadPrivateKey({ file, passphrase: 'wrong' }, warn));
    expect(wrong).toBeInstanceOf(KeyError);
    expect(wrong.message).toMatch(/wrong passphrase/);
    expect((wrong as KeyError).hint).toMatch(/OCS_PRIVATE_KEY_PASSPHRASE/);
    expect(wrong.message).not.toContain(keyMaterialLine(encrypted));

    const legacy = teamPrivate.export({
      type: 'pkcs1',
      format: 'pem',
      cipher: 'aes-128-cbc',
      passphrase: 'pw',
    }) as string;
    expect(legacy).toContain('Proc-Type: 4,ENCRYPTED');
    expect(failure(() => loadPrivateKey({ pem: legacy }, warn)).message).toMatch(/encrypted/);
    expect(loadPrivateKey({ pem: legacy, passphrase: 'pw' }, warn).asymmetricKeyType).toBe('rsa');
  });

  it('refuses an EC key, saying what was found and what is needed', () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const ecPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const error = failure(() => loadPrivateKey({ file: writeKey('ec.pem', ecPem) }, warn));
    expect(error).toBeInstanceOf(KeyError);
    expect(error.message).toMatch(/type ec/);
    expect(error.message).toMatch(/RSA key .*2048 bits/);
    expect(error.message).not.toContain(keyMaterialLine(ecPem));
  });

  it('refuses an RSA key under 2048 bits', () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    const smallPem = privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
    const error = failure(() => loadPrivateKey({ pem: smallPem }, warn));
    expect(error).toBeInstanceOf(KeyError);
    expect(error.message).toMatch(/1024 bits; at least 2048 bits are needed/);
  });

  it('names a missing file and refuses unusable sources', () => {
    const file = path.join(dir, 'nope.pem');
    const missing = failure(() => loadPrivateKey({ file }, warn));
    expect(missing).toBeInstanceOf(KeyError);
    expect(missing.message).toBe(`The private key file ${file} does not exist.`);
    expect(failure(() => loadPrivateKey({ file: dir }, warn)).message).toMatch(/is a directory/);
    expect(failure(() => loadPrivateKey({}, warn))).toBeInstanceOf(KeyError);
    expect(failure(() => loadPrivateKey({ file, pem }, warn)).message).toMatch(/use only one/);
    const publicPem = teamPublic.export({ type: 'spki', format: 'pem' }) as string;
    expect(failure(() => loadPrivateKey({ pem: publicPem }, warn)).message).toMatch(
      /holds a public key/,
    );
    expect(failure(() => loadPrivateKey({ pem: 'hello' }, warn)).message).toMatch(
      /not a PEM private key/,
    );
    const damaged = pem.replace(keyMaterialLine(pem), 'AAAA');
    const error = failure(() => loadPrivateKey({ pem: damaged }, warn));
    expect(error.message).toMatch(/could not be read/);
    expect(error.message).not.toContain(keyMaterialLine(damaged));
  });
});

describe('key generation', () => {
  it('generateTeamKeyPair writes a 0600 PKCS#8 private key and an SPKI public key, and never overwrites', async () => {
    const outDir = path.join(workDir, 'team', 'nested');
    const result = await generateTeamKeyPair(outDir, 2048);
    expect(result.privateKeyPath).toBe(path.join(outDir, 'ocs-team-private.pem'));
    expect(result.publicKeyPath).toBe(path.join(outDir, 'ocs-team-public.pem'));
    expect(statSync(result.privateKeyPath).mode & 0o777).toBe(0o600);
    expect(readFileSync(result.privateKeyPath, 'utf8')).toMatch(/^-----BEGIN PRIVATE KEY-----/);
    expect(result.publicKeyPem).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect(readFileSync(result.publicKeyPath, 'utf8')).toBe(result.publicKeyPem);

    const warnings: string[] = [];
    const key = loadPrivateKey({ file: result.privateKeyPath }, (message) =>
      warnings.push(message),
    );
    expect(warnings).toEqual([]);
    expect(key.asymmetricKeyDetails?.modulusLength).toBe(2048);
    expect(openSealedValue(sealValue(SECRET, result.publicKeyPem), key)).toEqual(SECRET);

    const before = readFileSync(result.privateKeyPath, 'utf8');
    const again = await generateTeamKeyPair(outDir, 2048).catch((error: unknown) => error);
    expect(again).toBeInstanceOf(KeyError);
    expect((again as Error).message).toContain('Refusing to overwrite');
    expect(readFileSync(result.privateKeyPath, 'utf8')).toBe(before);
  });

  it('generateTeamKeyPair refuses small or odd sizes and an existing public key file', async () => {
    await expect(generateTeamKeyPair(path.join(workDir, 'small'), 1024)).rejects.toThrow(KeyError);
    await expect(generateTeamKeyPair(path.join(workDir, 'small'), 2048.5)).rejects.toThrow(
      /not allowed/,
    );
    const outDir = path.join(workDir, 'half');
    await generateArchiveKeyPair(outDir); // unrelated files do not block
    writeFileSync(path.join(outDir, 'ocs-team-public.pem'), 'old');
    await expect(generateTeamKeyPair(outDir, 2048)).rejects.toThrow(/ocs-team-public\.pem/);
    expect(() => statSync(path.join(outDir, 'ocs-team-private.pem'))).toThrow();
  });

  it('generateArchiveKeyPair writes base64 key files that load and work together', async () => {
    const outDir = path.join(workDir, 'archive');
    const result = await generateArchiveKeyPair(outDir);
    expect(statSync(result.secretKeyPath).mode & 0o777).toBe(0o600);
    expect(path.basename(result.secretKeyPath)).toBe('ocs-archive-secret.key');
    expect(readFileSync(result.publicKeyPath, 'utf8').trim()).toBe(result.publicKey);
    const secretKey = loadArchiveSecretKey(result.secretKeyPath);
    const publicKey = parseArchivePublicKey(result.publicKey);
    expect(openArchived(resealForArchive(SECRET, publicKey), secretKey)).toEqual(SECRET);
    await expect(generateArchiveKeyPair(outDir)).rejects.toThrow(/Refusing to overwrite/);
  });

  it('archive key loaders give clear errors for wrong formats', () => {
    expect(() => parseArchivePublicKey('not base64!')).toThrow(/not base64/);
    expect(() => parseArchivePublicKey(Buffer.alloc(16).toString('base64'))).toThrow(/16 bytes/);
    const file = path.join(workDir, 'bad-archive.key');
    writeFileSync(file, Buffer.alloc(64).toString('base64'), { mode: 0o644 });
    const error = failure(() => loadArchiveSecretKey(file));
    expect(error).toBeInstanceOf(KeyError);
    expect(error.message).toContain(file);
    expect(error.message).toMatch(/64 bytes/);
    expect(() => loadArchiveSecretKey(path.join(workDir, 'none.key'))).toThrow(/does not exist/);
    const warnings: string[] = [];
    writeFileSync(file, Buffer.alloc(32).toString('base64'));
    chmodSync(file, 0o644);
    loadArchiveSecretKey(file, (message) => warnings.push(message));
    expect(warnings[0]).toMatch(/chmod 600/);
  });
});

/** A warehouse with just the three calls unseal uses, over in-memory tables. */
class FakeWarehouse {
  readonly updates: Array<{ table: string; column: string; count: number }> = [];
  constructor(
    readonly tables: Map<
      string,
      { columns: ColumnSpec[]; rows: Map<string, Record<string, unknown>> }
    >,
  ) {}

  /** The fake reads and rewrites columns itself. */
  get tools(): this {
    return this;
  }

  async describeTable(table: string): Promise<ColumnSpec[] | undefined> {
    return this.tables.get(table)?.columns;
  }

  async readColumn(table: string, column: string, afterId: string | null, limit: number) {
    const rows = this.tables.get(table)?.rows ?? new Map();
    return [...rows.keys()]
      .map(BigInt)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .filter((id) => afterId === null || id > BigInt(afterId))
      .slice(0, limit)
      .map((id) => ({ id: String(id), value: rows.get(String(id))?.[column] ?? null }));
  }

  async updateColumn(table: string, column: string, values: Array<{ id: string; value: unknown }>) {
    const rows = this.tables.get(table)?.rows;
    for (const { id, value } of values) {
      const row = rows?.get(id);
      if (row === undefined) throw new Error(`no row ${id}`);
      row[column] = value;
    }
    this.updates.push({ table, column, count: values.length });
  }
}

describe('unsealArchived', () => {
  const archive = nacl.box.keyPair();

  function makeWarehouse(): FakeWarehouse {
    const providers = new Map<string, Record<string, unknown>>([
      ['1', { config: resealForArchive(SECRET, archive.publicKey) }],
      ['2', { config: null }],
      ['3', { config: '{"already": "plain"}' }],
      ['10', { config: resealForArchive('ten', archive.publicKey) }],
      ['9007199254740993', { config: resealForArchive({ big: 2n ** 60n }, archive.publicKey) }],
    ]);
    const participants = new Map<string, Record<string, unknown>>([
      ['7', { data: resealForArchive([1, 2], archive.publicKey) }],
    ]);
    return new FakeWarehouse(
      new Map([
        [
          'llm_providers',
          { columns: [{ name: 'config', type: 'text' as const }], rows: providers },
        ],
        [
          'participant_data',
          { columns: [{ name: 'data', type: 'text' as const }], rows: participants },
        ],
      ]),
    );
  }

  const targets = [
    { table: 'llm_providers', column: 'config' },
    { table: 'participant_data', column: 'data' },
  ];

  it('prints one JSON line per opened value and changes nothing', async () => {
    const warehouse = makeWarehouse();
    const lines: string[] = [];
    const result = await unsealArchived(warehouse, {
      secretKey: archive.secretKey,
      targets,
      inPlace: false,
      write: (line) => lines.push(line),
      batchSize: 2,
    });
    expect(result).toEqual({ opened: 4, skipped: 2 });
    expect(lines.map((line) => decodeJson(line))).toEqual([
      { resource: 'llm_providers', id: 1, field: 'config', value: SECRET },
      { resource: 'llm_providers', id: 10, field: 'config', value: 'ten' },
      {
        resource: 'llm_providers',
        id: '9007199254740993',
        field: 'config',
        value: { big: 2n ** 60n },
      },
      { resource: 'participant_data', id: 7, field: 'data', value: [1, 2] },
    ]);
    expect(lines.every((line) => !line.includes('\n'))).toBe(true);
    expect(warehouse.updates).toEqual([]);
    expect(isArchived(warehouse.tables.get('llm_providers')?.rows.get('1')?.config)).toBe(true);
  });

  it('in place writes plaintext JSON text and a second run finds nothing left', async () => {
    const warehouse = makeWarehouse();
    const lines: string[] = [];
    const write = (line: string) => lines.push(line);
    const first = await unsealArchived(warehouse, {
      secretKey: archive.secretKey,
      targets,
      inPlace: true,
      write,
      batchSize: 2,
    });
    expect(first).toEqual({ opened: 4, skipped: 2 });
    expect(lines).toEqual([]);
    const providers = warehouse.tables.get('llm_providers')?.rows;
    expect(JSON.parse(providers?.get('1')?.config as string)).toEqual(SECRET);
    expect(providers?.get('10')?.config).toBe('"ten"');
    expect(providers?.get('9007199254740993')?.config).toBe('{"big":1152921504606846976}');
    expect(providers?.get('2')?.config).toBeNull();
    expect(providers?.get('3')?.config).toBe('{"already": "plain"}');
    expect(warehouse.tables.get('participant_data')?.rows.get('7')?.data).toBe('[1,2]');

    const second = await unsealArchived(warehouse, {
      secretKey: archive.secretKey,
      targets,
      inPlace: true,
      write,
    });
    expect(second).toEqual({ opened: 0, skipped: 6 });
  });

  it('a value that does not open names table, id and column, never the value', async () => {
    const warehouse = makeWarehouse();
    const error = await unsealArchived(warehouse, {
      secretKey: nacl.box.keyPair().secretKey,
      targets,
      inPlace: true,
      write: () => undefined,
    }).then(
      () => new Error('expected a failure'),
      (caught: unknown) => caught as Error,
    );
    expect(error).toBeInstanceOf(KeyError);
    expect(error.message).toMatch(/llm_providers\.config in row id 1: authentication failed/);
    expect(error.message).not.toContain(ARCHIVE_PREFIX);
    expect(isArchived(warehouse.tables.get('llm_providers')?.rows.get('1')?.config)).toBe(true);
  });

  it('missing tables or columns fail clearly, or are skipped when asked', async () => {
    const warehouse = makeWarehouse();
    const options = { secretKey: archive.secretKey, inPlace: false, write: () => undefined };
    await expect(
      unsealArchived(warehouse, { ...options, targets: [{ table: 'nope', column: 'x' }] }),
    ).rejects.toThrow(/Cannot unseal nope\.x: table nope does not exist/);
    await expect(
      unsealArchived(warehouse, {
        ...options,
        targets: [{ table: 'llm_providers', column: 'secret' }],
      }),
    ).rejects.toThrow(UsageError);
    const skipped = await unsealArchived(warehouse, {
      ...options,
      onMissing: 'skip',
      targets: [{ table: 'nope', column: 'x' }, ...targets],
    });
    expect(skipped).toEqual({ opened: 4, skipped: 2 });
  });
});
