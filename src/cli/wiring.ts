/**
 * The composition root: turns a validated Config into the real source, warehouse and secrets.
 * Every command builds its parts here, so behaviour is the same whichever command runs.
 */
import { ConfigError } from '../errors.js';
import type { Config } from '../config/schema.js';
import { secretPolicyFor } from '../config/secrets.js';
import type { Logger } from '../log.js';
import { parseArchivePublicKey, loadPrivateKey } from '../sealing/keys.js';
import { defaultOpenThreads } from '../sealing/open-pool.js';
import type { SealingKeys } from '../sealing/policy.js';
import { HttpExportSource, type RequestEvent } from '../source/http-source.js';
import type { SecretsSettings, SyncOptions } from '../sync/engine.js';
import { openWarehouse, sqliteFilesReadableByOthers } from '../warehouse/open.js';
import type { CheckpointSigner, Warehouse } from '../interfaces.js';
import { loadSigner } from '../audit/signing.js';
import { resolve } from 'node:path';
import { parseWarehouseUrl, sqliteFileOf, writableFromAnotherThread } from '../warehouse/url.js';
import { planPageThreads, type PageThreadPlan } from '../page-threads.js';
import { SEALED_FIELDS_STATE_KEY } from '../warehouse/state-keys.js';
import { parseSealedFieldsState } from '../sync/sealed-fields.js';
import { BlobStore } from '../files/blob-store.js';
import { BucketBlobStore } from '../files/bucket-blob-store.js';
import type { ContentStore } from '../files/content-store.js';
import { createFilesStep, type FilesStep } from '../files/sync-files.js';
import { privateModes } from '../private-files.js';
import { isBucketText } from '../storage/location.js';
import { openObjectStore, type StoreSettings } from '../storage/open.js';
import type { ObjectStore } from '../storage/store.js';

/** The command's environment: where the AWS SDK's credential chain starts. */
export type Env = Readonly<Record<string, string | undefined>>;
import { createRunExporter, type RunExporter } from '../daemon/run-export.js';

const MIB = 1024 * 1024;

export function createSource(
  config: Config,
  logger: Logger,
  onAttempt?: (event: RequestEvent) => void,
): HttpExportSource {
  if (!config.baseUrl || !config.apiKey) {
    throw new ConfigError([
      ...(config.baseUrl
        ? []
        : ['base_url is not set: set OCS_BASE_URL or base_url in the config file']),
      ...(config.apiKey
        ? []
        : ['api_key is not set: set OCS_API_KEY (or api_key in the config file)']),
    ]);
  }
  return new HttpExportSource({
    baseUrl: config.baseUrl,
    apiKey: config.apiKey,
    authScheme: config.authScheme,
    requestTimeoutMs: config.http.requestTimeoutSeconds * 1000,
    maxAttempts: config.http.maxAttempts,
    minRetryDelayMs: config.http.minRetryDelayMs,
    maxRetryDelayMs: config.http.maxRetryDelaySeconds * 1000,
    maxRequestsPerMinute: config.http.maxRequestsPerMinute,
    userAgent: config.http.userAgent,
    maxPageBytes: config.http.maxPageMib * MIB,
    fileTimeoutMs: config.files.requestTimeoutSeconds * 1000,
    connections: Math.max(config.pagesInFlight * config.concurrency, config.files.concurrency) + 1,
    logger,
    onAttempt,
  });
}

/**
 * Whether a sync's pages leave its thread (src/page-threads.ts), from `page_threads`, the teams
 * syncing at once (a fleet's `teams_at_once`; 1 alone) and the warehouse.
 */
export function threadPlanOf(config: Config, teamsAtOnce = 1): PageThreadPlan {
  return planPageThreads({
    setting: config.pageThreads,
    othersAtOnce: teamsAtOnce > 1,
    writableElsewhere: writableFromAnotherThread(parseWarehouseUrl(config.warehouse.url)),
  });
}

/** The warehouse; SQLite commits on a writer thread as `threads` says (default: a team alone). */
export function createWarehouse(
  config: Config,
  logger: Logger,
  options: { mustExist?: boolean; threads?: PageThreadPlan } = {},
): Promise<Warehouse> {
  return openWarehouse({
    mustExist: options.mustExist,
    url: config.warehouse.url,
    schema: config.warehouse.schema,
    poolSize: config.warehouse.poolSize,
    statementTimeoutSeconds: config.warehouse.statementTimeoutSeconds,
    lockStaleAfterSeconds: config.lock.staleAfterSeconds,
    fileModes: privateModes(config.dataFileMode),
    writerThread: (options.threads ?? threadPlanOf(config)).writerThread,
    logger,
  });
}

/**
 * Turns the audit chain on when the configuration asks (refused for a warehouse that already
 * holds data without one); a warehouse with a chain keeps it whatever the configuration says.
 */
export async function startAudit(
  config: Config,
  warehouse: Warehouse,
  logger: Logger,
): Promise<void> {
  if (config.audit.enabled) {
    await warehouse.audit.enable();
  } else if (warehouse.audit.enabled) {
    logger.warn(
      'audit.enabled is off, but this warehouse keeps an audit chain: it stays on (history for every resource, every version chained); checkpoints need audit.enabled and a signing key',
    );
  }
}

/** The checkpoint signer, when a signing key is configured. A bad key stops the run at start. */
export function createSigner(config: Config, logger: Logger): CheckpointSigner | undefined {
  if (!config.audit.signingKeyFile) return undefined;
  return loadSigner(config.audit.signingKeyFile, (message) => logger.warn(message));
}

/** Load the keys the configured policies may need. Key problems stop the run at start. */
export function createSecrets(config: Config, logger: Logger): SecretsSettings {
  const keys: SealingKeys = {};
  if (config.privateKeyFile || config.privateKey) {
    keys.privateKey = loadPrivateKey(
      {
        file: config.privateKeyFile,
        pem: config.privateKey,
        passphrase: config.privateKeyPassphrase,
      },
      (message) => logger.warn(message),
    );
  }
  if (config.secrets.archivePublicKey) {
    keys.archivePublicKey = parseArchivePublicKey(config.secrets.archivePublicKey);
  }
  return {
    keys,
    policyFor: (resource) => secretPolicyFor(config, resource),
    openThreads: config.secrets.openThreads,
  };
}

/**
 * A team's settings as a fleet runs them, `teams_at_once` teams together, unless the team says
 * otherwise: each opens sealed values on its share of the cores (not on every core each), so the
 * teams syncing together keep one such thread per core between them, 10 MB a thread. (Whether
 * its pages leave the sync's thread is threadPlanOf's, given the same `teams_at_once`.)
 */
export function inFleet(config: Config, teamsAtOnce: number): Config {
  const openThreads =
    config.secrets.openThreads ?? Math.max(1, Math.floor(defaultOpenThreads() / teamsAtOnce));
  return { ...config, secrets: { ...config.secrets, openThreads } };
}

export function syncOptionsFromConfig(
  config: Config,
  parts: {
    source: HttpExportSource;
    warehouse: Warehouse;
    logger: Logger;
    secrets: SecretsSettings;
  },
  threads: PageThreadPlan,
): SyncOptions {
  return {
    ...parts,
    pageSize: config.pageSize,
    resources: config.resources,
    excludeResources: config.excludeResources,
    excludeFields: config.excludeFields,
    onSchemaChange: config.onSchemaChange,
    history: config.history,
    deletes: config.deletes,
    pagesInFlight: config.pagesInFlight,
    pageThreads: threads.pageThread,
    concurrency: config.concurrency,
    lockWaitMs: config.lock.waitSeconds * 1000,
  };
}

/**
 * Once per run: an SQLite warehouse that holds opened secrets (sealed fields of a `plaintext`
 * resource) and that group or others can read gets a warning naming the file and the fix.
 */
export async function warnIfSecretsReadableByOthers(
  config: Config,
  warehouse: Warehouse,
  logger: Logger,
): Promise<void> {
  const file = sqliteFileOf(parseWarehouseUrl(config.warehouse.url));
  if (file === undefined) return;
  const sealed = parseSealedFieldsState(
    await warehouse.bookkeeping.getState(SEALED_FIELDS_STATE_KEY),
  );
  const opened = [...sealed.keys()].filter(
    (resource) => secretPolicyFor(config, resource) === 'plaintext',
  );
  if (opened.length === 0) return;
  const exposed = sqliteFilesReadableByOthers(resolve(file));
  if (exposed.length === 0) return;
  logger.warn(
    { files: exposed, resources: opened },
    `The warehouse holds opened secrets (${opened.join(', ')}) and ${exposed.join(', ')} can be read by group or others. Run: chmod 600 ${exposed.join(' ')}`,
  );
}

/** The files step of a sync, or undefined when files are off. */
export function createFiles(
  config: Config,
  parts: { source: HttpExportSource; warehouse: Warehouse; logger: Logger; env: Env },
): FilesStep | undefined {
  if (!config.files.enabled) return undefined;
  return createFilesStep({
    ledger: parts.warehouse.fileLedger(),
    store: createContentStore(config, parts.env),
    source: parts.source,
    concurrency: config.files.concurrency,
    maxFileBytes: config.files.maxFileMib * MIB,
    logger: parts.logger,
  });
}

/** The blob store's folder; a clear error when a PostgreSQL (or in-memory) warehouse has none. */
export function requireFilesDir(config: Config): string {
  if (config.files.dir === undefined) {
    throw new ConfigError([
      'files.dir (OCS_FILES_DIR) is not set: with a PostgreSQL or in-memory warehouse, name the folder where file contents are kept, or set files.enabled: false (OCS_FILES_ENABLED=false)',
    ]);
  }
  return config.files.dir;
}

/** How `s3://` locations are reached (object_storage.*), and folders made (data_file_mode). */
export function storeSettings(config: Config, env: Env): StoreSettings {
  const storage = config.objectStorage;
  return {
    s3: {
      endpoint: storage.endpoint,
      region: storage.region,
      forcePathStyle: storage.forcePathStyle,
      sse: storage.sse,
      kmsKeyId: storage.kmsKeyId,
      partSizeBytes: storage.partSizeMib * MIB,
      partsInFlight: storage.partsInFlight,
      maxAttempts: storage.maxAttempts,
      env,
    },
    modes: privateModes(config.dataFileMode),
  };
}

/** The store behind a location setting (a folder, or `s3://bucket/prefix`). */
export function createObjectStore(config: Config, env: Env, location: string): ObjectStore {
  return openObjectStore(location, storeSettings(config, env));
}

/** Where file contents are kept: the folder files.dir names, or its bucket. */
export function createContentStore(
  config: Config,
  env: Env,
  dir = requireFilesDir(config),
): ContentStore {
  if (!isBucketText(dir)) return new BlobStore(dir, privateModes(config.dataFileMode));
  return new BucketBlobStore(createObjectStore(config, env, dir), {
    partSizeBytes: config.objectStorage.partSizeMib * MIB,
  });
}

/** The bucket locations a sync writes to (file contents, checkpoints). */
export function bucketsOfSync(config: Config): string[] {
  return [
    ...(config.files.enabled && config.files.dir !== undefined ? [config.files.dir] : []),
    ...(config.audit.checkpointFile !== undefined ? [config.audit.checkpointFile] : []),
  ].filter(isBucketText);
}

/**
 * Before a sync writes anything: each bucket it writes to answers (credentials found and
 * accepted, the bucket there, access granted), or the run stops with one line naming the fix.
 */
export async function probeBuckets(config: Config, env: Env): Promise<void> {
  for (const location of bucketsOfSync(config)) {
    const store = createObjectStore(config, env, location);
    try {
      await store.probe();
    } finally {
      store.close();
    }
  }
}

/**
 * Where a run's metrics go besides /metrics (`metrics.push_url`, `metrics.textfile`); undefined
 * when nowhere. `team` labels them: a fleet's team's name, else `metrics.team`.
 */
export function createExporter(
  config: Config,
  logger: Logger,
  team = config.metrics.team,
): RunExporter | undefined {
  return createRunExporter({
    pushUrl: config.metrics.pushUrl,
    textfile: config.metrics.textfile,
    team,
    timeoutMs: config.metrics.pushTimeoutSeconds * 1000,
    fileModes: privateModes(config.dataFileMode),
    logger,
  });
}
