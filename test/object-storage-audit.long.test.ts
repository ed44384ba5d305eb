/**
 * Signed checkpoints in a bucket (`audit.checkpoint_file: s3://bucket/prefix/`), through the CLI
 * against a real S3 server (s3rver behind a recording proxy), on both dialects (a long suite): one object a
 * checkpoint, written once with Object Lock retention, verified from the bucket, a tampered one
 * caught, `check` telling whether they will be write-once, and a checkpoint that could not be
 * uploaded uploaded by the next run.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openAuditBed, verifyJson, type AuditBed } from './audit-support.js';
import { faultOnce, startS3Server, type S3TestServer } from './s3-server.js';
import { runCli, testDialects } from './support.js';

const BUCKET = 'ocs-audit';
const PREFIX = 'checkpoints/team-a';
const LOCATION = `s3://${BUCKET}/${PREFIX}/`;
/** As ocs-sync shows it. */
const SHOWN = `s3://${BUCKET}/${PREFIX}`;

describe.each(testDialects)('signed checkpoints in a bucket (%s)', (dialect) => {
  let bed: AuditBed;
  let s3: S3TestServer;

  const env = (extra: Record<string, string> = {}) => ({
    ...bed.env,
    ...s3.env(),
    OCS_FILES_ENABLED: 'false',
    OCS_AUDIT_CHECKPOINT_FILE: LOCATION,
    ...extra,
  });
  const objects = () => s3.keys(BUCKET).filter((key) => key.startsWith(`${PREFIX}/`));
  const sync = (extra: Record<string, string> = {}) => runCli(['sync'], env(extra));

  beforeEach(async () => {
    bed = await openAuditBed(dialect, {
      dataset: { rowsPerResource: 6, seed: 9 },
      resources: ['llm_providers', 'participants'],
    });
    s3 = await startS3Server({ buckets: [BUCKET] });
  });
  afterEach(async () => {
    await s3.close();
    await bed.close();
  });

  it('writes each checkpoint once, under Object Lock retention, and audit verify reads them from the bucket', async () => {
    s3.objectLock.set(BUCKET, 'enabled');
    const locked = {
      OCS_AUDIT_CHECKPOINT_RETENTION_MODE: 'compliance',
      OCS_AUDIT_CHECKPOINT_RETENTION_DAYS: '30',
    };
    const check = await runCli(['check', '--json'], env(locked));
    const audit = JSON.parse(check.stdout).checks.find(
      (item: { name: string }) => item.name === 'audit signing',
    );
    expect(audit.status).toBe('ok');
    expect(audit.detail).toContain('write-once, each under Object Lock (compliance, 30 days)');

    const first = await sync(locked);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`1 object(s) uploaded to ${SHOWN}`);
    const [key] = objects();
    expect(key).toMatch(new RegExp(`^${PREFIX}/\\d+\\.json$`));
    const put = s3.requests.find(
      (request) => request.method === 'PUT' && request.url.startsWith(`/${BUCKET}/${key}`),
    )!;
    expect(put.headers['if-none-match']).toBe('*');
    expect(put.headers['x-amz-object-lock-mode']).toBe('COMPLIANCE');
    const until = Date.parse(put.headers['x-amz-object-lock-retain-until-date']!);
    expect(until - Date.now()).toBeGreaterThan(29 * 24 * 3600 * 1000);
    expect(put.headers['x-amz-checksum-sha256']).toMatch(/^[A-Za-z0-9+/]{43}=$/);

    // Every run records itself in the chain, so every run's checkpoint is a new object; none
    // already there is written again.
    s3.requests.length = 0;
    expect((await sync(locked)).code).toBe(0);
    bed.dataset.insert('participants', 2);
    expect((await sync(locked)).code).toBe(0);
    const all = objects();
    expect(all).toHaveLength(3);
    const written = s3.requests
      .filter((request) => request.method === 'PUT')
      .map((request) => request.url.split('?')[0]!.slice(`/${BUCKET}/`.length));
    expect(written.sort()).toEqual(all.filter((name) => name !== key).sort());

    const verified = await runCli(['audit', 'verify', '--json'], env());
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    const report = JSON.parse(verified.stdout);
    expect(report.intact).toBe(true);
    expect(report.checkpoints.file).toBe(SHOWN);
    expect(report.checkpoints.in_file).toBe(3);

    // --checkpoints names the bucket just as well, with nothing configured.
    const named = await runCli(
      ['audit', 'verify', '--json', '--checkpoints', LOCATION],
      env({ OCS_AUDIT_CHECKPOINT_FILE: join(bed.directory.path, 'unused.jsonl') }),
    );
    expect(named.code).toBe(0);
    expect(JSON.parse(named.stdout).checkpoints.in_file).toBe(3);
  });

  it('a read of a checkpoint cut short is resumed, never taken for tampering', async () => {
    expect((await sync()).code).toBe(0);
    expect((await sync()).code).toBe(0);
    s3.requests.length = 0;
    s3.fault = faultOnce(
      (request) => request.method === 'GET' && request.url.startsWith(`/${BUCKET}/${PREFIX}/`),
      () => ({ cutResponseAfterBytes: 40 }),
    );
    const verified = await runCli(['audit', 'verify', '--json'], env());
    expect(verified.stderr).toBe('');
    expect(verified.code).toBe(0);
    expect(JSON.parse(verified.stdout)).toMatchObject({ intact: true });
    expect(s3.requests.some((request) => request.headers.range === 'bytes=40-')).toBe(true);
  });

  it('a checkpoint edited in the bucket is caught', async () => {
    expect((await sync()).code).toBe(0);
    const [key] = objects();
    const path = join(s3.directory, BUCKET, `${key}._S3rver_object`);
    const checkpoint = JSON.parse(s3.objectBytes(BUCKET, key!).toString('utf8'));
    checkpoint.counts = { ...checkpoint.counts, insert: 999 };
    writeFileSync(path, `${JSON.stringify(checkpoint)}\n`);
    const { result, report } = await verifyJson(env(), bed.keys);
    expect(result.code).toBe(3);
    expect(report.intact).toBe(false);
    expect(report.problems.map((problem) => problem.kind)).toContain('checkpoint_edited');
  });

  it('check says ✗ with the fix when retention is asked of a bucket without Object Lock', async () => {
    s3.objectLock.set(BUCKET, 'absent');
    const retention = {
      OCS_AUDIT_CHECKPOINT_RETENTION_MODE: 'governance',
      OCS_AUDIT_CHECKPOINT_RETENTION_DAYS: '7',
    };
    const check = await runCli(['check'], env(retention));
    expect(check.code).toBe(1);
    expect(check.stdout).toMatch(/✗ audit signing\s+.*does not have Object Lock/);
    expect(check.stdout).toContain('created with Object Lock');
    // Without retention: a warning that they are not locked, exit 0 as far as audit goes.
    const unlocked = JSON.parse((await runCli(['check', '--json'], env())).stdout);
    const audit = unlocked.checks.find((item: { name: string }) => item.name === 'audit signing');
    expect(audit.status).toBe('warning');
    expect(audit.detail).toContain('the bucket has no Object Lock');
  });

  it('a checkpoint that could not be uploaded is uploaded by the next run', async () => {
    s3.fault = (request) =>
      request.method === 'PUT' && request.url.startsWith(`/${BUCKET}/${PREFIX}/`)
        ? { status: 503, code: 'SlowDown' }
        : undefined;
    const failed = await sync({ OCS_S3_MAX_ATTEMPTS: '2' });
    expect(failed.code).toBe(3);
    expect(failed.stdout + failed.logs).toContain('kept failing');
    expect(objects()).toEqual([]);

    s3.fault = undefined;
    bed.dataset.insert('participants', 1);
    const next = await sync();
    expect(next.code).toBe(0);
    expect(next.stdout).toContain(`2 object(s) uploaded to ${SHOWN}`);
    expect(objects()).toHaveLength(2);
    expect((await verifyJson(env(), bed.keys)).report.intact).toBe(true);
  });
});
