/**
 * `check` for the settings that name a bucket: it answers (credentials found and accepted, the
 * bucket there, access granted), found out with a listing that names nothing; and, for signed
 * checkpoints, whether the bucket's Object Lock makes them write-once. Writes nothing.
 */
import type { Config } from '../config/schema.js';
import { describeError } from '../errors.js';
import type { ObjectLockState } from '../storage/store.js';
import { createObjectStore, type Env } from './wiring.js';

export interface BucketCheck {
  status: 'ok' | 'failed' | 'warning';
  detail: string;
  fix?: string;
}

/** Splits "message\n  hint: fix". */
function failed(error: unknown): BucketCheck {
  const text = describeError(error);
  const at = text.indexOf('\n  hint: ');
  return at < 0
    ? { status: 'failed', detail: text }
    : { status: 'failed', detail: text.slice(0, at), fix: text.slice(at + '\n  hint: '.length) };
}

/** files.dir in a bucket: it can be used. */
export async function checkFilesBucket(
  config: Config,
  env: Env,
  location: string,
): Promise<BucketCheck> {
  const store = createObjectStore(config, env, location);
  try {
    await store.probe();
    return { status: 'ok', detail: `kept in ${location}` };
  } catch (error) {
    return failed(error);
  } finally {
    store.close();
  }
}

/** audit.checkpoint_file in a bucket: it can be used, and whether checkpoints will be write-once. */
export async function checkCheckpointBucket(
  config: Config,
  env: Env,
  location: string,
  signer: string,
): Promise<BucketCheck> {
  const store = createObjectStore(config, env, location);
  let lock: ObjectLockState;
  try {
    await store.probe();
    lock = await store.objectLock();
  } catch (error) {
    return failed(error);
  } finally {
    store.close();
  }
  const retention = config.audit.checkpointRetention;
  const where = `${signer}; checkpoints go to ${store.location}/, one object each, never replaced`;
  const enableLock =
    'Keep checkpoints in a bucket created with Object Lock (docs/off-the-box.md shows how: it can only be turned on when the bucket is made, on most stores), then set audit.checkpoint_retention';
  if (retention !== undefined) {
    if (lock.status !== 'enabled') {
      return {
        status: 'failed',
        detail: `${where}, but ${lock.status === 'disabled' ? `the bucket of ${store.location} does not have Object Lock` : lock.detail}, which audit.checkpoint_retention asks for: uploads would be refused`,
        fix: `${enableLock}; or remove audit.checkpoint_retention.`,
      };
    }
    return {
      status: 'ok',
      detail: `${where}: write-once, each under Object Lock (${retention.mode}, ${retention.days} days)`,
    };
  }
  if (lock.status === 'enabled' && lock.defaultRetention !== undefined) {
    return {
      status: 'ok',
      detail: `${where}: write-once, under the bucket's default Object Lock retention (${lock.defaultRetention.mode}, ${lock.defaultRetention.days} days)`,
    };
  }
  return {
    status: 'warning',
    detail: `${where}, but not locked: ${lock.status === 'unsupported' ? lock.detail : lock.status === 'enabled' ? 'the bucket has Object Lock with no default retention, and audit.checkpoint_retention is not set' : 'the bucket has no Object Lock'}, so whoever may delete objects there can remove them`,
    fix:
      lock.status === 'enabled'
        ? 'Set audit.checkpoint_retention (mode and days).'
        : `${enableLock}.`,
  };
}
