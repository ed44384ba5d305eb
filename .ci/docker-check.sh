#!/usr/bin/env bash
# Checks the container setup; needs node and npm only (no container engine).
#
#  1. Lint the Dockerfile. hadolint runs when it is on PATH (it is not in Debian bookworm nor on
#     npm as a self-contained package, so it is optional). A built-in check always runs and fails
#     on the rules this project relies on: the first line is `ARG BASE=<image>:<tag>` and every
#     stage is `FROM ${BASE}`; no `latest` (or missing) tag; `apt-get update` and `install` in one
#     RUN with -y and --no-install-recommends, and /var/lib/apt/lists removed in it; no ADD; no
#     sudo or apt-get upgrade; absolute WORKDIR; `npm ci` (the lockfile), not `npm install`; the
#     final stage runs as a non-root USER, has a HEALTHCHECK, EXPOSE 9464, VOLUME /data and the OCS_* defaults;
#     CMD and ENTRYPOINT in JSON form.
#  2. Try the image's ENTRYPOINT dispatch with /app mapped to this checkout: `IMAGE --version` and
#     `IMAGE sync --help` reach ocs-sync, `IMAGE node …` runs node.
#  3. Smoke-test the image's start command, `node bin/ocs-sync.js daemon`, with the image's
#     environment (warehouse file under a temporary /data stand-in, health listener on loopback)
#     against the built-in fake export server: wait until the Dockerfile's own HEALTHCHECK command
#     passes, check /metrics, send SIGTERM, expect exit 0 within 10 s.
#  4. Only with OCS_CONTAINER_SMOKE=1 and podman or docker present: build the image and run
#     `--help` in it (minutes, so not by default). Without an engine this step is skipped.
#
# Env: OCS_DOCKER_CHECK_SKIP_BUILD=1 reuses an existing dist/ instead of running `npm run build`.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ocs-docker-check.XXXXXX")
SERVER_PID='' DAEMON_PID=''
cleanup() {
  [ -n "$DAEMON_PID" ] && kill "$DAEMON_PID" 2>/dev/null || true
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf '== %s\n' "$*"; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}

# ------------------------------------------------------------------------------------------------
say "1. Dockerfile lint"
if command -v hadolint >/dev/null 2>&1; then
  hadolint Dockerfile || fail "hadolint found problems in the Dockerfile"
  echo "hadolint: ok"
else
  echo "hadolint: not installed; running the built-in rules only"
fi
node --input-type=module - Dockerfile <<'EOF'
import { readFileSync } from 'node:fs';
const file = process.argv[2];
const lines = readFileSync(file, 'utf8').split('\n');
// Instructions with their first line number; continuation lines joined; comments dropped.
const instructions = [];
let current;
lines.forEach((raw, index) => {
  const line = raw.trim();
  if (current === undefined && (line === '' || line.startsWith('#'))) return;
  if (current !== undefined && line.startsWith('#')) return;
  const text = line.endsWith('\\') ? line.slice(0, -1) : line;
  if (current === undefined) current = { line: index + 1, text };
  else current.text += ` ${text}`;
  if (!line.endsWith('\\')) {
    const [, keyword = '', rest = ''] = /^(\S+)\s*(.*)$/s.exec(current.text) ?? [];
    instructions.push({ line: current.line, keyword: keyword.toUpperCase(), args: rest.trim() });
    current = undefined;
  }
});
const problems = [];
const problem = (line, text) => problems.push(`${file}:${line}: ${text}`);
const isJsonArray = (args) => {
  try {
    return Array.isArray(JSON.parse(args));
  } catch {
    return false;
  }
};
const first = instructions[0];
const base = first && first.keyword === 'ARG' ? /^BASE=(\S+)$/.exec(first.args) : null;
if (!base) problem(first?.line ?? 1, 'the first instruction must be ARG BASE=<image>:<tag>');
else if (!/:[^/]+$/.test(base[1]) || /:latest$/.test(base[1])) {
  problem(first.line, `ARG BASE=${base[1]} must pin a tag other than latest`);
}
const froms = instructions.filter((instruction) => instruction.keyword === 'FROM');
if (froms.length === 0) problem(1, 'no FROM');
for (const from of froms) {
  if (!/^\$\{BASE\}|^\$BASE\b/.test(from.args)) problem(from.line, `FROM ${from.args}: stages must start FROM \${BASE}`);
  if (/:latest\b/.test(from.args)) problem(from.line, 'no :latest images');
}
const finalStage = instructions.slice(instructions.lastIndexOf(froms.at(-1)));
for (const instruction of instructions) {
  const { line, keyword, args } = instruction;
  if (keyword === 'ADD') problem(line, 'use COPY, not ADD');
  if (keyword === 'WORKDIR' && !args.startsWith('/')) problem(line, 'WORKDIR must be an absolute path');
  if ((keyword === 'CMD' || keyword === 'ENTRYPOINT') && !isJsonArray(args)) {
    problem(line, `${keyword} must use the JSON (exec) form so signals reach node`);
  }
  if (keyword !== 'RUN') continue;
  if (/\bsudo\b/.test(args)) problem(line, 'no sudo in RUN');
  if (/apt-get\s+(dist-)?upgrade/.test(args)) problem(line, 'no apt-get upgrade; update the base image instead');
  if (/\bnpm\s+(install|i)\b/.test(args) && !(/\bnpm ci\b/.test(args) && /\bcmp package-lock\.json\b/.test(args))) {
    problem(line, 'use npm ci (the lockfile); npm install only as its fallback, proven by cmp to leave the lockfile unchanged');
  }
  if (/apt-get\s+install/.test(args)) {
    if (!/apt-get\s+update/.test(args)) problem(line, 'apt-get update and apt-get install belong in one RUN');
    if (!/\s(-y|--yes|--assume-yes)\b/.test(args)) problem(line, 'apt-get install needs -y');
    if (!/--no-install-recommends/.test(args)) problem(line, 'apt-get install needs --no-install-recommends');
    if (!/rm -rf \/var\/lib\/apt\/lists\/\*/.test(args)) problem(line, 'remove /var/lib/apt/lists/* in the same RUN');
  }
}
const inFinal = (keyword) => finalStage.filter((instruction) => instruction.keyword === keyword);
const users = inFinal('USER');
if (users.length === 0) problem(froms.at(-1)?.line ?? 1, 'the final stage needs a USER (non-root)');
else if (/^(root|0)(:|$)/.test(users.at(-1).args)) problem(users.at(-1).line, 'the final stage must not run as root');
const healthchecks = inFinal('HEALTHCHECK');
if (healthchecks.length === 0 || /^NONE$/i.test(healthchecks.at(-1).args)) {
  problem(froms.at(-1)?.line ?? 1, 'the final stage needs a HEALTHCHECK');
}
if (!inFinal('EXPOSE').some((instruction) => /\b9464\b/.test(instruction.args))) problem(1, 'EXPOSE 9464 is missing');
if (!inFinal('VOLUME').some((instruction) => /\/data\b/.test(instruction.args))) problem(1, 'VOLUME /data is missing');
const env = inFinal('ENV').map((instruction) => instruction.args).join(' ');
if (!/OCS_WAREHOUSE_URL=\/data\//.test(env)) problem(1, 'ENV OCS_WAREHOUSE_URL=/data/… is missing');
if (!/OCS_HEALTH_LISTEN=0\.0\.0\.0:9464/.test(env)) problem(1, 'ENV OCS_HEALTH_LISTEN=0.0.0.0:9464 is missing');
if (inFinal('CMD').length === 0) problem(1, 'the final stage needs a CMD');
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`built-in rules: ok (${instructions.length} instructions, ${froms.length} stages)`);
EOF

# ------------------------------------------------------------------------------------------------
if [ "${OCS_DOCKER_CHECK_SKIP_BUILD:-}" != 1 ]; then
  say "build (npm run build)"
  npm run build --silent
fi
[ -f dist/src/cli/main.js ] || fail "dist/ is missing; run npm run build"

# The Dockerfile's JSON arrays, for running its ENTRYPOINT and HEALTHCHECK outside a container.
dockerfile_json() { # KEYWORD -> the JSON array of the last such instruction
  node --input-type=module - "$1" <<'EOF'
import { readFileSync } from 'node:fs';
const keyword = process.argv[2];
const text = readFileSync('Dockerfile', 'utf8').replace(/\\\n\s*/g, ' ');
const line = text.split('\n').filter((candidate) => candidate.startsWith(`${keyword} `)).at(-1) ?? '';
const json = line.slice(line.indexOf('['));
console.log(JSON.stringify(JSON.parse(json)));
EOF
}
json_to_args() { # JSON array on stdin -> NUL-separated items
  node -e 'for (const item of JSON.parse(require("fs").readFileSync(0, "utf8"))) process.stdout.write(item + "\0")'
}

say "2. ENTRYPOINT dispatch (with /app mapped to this checkout)"
ENTRYPOINT=()
while IFS= read -r -d '' item; do ENTRYPOINT+=("${item//\/app\//$ROOT/}"); done < <(dockerfile_json ENTRYPOINT | json_to_args)
VERSION=$(node -p 'require("./package.json").version')
[ "$("${ENTRYPOINT[@]}" --version)" = "$VERSION" ] || fail "ENTRYPOINT --version did not reach ocs-sync"
"${ENTRYPOINT[@]}" sync --help | grep -q 'Run one sync pass' || fail "ENTRYPOINT sync --help did not reach ocs-sync sync"
rc=0
"${ENTRYPOINT[@]}" node -e 'process.exit(7)' || rc=$?
[ "$rc" = 7 ] || fail "ENTRYPOINT node … did not run node as given (exit $rc)"
echo "entrypoint: ok"

# ------------------------------------------------------------------------------------------------
say "3. daemon smoke test against the fake export server"
cat >"$WORK/fake-server.mjs" <<EOF
import { generateKeyPairSync } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createSampleDataset } from '$ROOT/dist/src/fake-server/fixture.js';
import { startFakeServer } from '$ROOT/dist/src/fake-server/server.js';
const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048, publicKeyEncoding: { type: 'spki', format: 'pem' } });
const server = await startFakeServer({ dataset: createSampleDataset({ rowsPerResource: 25, seed: 1 }), teamPublicKeyPem: publicKey });
writeFileSync(process.argv[2], server.url);
process.on('SIGTERM', () => server.close().then(() => process.exit(0)));
EOF
node "$WORK/fake-server.mjs" "$WORK/server-url" &
SERVER_PID=$!
for _ in $(seq 1 300); do [ -s "$WORK/server-url" ] && break; sleep 0.1; done
[ -s "$WORK/server-url" ] || fail "the fake server did not start"
SERVER_URL=$(cat "$WORK/server-url")
HEALTH_PORT=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
mkdir -p "$WORK/data"

# The image's environment, with loopback instead of 0.0.0.0 and a temporary /data.
export NODE_ENV=production OCS_WAREHOUSE_URL="$WORK/data/ocs-sync.db" OCS_HEALTH_LISTEN="127.0.0.1:$HEALTH_PORT"
export OCS_BASE_URL="$SERVER_URL" OCS_API_KEY=test-admin-key OCS_SECRETS_DEFAULT=sealed OCS_LOG_LEVEL=info
CMD=()
while IFS= read -r -d '' item; do CMD+=("$item"); done < <(dockerfile_json CMD | json_to_args)
[ "${CMD[*]}" = "node bin/ocs-sync.js daemon" ] || fail "the image CMD is '${CMD[*]}', expected 'node bin/ocs-sync.js daemon'"
"${CMD[@]}" >"$WORK/daemon.log" 2>&1 &
DAEMON_PID=$!

HEALTHCHECK=()
while IFS= read -r -d '' item; do HEALTHCHECK+=("$item"); done < <(dockerfile_json HEALTHCHECK | json_to_args)
healthy=''
for _ in $(seq 1 600); do
  kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/daemon.log" >&2; fail "the daemon exited early"; }
  if "${HEALTHCHECK[@]}" 2>/dev/null; then
    healthy=yes
    break
  fi
  sleep 0.1
done
[ -n "$healthy" ] || { cat "$WORK/daemon.log" >&2; fail "HEALTHCHECK never passed within 60 s"; }
echo "healthcheck: passed"
# /healthz is already 200 while the first run is moving, so wait for that run to finish before
# reading its counters (a loaded machine can take a while).
METRICS=''
for _ in $(seq 1 600); do
  kill -0 "$DAEMON_PID" 2>/dev/null || { cat "$WORK/daemon.log" >&2; fail "the daemon exited during its first run"; }
  METRICS=$(node -e 'fetch(process.argv[1]).then((r) => r.text()).then((t) => process.stdout.write(t))' "http://127.0.0.1:$HEALTH_PORT/metrics" || true)
  grep -q '^ocs_sync_runs_total{' <<<"$METRICS" && break
  sleep 0.1
done
grep -q '^ocs_sync_runs_total{kind="initial",status="ok"} 1$' <<<"$METRICS" || {
  grep '^ocs_sync_runs_total' <<<"$METRICS" >&2 || true
  cat "$WORK/daemon.log" >&2
  fail "/metrics does not count the first run as ok"
}
grep -q '^ocs_sync_rows_synced_total{resource="chat_messages"} 25$' <<<"$METRICS" || fail "/metrics does not count the synced rows"
[ -s "$OCS_WAREHOUSE_URL" ] || fail "no warehouse at $OCS_WAREHOUSE_URL"
echo "metrics: ok"

started=$(date +%s%N)
kill -TERM "$DAEMON_PID"
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=''
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
[ "$rc" = 0 ] || { cat "$WORK/daemon.log" >&2; fail "the daemon exited $rc after SIGTERM"; }
[ "$elapsed_ms" -lt 10000 ] || fail "the daemon took ${elapsed_ms} ms to stop (limit 10 s)"
echo "SIGTERM: exit 0 after ${elapsed_ms} ms"

# ------------------------------------------------------------------------------------------------
say "4. container build"
ENGINE=''
for candidate in podman docker; do
  if command -v "$candidate" >/dev/null 2>&1; then
    ENGINE=$candidate
    break
  fi
done
if [ "${OCS_CONTAINER_SMOKE:-}" != 1 ]; then
  echo "skipped (set OCS_CONTAINER_SMOKE=1 to build the image${ENGINE:+ with $ENGINE})"
elif [ -z "$ENGINE" ]; then
  echo "skipped: neither podman nor docker is installed"
else
  "$ENGINE" build -t ocs-sync:check .
  "$ENGINE" run --rm ocs-sync:check --help >/dev/null
  echo "image: builds, and --help runs in it"
fi
say "docker-check: all passed"
