#!/usr/bin/env bash
# Runs the README's test command (`npm test`) on Node 22, the image's Node, after the suites ran
# on the machine's Node 20: npm's `node` package brings a Node 22 binary and its headers, and
# better-sqlite3 is built against them for the run, then built again for the machine's Node, so
# the checkout is left as it was found.
#
#   bash .ci/node22.sh            # from .ci/run; OCS_CI_NODE22=22.x.y picks another version
set -euo pipefail
cd "$(dirname "$0")/.."

version=${OCS_CI_NODE22:-22.23.3}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/ocs-node22.XXXXXX")
rebuilt=0
restore() {
  local status=$?
  if [ "$rebuilt" -eq 1 ]; then
    echo "== better-sqlite3 built again for $(node --version)"
    npm rebuild better-sqlite3 >/dev/null || status=1
  fi
  rm -rf "$prefix"
  exit "$status"
}
trap restore EXIT

echo "== node@$version from npm"
npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund \
  "node@$version" >/dev/null
bin="$prefix/node_modules/node/bin"
headers="$prefix/node_modules/node/node_modules/node-linux-$(uname -m | sed 's/x86_64/x64/;s/aarch64/arm64/')"
[ -x "$bin/node" ] && [ -d "$headers/include/node" ] || {
  echo "node@$version from npm has no binary or headers under $prefix" >&2
  exit 1
}

echo "== better-sqlite3 built for $("$bin/node" --version)"
rebuilt=1
PATH="$bin:$PATH" npm_config_nodedir="$headers" npm rebuild better-sqlite3 >/dev/null

echo "== tests on $("$bin/node" --version) (npm test)"
PATH="$bin:$PATH" npm test
