#!/usr/bin/env bash
# test.sh: the project's one test command.
#
# It makes sure the servers the tests talk to are up (installing them from
# Debian's packages where they are missing), gives the run a PostgreSQL
# database, a standalone Redis and a 3-master Redis Cluster of its own,
# exports their addresses for the tests, and runs the race-enabled test
# suite; beside it, one after the other at the lowest priority, go vet, a
# pinned staticcheck and the builds for macOS and Windows, whose output
# follows the tests', each under its name. Then, alone among the tests
# (the checks may still run, at the lowest CPU and I/O priority), it runs
# the timing tests that the first phase skipped: shared mode's leases,
# then the convergence of SQLite's node-units and runners and the fleet's
# idle command count.
# At the end it checks that the tests left no schema and
# no Redis key of their own behind, then stops the servers it started and
# drops its database. It fails if any of this fails, and says which.
#
#   ./test.sh                 everything
#   ./test.sh ./cron/...      only some packages (extra arguments go to go test;
#                             go vet and staticcheck get the package arguments)
#   ./test.sh -run TestX ./cron/
#
# Environment read by the tests (set here, override to point elsewhere):
#   KSANA_TEST_POSTGRES_URL        postgres://... for the SQL adapters
#                                  (default: a database of the run's own on the
#                                  local server, dropped at the end)
#   KSANA_TEST_REDIS_URL           redis://host:port of a standalone server
#                                  (default: a server of the run's own on a free port)
#   KSANA_TEST_REDIS_CLUSTER_URLS  comma-separated redis://host:port seeds of a cluster
#                                  (default: a cluster of the run's own on free ports)
#   KSANA_TEST_CHROMIUM            the headless browser of the console's browser tests
#                                  (default: chromium on the PATH, installed here when missing)
#   KSANA_SCREENSHOTS              a directory where those tests keep a screenshot of each
#                                  page (default: none kept)
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

# Everything the run owns (its Redis servers, the checks' output) lives in
# run_dir, removed at the end with the run's PostgreSQL database.
run_dir=$(mktemp -d /tmp/ksana-test.XXXXXX)
redis_ports=()   # the run's own standalone server and cluster nodes
check_pids=()
cleanup() {
  # Each background job leads a process group of its own (set -m where it
  # starts): its go commands and test processes end with it.
  for pid in "${check_pids[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true; done
  for p in "${redis_ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  [ -z "$pg_db" ] || psql "$pg_admin_url" -Atqc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$run_dir"
}
trap cleanup EXIT

# What the tests name their own things with: the check at the end looks
# for these on servers it did not start (on its own servers everything is
# the tests'). Keep them in step with the helpers that make the names.
#   PostgreSQL schemas: ksanatest_ (internal/testenv.PostgresSchema),
#                       ksana_cmd_test_ (cmd/ksana)
#   Redis key prefixes: ksanatest: (store/redisstore), ksana-disp- (cmd/dispatcher),
#                       ksana-bench- (bench/)
test_schema_re='^(ksanatest_|ksana_cmd_test_)'
test_key_globs=('ksanatest:*' 'ksana-disp-*' 'ksana-bench-*')

# --- PostgreSQL ------------------------------------------------------------
pg_admin_url=""  # the local server, where the run's database is made and dropped
pg_db=""         # the run's own database
ensure_postgres() {
  if [ -n "${KSANA_TEST_POSTGRES_URL:-}" ]; then return; fi
  pg_admin_url="postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
  if ! port_open 5432; then
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
  fi
  command -v psql >/dev/null 2>&1 || apt_install postgresql-client
  pg_db="ksanatest_run_$(date +%s)_$$"
  psql "$pg_admin_url" -Atqc "CREATE DATABASE $pg_db" >/dev/null
  export KSANA_TEST_POSTGRES_URL="postgres://postgres:postgres@127.0.0.1:5432/$pg_db?sslmode=disable"
  log "PostgreSQL database $pg_db"
}

# --- Redis -----------------------------------------------------------------
ensure_redis_binary() {
  if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    log "installing Redis"
    apt_install redis-server redis-tools
  fi
}
# free_port: a port nobody listens on, nor on the port 10000 above it (a
# cluster node's bus), both below the kernel's ephemeral ports (32768 on),
# where an outgoing connection may hold a port that nobody listens on.
free_port() {
  local p
  while :; do
    p=$(( 20000 + RANDOM % 2700 ))
    port_open "$p" || port_open "$((p + 10000))" || { echo "$p"; return; }
  done
}
# start_redis PORT [ARGS...]: a server of the run's own, in memory only.
start_redis() {
  local p=$1; shift
  mkdir -p "$run_dir/redis-$p"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --save "" --appendonly no \
    --dir "$run_dir/redis-$p" --logfile "$run_dir/redis-$p/redis.log" "$@"
  redis_ports+=("$p")
}
standalone_port=""
ensure_redis() {
  if [ -n "${KSANA_TEST_REDIS_URL:-}" ]; then return; fi
  ensure_redis_binary
  standalone_port=$(free_port)
  start_redis "$standalone_port"
  wait_port "$standalone_port" || { log "Redis did not come up on $standalone_port"; exit 1; }
  export KSANA_TEST_REDIS_URL="redis://127.0.0.1:$standalone_port"
  log "Redis up on 127.0.0.1:$standalone_port"
}

cluster_ports=()
start_cluster() {
  if [ -n "${KSANA_TEST_REDIS_CLUSTER_URLS:-}" ]; then return; fi
  ensure_redis_binary
  local seeds=() addrs=()
  for _ in 1 2 3; do
    local p; p=$(free_port)
    cluster_ports+=("$p")
    start_redis "$p" --cluster-enabled yes --cluster-config-file "$run_dir/redis-$p/nodes.conf" \
      --cluster-node-timeout 5000
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

# --- What the tests leave behind ---------------------------------------------
# redis_keys [redis-cli ARGS...]: the keys of a server the run started (all
# of them), or of one it did not (those under the tests' prefixes).
redis_keys() {
  if [ "$1" = own ]; then
    shift
    redis-cli "$@" --scan
  else
    shift
    for g in "${test_key_globs[@]}"; do redis-cli "$@" --scan --pattern "$g"; done
  fi
}
# pg_leftovers [own|shared]: the schemas (and, in the run's own database,
# the tables of public) that the tests made.
pg_leftovers() {
  if [ "$1" = own ]; then
    psql "$KSANA_TEST_POSTGRES_URL" -Atqc "SELECT nspname FROM pg_namespace
      WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('information_schema', 'public')
      UNION ALL SELECT 'public.' || tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
  else
    psql "$KSANA_TEST_POSTGRES_URL" -Atqc "SELECT nspname FROM pg_namespace WHERE nspname ~ '$test_schema_re' ORDER BY 1"
  fi
}
# by_prefix: counts the keys on stdin by the test prefix they start with.
by_prefix() {
  sed -E 's/^(ksanatest:[0-9a-f]+|ksana-bench-[0-9a-f]+|ksana-disp-.*-[0-9a-f]{12})[:{].*$/\1/; t
          s/^([^:{]*).*$/\1 (no test prefix)/' | sort | uniq -c | sort -rn
}
# Servers the run did not start may hold the tests' names already (other
# runs, other checkouts): only what is new at the end counts.
snapshot_shared() {
  : >"$run_dir/pg.before"; : >"$run_dir/redis.before"
  if [ -z "$pg_db" ] && command -v psql >/dev/null 2>&1; then
    pg_leftovers shared >"$run_dir/pg.before" 2>/dev/null || true
  fi
  if [ -z "$standalone_port" ]; then
    redis_keys shared -u "$KSANA_TEST_REDIS_URL" | sort >"$run_dir/redis.before" 2>/dev/null || true
  fi
  if [ "${#cluster_ports[@]}" -eq 0 ]; then
    local i=0 u
    for u in ${KSANA_TEST_REDIS_CLUSTER_URLS//,/ }; do
      : >"$run_dir/cluster$i.before"
      redis_keys shared -u "$u" | sort >"$run_dir/cluster$i.before" 2>/dev/null || true
      i=$((i + 1))
    done
  fi
}
# check_leftovers: says what the tests left and fails if they left anything.
check_leftovers() {
  local left=0 what
  if [ -n "$pg_db" ]; then
    pg_leftovers own >"$run_dir/pg.after" || { log "cannot list the schemas of database $pg_db"; left=1; }
  elif command -v psql >/dev/null 2>&1; then
    pg_leftovers shared | sort | comm -13 "$run_dir/pg.before" - >"$run_dir/pg.after"
  else
    log "no psql: the PostgreSQL schemas left by the tests are not checked"
    : >"$run_dir/pg.after"
  fi
  if [ -s "$run_dir/pg.after" ]; then
    left=1
    log "the tests left $(wc -l <"$run_dir/pg.after") PostgreSQL schemas or tables behind (a test deletes its schema when it ends: internal/testenv.PostgresSchema):"
    sed 's/^/    /' "$run_dir/pg.after" | head -n 20 >&2
  fi
  local servers=() i=0 u
  if [ -n "$standalone_port" ]; then
    redis_keys own -p "$standalone_port" >"$run_dir/redis.after" ||
      { log "cannot list the keys of the standalone server"; left=1; }
  else
    redis_keys shared -u "$KSANA_TEST_REDIS_URL" | sort | comm -13 "$run_dir/redis.before" - >"$run_dir/redis.after"
  fi
  servers+=("standalone server:$run_dir/redis.after")
  if [ "${#cluster_ports[@]}" -gt 0 ]; then
    for p in "${cluster_ports[@]}"; do
      redis_keys own -p "$p" || { log "cannot list the keys of cluster node $p"; left=1; }
    done >"$run_dir/cluster.after"
  else
    for u in ${KSANA_TEST_REDIS_CLUSTER_URLS//,/ }; do
      redis_keys shared -u "$u" | sort | comm -13 "$run_dir/cluster$i.before" -
      i=$((i + 1))
    done >"$run_dir/cluster.after"
  fi
  servers+=("cluster:$run_dir/cluster.after")
  for s in "${servers[@]}"; do
    what=${s%%:*}; f=${s#*:}
    [ -s "$f" ] || continue
    left=1
    by_prefix <"$f" >"$f.by"
    log "the tests left $(wc -l <"$f") Redis keys under $(wc -l <"$f.by") prefixes on the $what (a test deletes its prefix when it ends):"
    for fam in 'ksanatest:|store/redisstore' 'ksana-disp-|cmd/dispatcher' 'ksana-bench-|bench'; do
      n=$(grep -c " ${fam%%|*}" "$f.by" || true)
      [ "$n" = 0 ] || printf '    %s prefixes %s* (the tests of %s)\n' "$n" "${fam%%|*}" "${fam#*|}" >&2
    done
    log "the largest:"
    head -n 10 "$f.by" | sed 's/^/    /' >&2
  done
  return "$left"
}

# --- The run -----------------------------------------------------------------
# check NAME COMMAND...: adds a check to run beside the tests; run_checks
# starts them one after the other in the background, at the lowest
# priority, so that the tests keep their pace (several compilers at once
# beside the race tests on two cores slowed the process tests enough to
# break their timing); each check's output waits in run_dir.
checks=()
check_cmds=()
check() {
  checks+=("$1"); shift
  check_cmds+=("$(printf '%q ' "$@")")
}
run_checks() {
  # The lowest CPU priority, and the idle I/O class where there is one:
  # the tests keep their pace.
  local low="nice -n 19"
  if command -v ionice >/dev/null 2>&1 && ionice -c 3 true 2>/dev/null; then low="ionice -c 3 $low"; fi
  set -m
  (
    for n in "${!checks[@]}"; do
      start=$SECONDS; rc=0
      eval "$low ${check_cmds[$n]}" >"$run_dir/check$n.out" 2>&1 || rc=$?
      echo "$rc $((SECONDS - start))" >"$run_dir/check$n.rc"
    done
  ) &
  check_pids+=($!)
  set +m
}
elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

ensure_postgres
ensure_redis
ensure_chromium
start_cluster
snapshot_shared
log "servers ready after $(elapsed $SECONDS)"

# The package arguments: those that are not flags nor the value of one
# (-run TestX/sub, -count 2).
pkgs=()
value=""
for a in "$@"; do
  if [ -n "$value" ]; then value=""; continue; fi
  case "$a" in
    -run|-skip|-count|-timeout|-parallel|-p|-cpu|-bench|-benchtime|-tags|-shuffle|-fuzz|-fuzztime|-coverprofile|-o|-exec)
      value=1 ;;
    --*=*|-*=*|-*) ;;
    .|..|./*|../*|*/*) pkgs+=("$a") ;;
  esac
done
given=${#pkgs[@]}
[ "$given" -gt 0 ] || pkgs=(./...)
check "go vet ${pkgs[*]}" go vet "${pkgs[@]}"
# The peer benchmarks are a module of their own (bench/): they must build.
[ "$given" -gt 0 ] || check "go vet (bench module)" go -C bench vet ./...
# staticcheck at a pinned version: a new finding fails the run.
check "staticcheck ${pkgs[*]}" go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 "${pkgs[@]}"
# The node-unit reads processes on Linux, macOS and Windows: everything
# must at least build there.
for goos in darwin windows; do
  # -o /dev/null: a single main package would leave its binary here.
  check "GOOS=$goos go build ${pkgs[*]}" env GOOS=$goos go build -o /dev/null "${pkgs[@]}"
done
run_checks
log "beside the tests, one after the other: $(printf '%s; ' "${checks[@]}")"

# The tests of shared mode's lease timing (processes on one database,
# TestSharedLoad with a load of its own making) run alone, once the rest
# is done (the checks yield to them). Beside the suite, they passed in
# most runs and saved some 100 s, but the load they add (TestSharedLoad's
# busy loops, fourteen ksana processes) made other packages' timing
# tests miss their bounds now and then. After them, alone too, three more
# whose bounds are heartbeats, TTLs or the server's own counters, and
# which missed them beside the suite on a machine running at half its
# speed: two node-units on SQLite reaching 5/5 (TestSQLiteTwoProcesses),
# three runners holding a third of the jobs each (TestJobsHeldByPartition),
# and the idle fleet's commands read from INFO commandstats, which count
# every client of the server (TestFleetIdleCommands). A run of given
# packages runs them in place.
lease_names='TestClusterNoSlotLost|TestLeasesRunKeepsShare|TestSharedLoad'
settle_names='TestSQLiteTwoProcesses|TestJobsHeldByPartition|TestFleetIdleCommands'
lease_tests="^($lease_names)\$"
lease_pkgs=(./cmd/ksana/ ./store/sqlstore/)
settle_tests="^($settle_names)\$"
settle_pkgs=(./store/sqlstore/ ./store/redisstore/)
alone_tests="^($lease_names|$settle_names)\$" # skipped by the suite
args=("$@")
if [ "$given" -eq 0 ]; then
  # Every package, the three longest first: go test starts the packages'
  # tests in the order given, and these (process tests, Redis and SQL on
  # several servers, idle windows) would otherwise start last and run on
  # alone at the end of the phase.
  mod=$(go list -m)
  slow=("$mod/cmd/ksana" "$mod/store/redisstore" "$mod/store/sqlstore")
  mapfile -t rest < <(go list ./... | grep -vxF "$(printf '%s\n' "${slow[@]}")")
  args+=(-skip "$alone_tests" "${slow[@]}" "${rest[@]}")
fi
# -race also turns on the compiler's checks of unsafe pointer conversions
# (checkptr) in every package. modernc.org's SQLite is C translated to Go
# that does pointer arithmetic throughout: the checks cost a quarter of the
# SQL tests' processor time there and check none of this project's code,
# which keeps them.
nocheckptr='-gcflags=modernc.org/...=-d=checkptr=0'
failed=()
if [ "$given" -eq 0 ]; then
  log "go test -race -p 4 $nocheckptr -skip '$alone_tests' ${slow[*]#$mod/} and the rest of ./..."
else
  log "go test -race -p 4 $nocheckptr ${args[*]}"
fi
start=$SECONDS
# -p 4: four test binaries at once on the 2 cores. Most packages' tests
# wait on processes, servers and timers more than they compute (the whole
# phase needs about 430 s of CPU against some 650 s of its packages' wall
# time), so two at a time left the cores half idle.
set -m
go test -race -p 4 -timeout 30m "$nocheckptr" "${args[@]}" &
suite_pid=$!
set +m
check_pids+=("$suite_pid")
wait "$suite_pid" || failed+=("go test -race")
log "go test -race: $( [ "${#failed[@]}" -eq 0 ] && echo ok || echo FAILED ) in $(elapsed $((SECONDS - start)))"

# run_alone NAME REGEX PACKAGE...: the tests matching REGEX in the
# packages, two packages at a time, with nothing of the suite beside them.
run_alone() {
  local name=$1 tests=$2 result=ok pid
  shift 2
  log "go test -race -p 2 -run '$tests' $* (alone)"
  start=$SECONDS
  set -m
  go test -race -p 2 -timeout 10m "$nocheckptr" -run "$tests" "$@" &
  pid=$!
  set +m
  check_pids+=("$pid")
  wait "$pid" || { result=FAILED; failed+=("$name, alone"); }
  log "$name: $result in $(elapsed $((SECONDS - start)))"
}
# The checks may still run, at the lowest priorities: they take the CPU
# only when the timing tests leave it idle.
if [ "$given" -eq 0 ]; then
  run_alone "the lease-timing tests" "$lease_tests" "${lease_pkgs[@]}"
  run_alone "the settling tests" "$settle_tests" "${settle_pkgs[@]}"
fi
for pid in "${check_pids[@]}"; do wait "$pid" || true; done
for n in "${!checks[@]}"; do
  read -r rc took <"$run_dir/check$n.rc" || { rc=1; took=0; }
  if [ "$rc" = 0 ]; then
    log "--- ${checks[$n]}: ok in $(elapsed "$took")"
  else
    log "--- ${checks[$n]}: FAILED (exit $rc) in $(elapsed "$took")"
    failed+=("${checks[$n]}")
  fi
  sed 's/^/    /' "$run_dir/check$n.out" >&2
done
check_pids=()

check_leftovers || failed+=("what the tests left behind")
if [ "${#failed[@]}" -gt 0 ]; then
  log "FAILED after $(elapsed $SECONDS): $(printf '%s; ' "${failed[@]}")"
  exit 1
fi
log "ok after $(elapsed $SECONDS)"
