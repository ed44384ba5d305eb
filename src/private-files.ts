/**
 * Files that hold team data (the SQLite warehouse, blobs, Parquet exports, checkpoints) are
 * created readable by their owner only, in folders only their owner may enter: 0600 and 0700,
 * unless the operator sets `data_file_mode` (OCS_DATA_FILE_MODE). Every writer of such files goes
 * through here, and `check` uses the same modes to find files made wider since. Files that hold
 * keys are the operator's: `exposedMode` says when anyone but their owner may read one.
 */
import {
  chmodSync,
  closeSync,
  constants as fsConstants,
  lstatSync,
  mkdirSync,
  openSync,
  statSync,
} from 'node:fs';
import {
  chmod,
  lstat,
  mkdir,
  open,
  readdir,
  rename,
  unlink,
  type FileHandle,
} from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';

export const DEFAULT_DATA_FILE_MODE = 0o600;

export interface PrivateModes {
  file: number;
  /** The file mode with x wherever r is set: 0600 -> 0700, 0640 -> 0750. */
  folder: number;
}

export function privateModes(fileMode = DEFAULT_DATA_FILE_MODE): PrivateModes {
  return { file: fileMode, folder: fileMode | ((fileMode & 0o444) >> 2) };
}

export const DEFAULT_PRIVATE_MODES: PrivateModes = privateModes();

/** `0600`, as modes are written. */
export function formatMode(mode: number): string {
  return `0${(mode & 0o777).toString(8).padStart(3, '0')}`;
}

/**
 * Creates `path` and any missing parent with the folder mode (set exactly, whatever the umask).
 * A folder that already exists keeps its mode: `check` reports one wider than the setting.
 */
export async function makePrivateFolder(
  path: string,
  modes = DEFAULT_PRIVATE_MODES,
): Promise<void> {
  const created = await mkdir(path, { recursive: true, mode: modes.folder });
  if (created !== undefined) await chmod(path, modes.folder);
}

export function makePrivateFolderSync(path: string, modes = DEFAULT_PRIVATE_MODES): void {
  const created = mkdirSync(path, { recursive: true, mode: modes.folder });
  if (created !== undefined) chmodSync(path, modes.folder);
}

/** Opens a new file (`wx`: never one that exists) with the file mode, exactly. */
export async function openPrivateFile(
  path: string,
  modes = DEFAULT_PRIVATE_MODES,
): Promise<FileHandle> {
  const handle = await open(path, 'wx', modes.file);
  try {
    await handle.chmod(modes.file);
  } catch (error) {
    await handle.close();
    await unlink(path).catch(() => undefined);
    throw error;
  }
  return handle;
}

/**
 * Opens `path` to read and append, creating it with the file mode (exactly, whatever the umask)
 * when it is missing; a file that exists keeps its mode (`check` reports one wider than the
 * setting). Its folder is not created: for a file the operator ships elsewhere (the audit
 * checkpoint file), a missing folder is more likely a volume not mounted than one to make.
 */
export async function openPrivateAppendFile(
  path: string,
  modes = DEFAULT_PRIVATE_MODES,
): Promise<FileHandle> {
  const append = fsConstants.O_RDWR | fsConstants.O_APPEND;
  let handle: FileHandle;
  try {
    handle = await open(path, append | fsConstants.O_CREAT | fsConstants.O_EXCL, modes.file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return open(path, append);
  }
  try {
    await handle.chmod(modes.file);
  } catch (error) {
    await handle.close();
    await unlink(path).catch(() => undefined);
    throw error;
  }
  return handle;
}

/**
 * Creates an empty file with the file mode unless it exists (a SQLite warehouse, before SQLite
 * opens it: SQLite then gives its `-wal` and `-shm` files the same mode). Returns whether it made it.
 */
export function createPrivateFileSync(path: string, modes = DEFAULT_PRIVATE_MODES): boolean {
  let descriptor: number;
  try {
    descriptor = openSync(path, 'wx', modes.file);
  } catch (error) {
    // There already: it is its maker's to have made private (`check` says when it is not).
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    chmodSync(path, modes.file);
  } finally {
    closeSync(descriptor);
  }
  return true;
}

/**
 * Writes `data` to `path` whole or not at all (a temporary file beside it, synced, then renamed),
 * with the file mode; the folder is made private when missing. For small files such as
 * checkpoints.
 */
export async function writePrivateFile(
  path: string,
  data: string | Uint8Array,
  modes = DEFAULT_PRIVATE_MODES,
): Promise<void> {
  await makePrivateFolder(dirname(path), modes);
  const temporary = join(dirname(path), `.partial-${randomUUID()}`);
  const handle = await openPrivateFile(temporary, modes);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(temporary).catch(() => undefined);
    throw error;
  }
  await handle.close();
  await rename(temporary, path);
}

/** Makes the entries of a folder durable (a rename or a new file in it, not only the file's bytes). */
export async function syncFolder(folder: string): Promise<void> {
  const handle = await open(folder, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Whether a file or folder is readable, writable or enterable by more than `allowed` lets. */
export function modeWiderThan(mode: number, allowed: number): boolean {
  return (mode & 0o777 & ~allowed) !== 0;
}

export interface WiderEntry {
  path: string;
  mode: number;
}

/**
 * The files and folders among `paths`, and (for folders) below them, whose mode is wider than the
 * modes allow. Looks at `maxEntries` entries at most, so a blob store of millions stays quick;
 * `examined` says how many were.
 */
export async function findWiderThanPrivate(
  paths: readonly string[],
  modes: PrivateModes,
  maxEntries = 20_000,
): Promise<{ wider: WiderEntry[]; examined: number; complete: boolean }> {
  const wider: WiderEntry[] = [];
  const pending = [...paths];
  let examined = 0;
  while (pending.length > 0) {
    if (examined >= maxEntries) return { wider, examined, complete: false };
    const path = pending.shift()!;
    let info;
    try {
      info = await lstat(path);
    } catch {
      continue;
    }
    examined += 1;
    if (info.isDirectory()) {
      if (modeWiderThan(info.mode, modes.folder)) wider.push({ path, mode: info.mode & 0o777 });
      const names = await readdir(path).catch(() => [] as string[]);
      pending.push(...names.sort().map((name) => join(path, name)));
    } else if (info.isFile() && modeWiderThan(info.mode, modes.file)) {
      wider.push({ path, mode: info.mode & 0o777 });
    }
  }
  return { wider, examined, complete: true };
}

/**
 * The mode of a key file that anyone but its owner may read or change, else undefined. A key in a
 * Kubernetes Secret volume is owned by root and readable by the pod's group (fsGroup), the only
 * way a non-root pod can read it: group access there is allowed, others' access is not.
 */
export function exposedMode(file: string): number | undefined {
  if (process.platform === 'win32') return undefined;
  try {
    const mode = statSync(file).mode & 0o777;
    const allowed = inKubernetesSecretVolume(file) ? 0o070 : 0;
    return (mode & 0o077 & ~allowed) !== 0 ? mode : undefined;
  } catch {
    // A file that cannot be stat'ed is reported where it is read; only the warning is lost.
    return undefined;
  }
}

/** The kubelet lays out a Secret volume through a `..data` link in the volume's folder. */
function inKubernetesSecretVolume(file: string): boolean {
  let folder = dirname(file);
  for (let depth = 0; depth < 4; depth += 1) {
    try {
      if (lstatSync(join(folder, '..data')).isSymbolicLink()) return true;
    } catch {
      // Not here; try the folder above (a projected item may sit in a subfolder).
    }
    const parent = dirname(folder);
    if (parent === folder) break;
    folder = parent;
  }
  return false;
}
