/** The store behind a location setting: a folder, or a bucket (s3-store.ts). */
import type { PrivateModes } from '../private-files.js';
import { FolderStore } from './folder-store.js';
import { parseLocation } from './location.js';
import { S3Store, type S3Settings } from './s3-store.js';
import type { ObjectStore } from './store.js';

export interface StoreSettings {
  s3: S3Settings;
  /** Files and folders made in a folder store (data_file_mode). */
  modes?: PrivateModes;
}

export function openObjectStore(text: string, settings: StoreSettings): ObjectStore {
  const location = parseLocation(text);
  return location.kind === 's3'
    ? new S3Store(location, settings.s3)
    : new FolderStore(location.path, settings.modes);
}
