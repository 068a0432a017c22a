# syntax=docker/dockerfile:1
#
# sluice: two stages. `build` compiles TypeScript with the full toolchain; `runtime` carries only
# production dependencies, dist/, proto/ (loaded at run time) and the demo rules.
#
#   docker build -t sluice .
#   docker run --rm -p 8081:8081 -v "$PWD/envoy/ratelimit:/data/ratelimit/config:ro" sluice
#
# Rules are read the way envoyproxy/ratelimit reads them: $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config
# (here /data/ratelimit/config); mount your own *.yaml files there to replace the demo rules.

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
    RUNTIME_ROOT=/data \
    RUNTIME_SUBDIRECTORY=ratelimit
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY proto ./proto
# The demo rules: the default config, and the bundled copy `serve` falls back to without RUNTIME_*.
COPY envoy/ratelimit /data/ratelimit/config
COPY envoy/ratelimit ./envoy/ratelimit
USER node
# gRPC (RateLimitService, health), HTTP (/healthcheck, /json, /metrics), debug (/rlconfig).
EXPOSE 8081 8080 6070
# For now: healthy when the gRPC port accepts a TCP connection. Moves to HTTP GET /healthcheck on
# PORT 8080 once the HTTP endpoints land.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=6 \
  CMD ["node", "-e", "const s=require('node:net').connect(Number(process.env.GRPC_PORT||8081),'127.0.0.1');s.on('connect',()=>process.exit(0));s.on('error',()=>process.exit(1));setTimeout(()=>process.exit(1),2000)"]
ENTRYPOINT ["node", "dist/main.js"]
CMD ["serve"]
