/**
 * Conformance with the reference server's own sealing code: every vector in
 * ../shared/ocs-export/sealed-vectors.json (outside the repository, never copied into it) must open
 * to its plaintext, and every must_fail token must fail cleanly.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { openSealedValue, SealedOpenError } from '../src/sealing/open.js';
import { sealValue } from '../src/sealing/seal.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const referenceDir = path.resolve(repoRoot, '../shared/ocs-export');
const vectorsFile = path.join(referenceDir, 'sealed-vectors.json');
const present = existsSync(vectorsFile);

interface VectorsFile {
  private_key_pem: string;
  public_key_pem: string;
  vectors: Array<{ plaintext: unknown; sealed: string }>;
  must_fail: Array<{ why: string; sealed: string }>;
}

if (!present) {
  console.warn(
    `sealing vectors skipped: ${vectorsFile} is absent (reference files are not part of the repository)`,
  );
}

describe.skipIf(!present)(
  present
    ? 'sealed-vectors.json conformance'
    : `sealed-vectors.json conformance (skipped: ${referenceDir} is absent)`,
  () => {
    let file: VectorsFile;
    let privateKey: KeyObject;

    beforeAll(() => {
      file = JSON.parse(readFileSync(vectorsFile, 'utf8')) as VectorsFile;
      privateKey = createPrivateKey(file.private_key_pem);
    });

    it('has vectors and must_fail cases to check', () => {
      expect(file.vectors.length).toBeGreaterThan(0);
      expect(file.must_fail.length).toBeGreaterThan(0);
    });

    it('opens every vector to its plaintext', () => {
      for (const [index, vector] of file.vectors.entries()) {
        expect(openSealedValue(vector.sealed, privateKey), `vector ${index}`).toEqual(
          vector.plaintext,
        );
      }
    });

    it('fails every must_fail token with a SealedOpenError that does not echo the token', () => {
      for (const { why, sealed } of file.must_fail) {
        let caught: unknown;
        try {
          openSealedValue(sealed, privateKey);
        } catch (error) {
          caught = error;
        }
        expect(caught, why).toBeInstanceOf(SealedOpenError);
        const message = (caught as Error).message;
        expect(message, why).not.toContain(sealed);
        expect(message, why).not.toContain(sealed.slice(0, 24));
      }
    });

    it('gives the specific reason for each must_fail case', () => {
      const reasons = file.must_fail.map(({ sealed }) => {
        try {
          openSealedValue(sealed, privateKey);
          return 'opened';
        } catch (error) {
          return (error as SealedOpenError).reason;
        }
      });
      const byWhy = Object.fromEntries(
        file.must_fail.map(({ why }, index) => [why, reasons[index]]),
      );
      for (const [why, reason] of Object.entries(byWhy)) {
        if (/different public key/.test(why)) expect(reason).toMatch(/key does not match/);
        if (/HMAC|tamper/.test(why)) expect(reason).toMatch(/HMAC mismatch/);
        if (/not base64/.test(why)) expect(reason).toMatch(/not a sealed value/);
      }
    });

    it('seals in the same format: our tokens open, and the plaintext bytes match the server', () => {
      for (const vector of file.vectors) {
        const ours = sealValue(vector.plaintext, file.public_key_pem);
        expect(openSealedValue(ours, privateKey)).toEqual(vector.plaintext);
        const ourEnvelope = Buffer.from(ours, 'base64').toString('utf8');
        const theirEnvelope = Buffer.from(vector.sealed, 'base64').toString('utf8');
        // Same JSON spacing and same lengths (key text, token size => same plaintext length).
        expect(ourEnvelope.length).toBe(theirEnvelope.length);
        expect(ourEnvelope).toMatch(/^\{"k": "[A-Za-z0-9+/=]+", "v": "[A-Za-z0-9_=-]+"\}$/);
        expect(theirEnvelope).toMatch(/^\{"k": "[A-Za-z0-9+/=]+", "v": "[A-Za-z0-9_=-]+"\}$/);
      }
    });
  },
);
