/**
 * File contents into a bucket (`npm run bench -- files --store s3 [--mib 1024] [--small-kib 256]`):
 * MIB of contents, half in one large file and half in many small ones, synced by `ocs-sync sync`
 * from the fake server (in this process) into s3rver (a real S3 server, on 127.0.0.1, in a
 * temporary folder, in a process of its own: s3rver-process.ts), against the AWS SDK's
 * lib-storage uploading the same bytes to the same server. Each in a fresh child process
 * (files-store-child.ts). Prints both throughputs, their ratio (goal ≥ 0.9) and the sync's peak
 * RSS (goal < 256 MB).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createSampleDataset } from '../src/fake-server/fixture.js';
import type { FakeFileContent } from '../src/fake-server/file-contents.js';
import { startFakeServer } from '../src/fake-server/server.js';
import { availableParallelism } from 'node:os';
import type { BenchOutput } from './bench.js';
import { ask, exited, startBenchChild } from './child-process.js';
import type { StoreStageRequest, StoreStageResult } from './files-store-child.js';
import type { S3rverRequest } from './s3rver-process.js';

export const STORE_GOALS = { overSdk: 0.9, peakRssMb: 256 } as const;
const MIB = 1024 * 1024;
const BUCKET = 'bench';

export async function filesStoreMain(argv: string[], output: BenchOutput): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      store: { type: 'string', default: 's3' },
      mib: { type: 'string', default: '1024' },
      'small-kib': { type: 'string', default: '256' },
    },
  });
  if (values.store !== 's3')
    throw new Error('--store: only s3 is measured (a folder: bench:files)');
  const mib = Number(values.mib);
  const smallKib = Number(values['small-kib']);
  if (!Number.isInteger(mib) || mib < 2) throw new Error('--mib must be an integer of 2 or more');
  // Half the bytes in one file, half in files of small-kib each.
  const large = Math.floor(mib / 2) * MIB;
  const smallCount = Math.max(1, Math.floor((mib * MIB - large) / 1024 / smallKib));
  const contents: FakeFileContent[] = [
    { size: large, seed: 'bench:large' },
    ...Array.from({ length: smallCount }, (_, index) => ({
      size: smallKib * 1024,
      seed: `bench:small:${index}`,
    })),
  ];
  const directory = mkdtempSync(join(tmpdir(), 'ocs-sync-store-bench-'));
  const s3 = startBenchChild('s3rver-process');
  const endpoint = await ask<string>(s3, {
    type: 'start',
    directory: join(directory, 's3'),
    bucket: BUCKET,
  } satisfies S3rverRequest);
  const dataset = createSampleDataset({ rowsPerResource: contents.length, seed: 3 });
  const ids = dataset.ids('files').map(String);
  const byId = new Map(ids.map((id, index) => [id, contents[index]!]));
  const server = await startFakeServer({
    dataset,
    fileContent: (row) => byId.get(String(row.id)) ?? null,
    apiKeys: { admin: ['bench-key'], nonAdmin: [] },
  });
  const child = () =>
    startBenchChild('files-store-child', {
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    });
  try {
    output.progress(
      `files into a bucket: ${mib} MiB in ${contents.length} files (one of ${large / MIB} MiB)`,
    );
    const storeCpu = () => ask<NodeJS.CpuUsage>(s3, { type: 'cpu' } satisfies S3rverRequest);
    const storeBeforeSdk = await storeCpu();
    const sdkChild = child();
    const sdk = await ask<StoreStageResult>(sdkChild, {
      kind: 'sdk',
      endpoint,
      bucket: BUCKET,
      contents,
      concurrency: 2,
      partSizeBytes: 8 * MIB,
      partsInFlight: 4,
    } satisfies StoreStageRequest);
    const storeAfterSdk = await storeCpu();
    sdkChild.disconnect();
    await exited(sdkChild);
    const ocsChild = child();
    // The fake server runs in this process: its CPU is what serving the bytes cost.
    const serverCpuBefore = process.cpuUsage();
    const ocs = await ask<StoreStageResult>(ocsChild, {
      kind: 'ocs',
      env: {
        OCS_BASE_URL: server.url,
        OCS_API_KEY: 'bench-key',
        OCS_WAREHOUSE_URL: join(directory, 'bench.db'),
        OCS_RESOURCES: 'files',
        OCS_FILES_DIR: `s3://${BUCKET}/ocs`,
        OCS_FILES_MAX_FILE_MIB: String(Math.max(1024, mib)),
        OCS_S3_ENDPOINT: endpoint,
        OCS_S3_FORCE_PATH_STYLE: 'true',
        AWS_ACCESS_KEY_ID: 'S3RVER',
        AWS_SECRET_ACCESS_KEY: 'S3RVER',
        AWS_EC2_METADATA_DISABLED: 'true',
        OCS_LOG_LEVEL: 'warn',
      },
    } satisfies StoreStageRequest);
    const serverCpu = cpuSeconds(process.cpuUsage(serverCpuBefore));
    const storeAfterOcs = await storeCpu();
    ocsChild.disconnect();
    await exited(ocsChild);
    const rate = (result: StoreStageResult) => mib / result.seconds;
    const ratio = rate(ocs) / rate(sdk);
    // Every process of a stage shares the machine's cores: its CPU over them is the least time
    // the stage can take here, and so bounds the ratio this machine can show.
    const cores = availableParallelism();
    const sdkCpu = cpuSeconds(sdk.cpu) + cpuBetween(storeBeforeSdk, storeAfterSdk);
    const ocsCpu = cpuSeconds(ocs.cpu) + serverCpu + cpuBetween(storeAfterSdk, storeAfterOcs);
    const ocsFloor = ocsCpu / cores;
    const peakMb = ocs.peakRss / 1e6;
    const ok = ratio >= STORE_GOALS.overSdk && peakMb < STORE_GOALS.peakRssMb;
    output.out(
      [
        ocs.output.trim(),
        '',
        `AWS SDK (lib-storage) upload: ${sdk.seconds.toFixed(1)} s, ${rate(sdk).toFixed(0)} MiB/s, peak RSS ${(sdk.peakRss / 1e6).toFixed(0)} MB`,
        `ocs-sync sync into the bucket: ${ocs.seconds.toFixed(1)} s, ${rate(ocs).toFixed(0)} MiB/s, peak RSS ${peakMb.toFixed(0)} MB`,
        `CPU: the SDK's stage ${sdkCpu.toFixed(1)} s (its process ${cpuSeconds(sdk.cpu).toFixed(1)} s, s3rver the rest); ` +
          `ocs-sync's stage ${ocsCpu.toFixed(1)} s (ocs-sync ${cpuSeconds(ocs.cpu).toFixed(1)} s, the fake server serving the bytes ${serverCpu.toFixed(1)} s, s3rver the rest)`,
        `s3rver, for the same requests and bytes: ${storeSplit(storeBeforeSdk, storeAfterSdk)} in the SDK's stage, ` +
          `${storeSplit(storeAfterSdk, storeAfterOcs)} in ocs-sync's (its system time is mostly the kernel copying the bytes into its files: docs/performance.md)`,
        `on ${cores} cores ocs-sync's stage takes at least ${ocsFloor.toFixed(1)} s here: the best ratio this machine allows is ${(sdk.seconds / ocsFloor).toFixed(2)}`,
        `ratio ocs-sync / SDK: ${ratio.toFixed(2)} (goal >= ${STORE_GOALS.overSdk}) ${ratio >= STORE_GOALS.overSdk ? 'PASS' : 'FAIL'}; ` +
          `peak RSS ${peakMb.toFixed(0)} MB (goal < ${STORE_GOALS.peakRssMb} MB) ${peakMb < STORE_GOALS.peakRssMb ? 'PASS' : 'FAIL'}`,
      ].join('\n'),
    );
    return ok ? 0 : 3;
  } finally {
    await server.close();
    await ask(s3, { type: 'close' } satisfies S3rverRequest).catch(() => undefined);
    s3.disconnect();
    await exited(s3);
    rmSync(directory, { recursive: true, force: true });
  }
}

function cpuSeconds(usage: NodeJS.CpuUsage): number {
  return (usage.user + usage.system) / 1e6;
}

function storeSplit(before: NodeJS.CpuUsage, after: NodeJS.CpuUsage): string {
  const user = (after.user - before.user) / 1e6;
  const system = (after.system - before.system) / 1e6;
  return `${user.toFixed(1)} s user + ${system.toFixed(1)} s system`;
}

function cpuBetween(before: NodeJS.CpuUsage, after: NodeJS.CpuUsage): number {
  return (after.user - before.user + after.system - before.system) / 1e6;
}
