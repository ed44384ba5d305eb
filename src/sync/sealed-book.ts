/**
 * What a run knows of sealed fields, per resource: the ones the server's schema marks and every
 * one seen holding a sealed value (kept in the warehouse between runs), and the sealed resources
 * this run does not request at all (the team has no public key, or a key the policy needs is not
 * configured). sealed-fields.ts holds the pure rules; this keeps the state and says it once.
 */
import { describeError } from '../errors.js';
import type { ManifestEntry, Warehouse } from '../interfaces.js';
import type { Logger } from '../log.js';
import { isSafeFieldName, isSafeResourceName } from '../names.js';
import {
  needsArchivePublicKey,
  needsPrivateKey,
  type SealingKeys,
  type SecretPolicy,
} from '../sealing/policy.js';
import { SEALED_FIELDS_STATE_KEY } from '../warehouse/state-keys.js';
import { formatSealedFieldsState, parseSealedFieldsState } from './sealed-fields.js';
import { SkipResource } from './run-errors.js';

/** A resource's sealed fields: the schema's marks, and every field known sealed (marks included). */
export interface SealedFieldSets {
  marked: Set<string>;
  all: Set<string>;
}

export class SealedFieldBook {
  private readonly fields = new Map<string, SealedFieldSets>();
  /** Resources skipped without a request, and why (no public key on the team, no private key). */
  private readonly notRequested = new Map<string, SkipResource>();

  constructor(
    private readonly warehouse: Warehouse,
    private readonly logger: Logger,
    private readonly keys: SealingKeys,
    private readonly policyOf: (entry: ManifestEntry) => SecretPolicy,
  ) {}

  /** Known sealed fields per resource: the schema's marks plus every field seen sealed before. */
  async load(marked: ReadonlyMap<string, readonly string[]>): Promise<void> {
    const seen = parseSealedFieldsState(
      await this.warehouse.bookkeeping.getState(SEALED_FIELDS_STATE_KEY),
    );
    for (const resource of new Set([...seen.keys(), ...marked.keys()])) {
      const markedFields = new Set((marked.get(resource) ?? []).filter(isSafeFieldName));
      const all = new Set([...markedFields, ...(seen.get(resource) ?? [])]);
      this.fields.set(resource, { marked: markedFields, all });
    }
    await this.save();
  }

  /** The resource's sets: one live object per resource for the run. */
  of(resource: string): SealedFieldSets {
    let fields = this.fields.get(resource);
    if (!fields) {
      fields = { marked: new Set(), all: new Set() };
      this.fields.set(resource, fields);
    }
    return fields;
  }

  /** Why the run does not request this resource, when it does not. */
  skipReason(resource: string): SkipResource | undefined {
    return this.notRequested.get(resource);
  }

  /** Forgets the decisions of planResources (the team row is read again). */
  forgetSkips(): void {
    this.notRequested.clear();
  }

  /**
   * Decide once per run which sealed resources cannot answer, and say why once: the team has no
   * public key (the server would refuse them), or the policy needs a key we were not given.
   */
  planResources(entries: ManifestEntry[], team: Record<string, unknown>): void {
    const secret = entries.filter((entry) => entry.secret && isSafeResourceName(entry.resource));
    if (secret.length === 0) return;
    const { keys } = this;
    const skip = (names: ManifestEntry[], reason: SkipResource) => {
      if (names.length === 0) return;
      for (const entry of names) this.notRequested.set(entry.resource, reason);
      this.logger.warn({ resources: names.map((entry) => entry.resource) }, describeError(reason));
    };
    if (team.has_public_key === false) {
      skip(
        secret,
        new SkipResource(
          'Not requested: the team has no public key registered on the server, so the server cannot seal these resources and would refuse them.',
          {
            hint:
              "Run `ocs-sync keygen --out ./keys`, register ./keys/ocs-team-public.pem as the team's public key in Open Chat Studio (a team admin), " +
              'set OCS_PRIVATE_KEY_FILE=./keys/ocs-team-private.pem, and sync again.',
          },
        ),
      );
      return;
    }
    if (!keys.privateKey) {
      skip(
        secret.filter((entry) => needsPrivateKey(this.policyOf(entry))),
        new SkipResource(
          "Not requested: their sealed fields need the team's private key to be opened (secrets policy plaintext or reseal), and none is configured.",
          {
            hint: 'Set OCS_PRIVATE_KEY_FILE (or private_key_file / OCS_PRIVATE_KEY), or set the secrets policy "sealed" or "drop" for them.',
          },
        ),
      );
    }
    if (!keys.archivePublicKey) {
      skip(
        secret.filter(
          (entry) =>
            !this.notRequested.has(entry.resource) && needsArchivePublicKey(this.policyOf(entry)),
        ),
        new SkipResource(
          'Not requested: the "reseal" policy needs secrets.archive_public_key, which is not configured.',
          {
            hint: 'Create one with `ocs-sync keygen --archive --out DIR` and set OCS_ARCHIVE_PUBLIC_KEY.',
          },
        ),
      );
    }
  }

  /**
   * Fields the schema does not mark carry sealed values (a schema not served, or a server newer
   * than it): from now on they are sealed fields, here and in every later run.
   */
  async learn(
    entry: ManifestEntry,
    fields: readonly string[],
    policy: SecretPolicy,
  ): Promise<void> {
    const sealed = this.of(entry.resource);
    for (const field of fields) sealed.all.add(field);
    await this.save();
    this.logger.warn(
      { resource: entry.resource, fields },
      `${entry.resource}: ${fields.join(', ')} hold sealed values the server's schema does not mark; treated as sealed fields`,
    );
    if (!entry.secret || this.notRequested.has(entry.resource)) {
      const { keys } = this;
      if (needsPrivateKey(policy) && !keys.privateKey) {
        throw new SkipResource(
          `${entry.resource} skipped: ${fields.join(', ')} hold sealed values and the "${policy}" policy needs the team's private key, which is not configured; nothing sealed was stored.`,
          {
            hint: 'Set OCS_PRIVATE_KEY_FILE (or OCS_PRIVATE_KEY), or set the secrets policy "sealed" or "drop" for it.',
          },
        );
      }
      if (needsArchivePublicKey(policy) && !keys.archivePublicKey) {
        throw new SkipResource(
          `${entry.resource} skipped: the "reseal" policy needs secrets.archive_public_key, which is not configured.`,
        );
      }
    }
  }

  private async save(): Promise<void> {
    const all = new Map([...this.fields].map(([resource, fields]) => [resource, fields.all]));
    await this.warehouse.bookkeeping.setState(
      SEALED_FIELDS_STATE_KEY,
      formatSealedFieldsState(all),
    );
  }
}
