#!/usr/bin/env bash
# test.sh: the project's one test command.
#
# It makes sure the servers the tests talk to are up (installing them from
# Debian's packages where they are missing), starts a private 3-master Redis
# Cluster on free local ports, exports their addresses for the tests, runs
# go vet and a pinned staticcheck, builds every package for macOS and
# Windows, runs the race-enabled test suite, and stops the cluster again.
#
#   ./test.sh                 everything
#   ./test.sh ./cron/...      only some packages (extra arguments go to go test;
#                             go vet and staticcheck get the package arguments)
#   ./test.sh -run TestX ./cron/
#
# Environment read by the tests (set here, override to point elsewhere):
#   KSANA_TEST_POSTGRES_URL        postgres://... for the SQL adapters
#   KSANA_TEST_REDIS_URL           redis://host:port of a standalone server
#   KSANA_TEST_REDIS_CLUSTER_URLS  comma-separated redis://host:port seeds of a cluster
#   KSANA_TEST_CHROMIUM            the headless browser of the console's browser tests
#                                  (default: chromium on the PATH, installed here when missing)
#   KSANA_SCREENSHOTS              where those tests save a screenshot of each page
set -euo pipefail
cd "$(dirname "$0")"

log() { printf 'test.sh: %s\n' "$*" >&2; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=""
apt_install() {
  if [ -z "$apt_updated" ]; then as_root apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { for _ in $(seq 1 100); do port_open "$1" && return 0; sleep 0.1; done; return 1; }

# --- PostgreSQL ------------------------------------------------------------
ensure_postgres() {
  if [ -n "${KSANA_TEST_POSTGRES_URL:-}" ]; then return; fi
  export KSANA_TEST_POSTGRES_URL="postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
  if port_open 5432; then return; fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "installing PostgreSQL"
    apt_install postgresql
    fresh_pg=1
  fi
  local ver
  ver=$(ls /etc/postgresql | sort -V | tail -n 1)
  log "starting PostgreSQL $ver"
  as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
  wait_port 5432 || { log "PostgreSQL did not come up on 5432"; exit 1; }
  if [ -n "${fresh_pg:-}" ]; then
    # A fresh Debian install asks for a password over TCP: give postgres one.
    as_root su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null
  fi
}

# --- Redis -----------------------------------------------------------------
ensure_redis_binary() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    log "installing Redis"
    apt_install redis-server redis-tools
  fi
}
ensure_redis() {
  if [ -n "${KSANA_TEST_REDIS_URL:-}" ]; then return; fi
  export KSANA_TEST_REDIS_URL="redis://127.0.0.1:6379"
  if port_open 6379; then return; fi
  ensure_redis_binary
  log "starting Redis on 6379"
  mkdir -p /tmp/ksana-redis-6379
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp/ksana-redis-6379 --logfile /tmp/ksana-redis-6379/redis.log
  wait_port 6379 || { log "Redis did not come up on 6379"; exit 1; }
}

cluster_dir=""
cluster_ports=()
stop_cluster() {
  for p in "${cluster_ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  [ -n "$cluster_dir" ] && rm -rf "$cluster_dir"
}
free_port() {
  local p
  while :; do
    p=$(( 20000 + RANDOM % 20000 ))
    port_open "$p" || port_open "$((p + 10000))" || { echo "$p"; return; }
  done
}
start_cluster() {
  if [ -n "${KSANA_TEST_REDIS_CLUSTER_URLS:-}" ]; then return; fi
  ensure_redis_binary
  cluster_dir=$(mktemp -d /tmp/ksana-cluster.XXXXXX)
  trap stop_cluster EXIT
  local seeds=() addrs=()
  for _ in 1 2 3; do
    local p; p=$(free_port)
    cluster_ports+=("$p")
    mkdir -p "$cluster_dir/$p"
    redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --save "" --appendonly no \
      --cluster-enabled yes --cluster-config-file "$cluster_dir/$p/nodes.conf" \
      --cluster-node-timeout 5000 --dir "$cluster_dir/$p" --logfile "$cluster_dir/$p/redis.log"
    addrs+=("127.0.0.1:$p"); seeds+=("redis://127.0.0.1:$p")
  done
  for p in "${cluster_ports[@]}"; do wait_port "$p" || { log "cluster node $p did not start"; exit 1; }; done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  for _ in $(seq 1 100); do
    ok=1
    for p in "${cluster_ports[@]}"; do
      redis-cli -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=""
    done
    [ -n "$ok" ] && break
    sleep 0.1
  done
  [ -n "$ok" ] || { log "Redis Cluster did not reach cluster_state:ok"; exit 1; }
  export KSANA_TEST_REDIS_CLUSTER_URLS
  KSANA_TEST_REDIS_CLUSTER_URLS=$(IFS=,; echo "${seeds[*]}")
  log "Redis Cluster up on ${addrs[*]}"
}

# --- Chromium (the console's browser tests) ----------------------------------
ensure_chromium() {
  if [ -n "${KSANA_TEST_CHROMIUM:-}" ]; then return; fi
  if ! command -v chromium >/dev/null 2>&1; then
    log "installing Chromium"
    apt_install chromium
  fi
  export KSANA_TEST_CHROMIUM
  KSANA_TEST_CHROMIUM=$(command -v chromium)
}

ensure_postgres
ensure_redis
ensure_chromium
start_cluster

pkgs=()
for a in "$@"; do case "$a" in -*) ;; ./*|*/*) pkgs+=("$a") ;; esac; done
given=${#pkgs[@]}
[ "$given" -gt 0 ] || pkgs=(./...)
log "go vet ${pkgs[*]}"
go vet "${pkgs[@]}"
# The peer benchmarks are a module of their own (bench/): they must build.
if [ "$given" -eq 0 ]; then
  log "go vet (bench module)"
  (cd bench && go vet ./...)
fi
# staticcheck at a pinned version: a new finding fails the run.
staticcheck=honnef.co/go/tools/cmd/staticcheck@v0.8.2
log "staticcheck ${pkgs[*]}"
go run "$staticcheck" "${pkgs[@]}"
# The node-unit reads processes on Linux, macOS and Windows: everything
# must at least build there.
for goos in darwin windows; do
  log "GOOS=$goos go build ${pkgs[*]}"
  GOOS=$goos go build -o /dev/null "${pkgs[@]}" # a single main package would leave its binary here
done
args=("$@")
[ "$given" -gt 0 ] || args+=(./...)
log "go test -race ${args[*]}"
go test -race -timeout 30m "${args[@]}"
