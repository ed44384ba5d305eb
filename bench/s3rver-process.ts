/**
 * Child process of `npm run bench -- files --store s3` (files-store.ts): s3rver, a real S3 server,
 * in a process of its own, as any store is: the fake export server that serves the contents and
 * the sync that uploads them never share its event loop.
 */
import S3rver from 's3rver';
import { serveParent } from './child-process.js';

export type S3rverRequest =
  | { type: 'start'; directory: string; bucket: string }
  /** The CPU s3rver's process has used so far, as process.cpuUsage() gives it. */
  | { type: 'cpu' }
  | { type: 'close' };

let server: S3rver | undefined;

serveParent<S3rverRequest>(async (request) => {
  if (request.type === 'cpu') return process.cpuUsage();
  if (request.type === 'close') {
    await server?.close();
    server = undefined;
    return undefined;
  }
  server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory: request.directory,
    configureBuckets: [{ name: request.bucket, configs: [] }],
  });
  const address = await server.run();
  return `http://127.0.0.1:${address.port}`;
});
