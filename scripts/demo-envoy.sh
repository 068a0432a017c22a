#!/usr/bin/env bash
# The no-Docker demo, Envoy side, in one command (sluice runs in another terminal: `npm start`).
#
# Refuses to start (exit 1, saying how to start sluice) unless sluice's gRPC health check answers
# SERVING on 127.0.0.1:GRPC_PORT.
#
# Installs the pinned Envoy if needed (scripts/install-envoy.sh), starts a small echo upstream on
# loopback, writes a loopback copy of envoy/envoy.yaml (only addresses and ports change: the
# `sluice` and `upstream` clusters point at 127.0.0.1, listener and admin bind 127.0.0.1) to
# .cache/demo/envoy-<port>.yaml, and runs Envoy on it until Ctrl-C.
#
# Env (defaults): ENVOY_PORT (10000), ENVOY_ADMIN_PORT (9901), GRPC_PORT (8081, sluice's gRPC port),
# UPSTREAM_PORT (8000; not 8080, which sluice's HTTP endpoints use), ENVOY_LOG_LEVEL (warn),
# ENVOY_BIN (skip the install and use this binary).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"

envoy_port="${ENVOY_PORT:-10000}"
admin_port="${ENVOY_ADMIN_PORT:-9901}"
sluice_port="${GRPC_PORT:-8081}"
upstream_port="${UPSTREAM_PORT:-8000}"

# Envoy fails open (failure_mode_deny: false), so with sluice down every request would get a 200
# and the demo would look like it works without limiting anything. Ask sluice's gRPC health first.
if ! GRPC_PORT="${sluice_port}" node -e '
const grpc = require("@grpc/grpc-js");
const { service } = require("grpc-health-check");
const Health = grpc.makeGenericClientConstructor(service, "Health");
const client = new Health(`127.0.0.1:${process.env.GRPC_PORT}`, grpc.credentials.createInsecure());
client.Check({ service: "" }, { deadline: Date.now() + 2000 }, (err, res) => {
  client.close();
  process.exit(!err && res && res.status === "SERVING" ? 0 : 1);
});
' 2>/dev/null; then
  echo "demo-envoy: sluice is not answering on 127.0.0.1:${sluice_port} (gRPC health check failed)." >&2
  echo "demo-envoy: start it first in another terminal: npm start" >&2
  echo "demo-envoy: (or GRPC_PORT=<port> bash scripts/demo-envoy.sh if sluice listens elsewhere)" >&2
  exit 1
fi

envoy_bin="${ENVOY_BIN:-$(bash scripts/install-envoy.sh)}"
config=".cache/demo/envoy-${envoy_port}.yaml"
mkdir -p "$(dirname "${config}")"

ENVOY_PORT="${envoy_port}" ENVOY_ADMIN_PORT="${admin_port}" GRPC_PORT="${sluice_port}" \
  UPSTREAM_PORT="${upstream_port}" node --input-type=module -e '
// The same rewrite as rewriteForLoopback in test/helpers/envoy.ts (the e2e tier checks that both
// produce the same file): address and port_value are set inside each existing socket_address, and
// nothing else changes.
import { readFileSync, writeFileSync } from "node:fs";
import { parse, stringify } from "yaml";
const env = process.env;
const config = parse(readFileSync("envoy/envoy.yaml", "utf8"));
const socketAddress = (holder, where) => {
  const address = holder?.address?.socket_address;
  if (typeof address !== "object" || address === null) {
    throw new Error(`envoy.yaml: no address.socket_address at ${where}`);
  }
  return address;
};
const moveTo = (address, port) =>
  Object.assign(address, { address: "127.0.0.1", port_value: Number(port) });
moveTo(socketAddress(config.admin, "admin"), env.ENVOY_ADMIN_PORT);
const listeners = config.static_resources?.listeners ?? [];
if (listeners.length !== 1) throw new Error("envoy.yaml: expected exactly one listener");
moveTo(socketAddress(listeners[0], "listener 0"), env.ENVOY_PORT);
const ports = { sluice: env.GRPC_PORT, upstream: env.UPSTREAM_PORT };
for (const [name, port] of Object.entries(ports)) {
  const cluster = (config.static_resources?.clusters ?? []).find((c) => c?.name === name);
  if (!cluster) throw new Error(`envoy.yaml: no cluster named "${name}"`);
  const endpoints = (cluster.load_assignment?.endpoints ?? []).flatMap((e) =>
    (e.lb_endpoints ?? []).map((lb, i) => socketAddress(lb.endpoint, `cluster ${name} endpoint ${i}`)),
  );
  if (endpoints.length === 0) throw new Error(`envoy.yaml: cluster "${name}" has no endpoints`);
  for (const endpoint of endpoints) moveTo(endpoint, port);
}
writeFileSync(process.argv[1], stringify(config));
' "${config}"

upstream_pid=""
envoy_pid=""
cleanup() {
  for pid in ${envoy_pid} ${upstream_pid}; do kill "${pid}" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The upstream: 200 for any path, echoing the request line.
PORT="${upstream_port}" node -e '
require("node:http")
  .createServer((req, res) => res.end(`upstream: ${req.method} ${req.url}\n`))
  .listen(Number(process.env.PORT), "127.0.0.1");
' &
upstream_pid=$!

echo "demo-envoy: Envoy on http://127.0.0.1:${envoy_port} (admin :${admin_port}) -> sluice 127.0.0.1:${sluice_port}, upstream 127.0.0.1:${upstream_port}" >&2
echo "demo-envoy: try: for i in \$(seq 1 8); do curl -s -o /dev/null -w '%{http_code}\\n' localhost:${envoy_port}/; done" >&2
"${envoy_bin}" -c "${config}" --disable-hot-restart --log-level "${ENVOY_LOG_LEVEL:-warn}" &
envoy_pid=$!
wait "${envoy_pid}"
