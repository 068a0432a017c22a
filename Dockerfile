# syntax=docker/dockerfile:1
#
# sluice: two stages. `build` compiles TypeScript with the full toolchain; `runtime` carries only
# production dependencies, dist/, proto/ (loaded at run time) and the demo rules.
#
#   docker build -t sluice .
#   docker run --rm -p 8081:8081 -v "$PWD/envoy/ratelimit:/srv/runtime_data/current/config:ro" sluice
#
# Rules are read the way envoyproxy/ratelimit reads them, from
# $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY. The image sets the reference's default
# RUNTIME_ROOT=/srv/runtime_data/current (written out: sluice reads the RUNTIME_* layout only when
# one of those variables is set), with no subdirectory and the default app directory `config`, so the
# rules live in /srv/runtime_data/current/config (the demo rules until you mount yours there). A
# reference deployment that sets its own layout keeps working unchanged; e.g. the reference's
# docker-compose sets RUNTIME_ROOT=/data and RUNTIME_SUBDIRECTORY=ratelimit and mounts the rules at
# /data/ratelimit/config, as this repository's docker-compose.yml does.

ARG NODE_IMAGE=node:20-alpine

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
# COPY keeps the build context's modes; make what sluice reads readable by the non-root user even
# when the checkout was made with a strict umask.
RUN chmod -R a+rX /srv/runtime_data ./proto ./envoy ./console
USER node
# gRPC (RateLimitService, health). The HTTP (8080: /healthcheck, /json, /metrics) and debug (6070)
# ports are exposed once those endpoints exist.
EXPOSE 8081
# For now: healthy when the gRPC port accepts a TCP connection. Moves to HTTP GET /healthcheck on
# PORT 8080 once the HTTP endpoints land.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=6 \
  CMD ["node", "-e", "const s=require('node:net').connect(Number(process.env.GRPC_PORT||8081),'127.0.0.1');s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(1));setTimeout(()=>process.exit(1),2000)"]
ENTRYPOINT ["node", "dist/main.js"]
CMD ["serve"]
