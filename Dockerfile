ARG BASE=node:22-bookworm-slim
# ocs-sync as a container: `ocs-sync daemon` by default, with /healthz and /metrics on :9464 and
# the SQLite warehouse in the /data volume. Any other command works too:
#   docker run --rm -e OCS_BASE_URL=… -e OCS_API_KEY=… -v ocs-data:/data IMAGE sync
#   docker run --rm IMAGE --help
# Every setting comes from OCS_* environment variables (or a config file: OCS_CONFIG=/path).
# BASE is a build argument so CI can build against a local stand-in of the official image.

FROM ${BASE} AS build
# Compilers for better-sqlite3's native addon (built from source when no prebuilt binary fits).
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 make g++ \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
# Dependencies first, so source edits do not redo them. Scripts are held back until the sources
# are here (`prepare` builds them); only better-sqlite3's install script is needed now.
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund \
    && npm rebuild better-sqlite3 \
    && npm cache clean --force
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
RUN npm run build \
    && npm prune --omit=dev --ignore-scripts --no-audit --no-fund \
    && npm cache clean --force

FROM ${BASE}
# MALLOC_ARENA_MAX: each run's SQLite writer thread would get a malloc arena of its own, and the
# daemon's RSS would settle about 30 MB higher (docs/operating.md, "Memory").
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    OCS_WAREHOUSE_URL=/data/ocs-sync.db \
    OCS_HEALTH_LISTEN=0.0.0.0:9464
WORKDIR /app
# Owned by root and read-only to the `node` user that runs it.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY bin ./bin
COPY schema ./schema
COPY config.example.yaml ./
# Node 22 keeps the compiled code of every module a run loads (bin/ocs-sync.js enables it): warmed
# here by a demo run (the sync, its threads) and --help, read by every later run (docs/performance.md).
ENV NODE_COMPILE_CACHE=/app/.node-compile-cache
RUN mkdir -p /tmp/warm /app/.node-compile-cache && node bin/ocs-sync.js demo --rows 5 --db /tmp/warm/demo.db > /dev/null 2>&1 \
    && node bin/ocs-sync.js --help > /dev/null \
    && rm -rf /tmp/warm \
    && chmod -R a+rX /app/.node-compile-cache
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
EXPOSE 9464
# Asks the daemon's own /healthz (no curl in slim images); passes when health.listen is off.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["node", "-e", "const l=process.env.OCS_HEALTH_LISTEN||'127.0.0.1:9464';if(l==='off')process.exit(0);const a=l.replace(/^0\\.0\\.0\\.0:/,'127.0.0.1:').replace(/^\\[::\\]:/,'[::1]:');fetch('http://'+a+'/healthz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
# `IMAGE sync`, `IMAGE ocs-sync sync`, `IMAGE --help`: arguments go to ocs-sync. `IMAGE node …`,
# `IMAGE sh`, or a path: run as given (so the CMD below, and debugging shells, work too).
ENTRYPOINT ["/bin/sh", "-c", "case \"${1:-}\" in node|sh|bash|*/*) exec \"$@\";; ocs-sync) shift;; esac; exec node /app/bin/ocs-sync.js \"$@\"", "ocs-sync"]
CMD ["node", "bin/ocs-sync.js", "daemon"]
