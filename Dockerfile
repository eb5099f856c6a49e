# Trade Intent Router: docker build -t trade-intent-router .
# See README.md ("Deployment") and docs/operations.md ("Containers").

ARG NODE_IMAGE=node:20-bookworm-slim

# ---- build: every dependency, then dist/main.js and dist/dashboard/ ----
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# `npm ci` installs exactly the lockfile; it can fail when the lockfile lacks this platform's
# optional packages, and then `npm install` resolves them.
RUN npm ci --no-audit --no-fund || npm install --no-audit --no-fund
COPY . .
RUN npm run build

# ---- runtime: production dependencies and dist/ only, as the unprivileged `node` user ----
FROM ${NODE_IMAGE} AS runtime
# MALLOC_TRIM_THRESHOLD_ as `npm start` sets it: glibc gives freed memory back to the system
# (docs/operations.md, "Node's memory settings").
ENV NODE_ENV=production PORT=8080 HOST=0.0.0.0 DATA_DIR=/data MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app
COPY package.json package-lock.json ./
# dist/main.js bundles the packages it runs, except PGlite (its WebAssembly and data files are
# read from node_modules, as are the Swagger UI's files): the production dependencies stay installed.
RUN (npm ci --omit=dev --no-audit --no-fund || npm install --omit=dev --no-audit --no-fund) \
  && npm cache clean --force
COPY --from=build /app/dist ./dist
# The embedded database (PGlite) and its generated credentials key live in /data when
# DATABASE_URL is unset. A new named volume takes this folder's owner, so the service can write it.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
# No curl in the slim image: node itself asks /healthz (200 once the database answers).
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1)).catch(()=>process.exit(1))"]
# SIGTERM drains: requests in flight finish, routing work gets up to 10 s, then exit 0.
# Give the container more than that before SIGKILL (docker stop -t 30, stop_grace_period: 30s).
STOPSIGNAL SIGTERM
# The same node arguments as `npm start` (without its build step).
CMD ["node", "--max-old-space-size=160", "--heap-growing-percent=60", "dist/main.js"]
