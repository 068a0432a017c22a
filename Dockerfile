# syntax=docker/dockerfile:1
#
# sluice: two stages. `build` compiles TypeScript with the full toolchain; `runtime` carries only
# production dependencies, dist/, proto/ (loaded at run time) and the demo rules.
#
#   docker build -t sluice .
#   docker run --rm -p 8081:8081 -p 8080:8080 -v "$PWD/myrules:/srv/runtime_data/current/config:ro" sluice
#
# NODE_IMAGE is the base of both stages: a Debian-based Node.js 24 image by default (Node 22 works
# too: --build-arg NODE_IMAGE=docker.io/library/node:22-slim). The base needs `node` and `npm` on
# PATH, a `node` user and /bin/sh. The name is fully qualified, so podman builds it too (it
# resolves no short name without a configured search registry).
#
# Rules are read the way envoyproxy/ratelimit reads them, from
# $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY. The image sets the reference's default
# RUNTIME_ROOT=/srv/runtime_data/current (written out: sluice reads the RUNTIME_* layout only when
# one of those variables is set), with no subdirectory and the default app directory `config`, so the
# rules live in /srv/runtime_data/current/config (the demo rules until you mount yours there). A
# reference deployment that sets its own layout keeps working unchanged; e.g. the reference's
# docker-compose sets RUNTIME_ROOT=/data and RUNTIME_SUBDIRECTORY=ratelimit and mounts the rules at
# /data/ratelimit/config, as this repository's docker-compose.yml does.

ARG NODE_IMAGE=docker.io/library/node:24-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY proto ./proto
COPY src ./src
RUN npm run build

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    RUNTIME_ROOT=/srv/runtime_data/current
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY proto ./proto
# The debug console's page (docs/operations-console.md).
COPY console ./console
# The demo rules: the default config, and the bundled copy `serve` falls back to without RUNTIME_*.
COPY envoy/ratelimit /srv/runtime_data/current/config
COPY envoy/ratelimit ./envoy/ratelimit
# COPY keeps the build context's modes; make what sluice reads readable by any user (the image's
# `node`, or the UID a Kubernetes securityContext picks) even when the checkout was made with a
# strict umask. /bin/ratelimit is the reference image's command: `serve`, so a Deployment written
# for envoyproxy/ratelimit (Envoy Gateway's runs `/bin/ratelimit`) runs sluice unchanged.
RUN chmod -R a+rX /srv/runtime_data ./proto ./envoy ./console ./dist ./node_modules \
 && printf '#!/bin/sh\nexec node /app/dist/main.js serve "$@"\n' > /bin/ratelimit \
 && chmod 755 /bin/ratelimit
USER node
# 8081 gRPC (RateLimitService, grpc.health.v1.Health, reflection); 8080 HTTP (/healthcheck, /json,
# /metrics); 6070 debug, which listens on loopback unless DEBUG_HOST=0.0.0.0 is set.
EXPOSE 8081 8080 6070
# Healthy while /healthcheck answers 200: failing while the rules cannot be served or, with
# BACKEND_TYPE=redis and STORE_FAILURE_MODE=error, while Redis is unreachable; passing again when it
# is back. Asks 127.0.0.1:$PORT, so HOST must be left at 0.0.0.0 or include loopback. The timer is
# what fails a check whose request hangs (node would otherwise exit 0 with nothing left to do).
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "setTimeout(()=>process.exit(1),2500);fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthcheck').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "dist/main.js"]
CMD ["serve"]
