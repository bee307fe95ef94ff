#!/usr/bin/env bash
# Local single-node Apache Kafka broker (KRaft, combined broker+controller) for `make run`
# and the tests. The jars are fetched by Maven (infra/kafka/pom.xml) into .cache/kafka/lib.
#
#   infra/kafka/broker.sh fetch      fetch the jars (only if missing or the pom changed)
#   infra/kafka/broker.sh start      start in the background, wait until it answers, print the
#                                    bootstrap address (does nothing if already running)
#   infra/kafka/broker.sh run        run in the foreground (Procfile/honcho); exits 0 on SIGTERM
#   infra/kafka/broker.sh stop       stop the background (or foreground) broker
#   infra/kafka/broker.sh status     "running pid=… bootstrap=…" (exit 0) or "stopped" (exit 3)
#   infra/kafka/broker.sh bootstrap  print host:port (exit 1 if it was never started)
#   infra/kafka/broker.sh wait       wait until the broker answers (KAFKA_START_TIMEOUT)
#
# Environment:
#   KAFKA_PORT            client port (default: 19092 if free, else the previous port if
#                         free, else any free port)
#   KAFKA_CONTROLLER_PORT controller port (same rule, preferring 19093)
#   KAFKA_DATA_DIR        data dir (default var/kafka; relative paths are taken from the repo
#                         root, whatever the caller's cwd)
#   KAFKA_HEAP_OPTS       JVM heap (default -Xms128m -Xmx512m)
#   KAFKA_JVM_OPTS        more JVM options (e.g. -XX:TieredStopAtLevel=1: ~0.5 s faster start)
#   KAFKA_CDS=0           do not use/create the class-data-sharing archive (.cache/kafka/cds)
#   KAFKA_CONSOLE_LEVEL   `run`: lowest log level also shown on stdout (default WARN)
#   KAFKA_START_TIMEOUT   seconds `start`/`wait` wait for the broker to answer (default 90)
#   KAFKA_DRAIN_S         seconds `run` lets clients leave after SIGTERM before stopping (3)
#
# Opt-in secured listeners, beside the plaintext one (which stays the bootstrap above, the
# controller's and the brokers' own), to test clients against what a managed cluster asks for:
#   KAFKA_SECURE_LISTENERS  any of SASL_PLAINTEXT, SASL_SSL, SSL (comma-separated); each
#                           listens on a free port (its previous one if free), and its address
#                           is written to $KAFKA_DATA_DIR/bootstrap.<protocol in lower case>
#   KAFKA_SASL_USERS        name:password,… : users of SASL PLAIN, SCRAM-SHA-256 and
#                           SCRAM-SHA-512 (SCRAM users are stored when the storage is
#                           formatted: on the first start of a data dir only); names and
#                           passwords of letters, digits, '-' and '_' (they are written into
#                           JAAS and storage-tool arguments unquoted)
#   KAFKA_SSL_KEYSTORE, KAFKA_SSL_KEYSTORE_PASSWORD
#                           the broker's key and certificate (PKCS12), for SASL_SSL and SSL
#
# Files in $KAFKA_DATA_DIR: bootstrap (host:port), pid, ports, broker.log, server.properties and
# log4j2.xml (both rewritten on each start), data/ (logs and KRaft metadata; formatted with
# kafka.tools.StorageTool on first start).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
POM="$ROOT/infra/kafka/pom.xml"
CACHE="$ROOT/.cache/kafka"
LIB="$CACHE/lib"
M2="$ROOT/.cache/m2"
HOST=127.0.0.1

DATA="${KAFKA_DATA_DIR:-var/kafka}"
case "$DATA" in /*) ;; *) DATA="$ROOT/$DATA" ;; esac
PIDFILE="$DATA/pid"
BOOTFILE="$DATA/bootstrap"
PORTSFILE="$DATA/ports"
LOGFILE="$DATA/broker.log"
PROPS="$DATA/server.properties"
LOG4J="$DATA/log4j2.xml"
LOGDIR="$DATA/data"
TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

die() { echo "broker.sh: $*" >&2; exit 1; }
note() { echo "broker.sh: $*" >&2; }

python_bin() {
  if [[ -x "$ROOT/.venv/bin/python" ]]; then echo "$ROOT/.venv/bin/python"
  elif command -v python3 >/dev/null; then command -v python3
  else die "python3 not found"; fi
}

java_bin() {
  if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then echo "$JAVA_HOME/bin/java"
  elif command -v java >/dev/null; then command -v java
  else die "java not found (Kafka 4 needs Java 17+)"; fi
}

# ---------------------------------------------------------------- fetch
pom_hash() { sha256sum "$POM" | cut -d' ' -f1; }

cmd_fetch() {
  local want have=""
  want="$(pom_hash)"
  [[ -f "$CACHE/pom.sha256" ]] && have="$(cat "$CACHE/pom.sha256")"
  if [[ -d "$LIB" && "$have" == "$want" ]] && compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn not found (apt-get install -y maven)"
  note "fetching Kafka jars with Maven into ${LIB#"$ROOT"/} …"
  mkdir -p "$CACHE"
  rm -rf "$LIB.tmp"
  if ! mvn -B -q -Dstyle.color=never -f "$POM" -Dmaven.repo.local="$M2" \
      dependency:copy-dependencies -DoutputDirectory="$LIB.tmp" >"$CACHE/mvn.log" 2>&1; then
    cat "$CACHE/mvn.log" >&2
    rm -rf "$LIB.tmp"
    die "maven could not fetch the Kafka jars (log: ${CACHE#"$ROOT"/}/mvn.log)"
  fi
  rm -rf "$LIB"
  mv "$LIB.tmp" "$LIB"
  echo "$want" >"$CACHE/pom.sha256"
}

# ---------------------------------------------------------------- process helpers
# the pid of the broker of this data dir, if it is alive
running_pid() {
  [[ -f "$PIDFILE" ]] || return 1
  local pid
  pid="$(cat "$PIDFILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  # guard against a recycled pid: it must be a kafka.Kafka JVM using our server.properties
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "kafka.Kafka $PROPS" || return 1
  echo "$pid"
}

# ---------------------------------------------------------------- ports
port_free() {  # port_free PORT: can we bind 127.0.0.1:PORT right now?
  "$(python_bin)" - "$1" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
# like the broker's listener: connections of a previous run in TIME_WAIT do not count
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
finally:
    s.close()
PY
}

any_free_port() {
  "$(python_bin)" - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()
PY
}

# choose_port EXPLICIT PREVIOUS PREFERRED AVOID
choose_port() {
  local explicit="$1" previous="$2" preferred="$3" avoid="$4" p
  if [[ -n "$explicit" ]]; then echo "$explicit"; return; fi
  for p in "$preferred" "$previous"; do
    if [[ -n "$p" && "$p" != "$avoid" ]] && port_free "$p"; then echo "$p"; return; fi
  done
  while :; do
    p="$(any_free_port)"
    [[ "$p" != "$avoid" ]] && { echo "$p"; return; }
  done
}

# ---------------------------------------------------------------- config
new_cluster_id() {
  # Like Kafka's Uuid.randomUuid: never starting with "-", which the storage tool's
  # argument parser would take for an option (1 start in 64 failed before).
  "$(python_bin)" -c '
import base64, uuid
while (cid := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
    pass
print(cid)'
}

read_secure_listeners() {  # sets SECURE_PROTOCOLS from KAFKA_SECURE_LISTENERS
  local protocol listeners="${KAFKA_SECURE_LISTENERS:-}"
  SECURE_PROTOCOLS=()
  for protocol in ${listeners//,/ }; do
    case "$protocol" in
      SASL_PLAINTEXT|SASL_SSL|SSL) SECURE_PROTOCOLS+=("$protocol") ;;
      *) die "KAFKA_SECURE_LISTENERS: unknown $protocol (SASL_PLAINTEXT, SASL_SSL or SSL)" ;;
    esac
  done
}

# secure_config PORT...: the listeners of KAFKA_SECURE_LISTENERS on these ports. Sets
# SECURE_LISTENERS (",NAME://host:port…"), SECURE_MAP (",NAME:NAME…") and SECURE_PROPS.
secure_config() {
  local protocol name port user users="${KAFKA_SASL_USERS:-}" jaas_users="" tls=0
  SECURE_LISTENERS="" SECURE_MAP="" SECURE_PROPS=""
  for user in ${users//,/ }; do
    jaas_users+=" user_${user%%:*}=\"${user#*:}\""
  done
  for protocol in "${SECURE_PROTOCOLS[@]}"; do
    port="$1"; shift
    name="${protocol,,}"
    SECURE_LISTENERS+=",$protocol://$HOST:$port"
    SECURE_MAP+=",$protocol:$protocol"
    [[ "$protocol" == SASL_PLAINTEXT ]] || tls=1
    [[ "$protocol" == SSL ]] && continue
    [[ -n "$users" ]] || die "$protocol needs KAFKA_SASL_USERS"
    SECURE_PROPS+="listener.name.$name.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.$name.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$jaas_users;
listener.name.$name.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.$name.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
"
  done
  if [[ $tls == 1 ]]; then
    [[ -f "${KAFKA_SSL_KEYSTORE:-}" ]] || die "TLS listeners need KAFKA_SSL_KEYSTORE (PKCS12)"
    SECURE_PROPS+="ssl.keystore.type=PKCS12
ssl.keystore.location=$KAFKA_SSL_KEYSTORE
ssl.keystore.password=${KAFKA_SSL_KEYSTORE_PASSWORD:-}
"
  fi
}

# the storage tool's arguments that store the SCRAM credentials of KAFKA_SASL_USERS
scram_arguments() {
  local user mechanism users="${KAFKA_SASL_USERS:-}"
  for user in ${users//,/ }; do
    for mechanism in SCRAM-SHA-256 SCRAM-SHA-512; do
      echo "--add-scram"
      echo "$mechanism=[name=${user%%:*},password=${user#*:}]"
    done
  done
}

write_config() {  # write_config PORT CONTROLLER_PORT [SECURE_PORT...]
  local port="$1" cport="$2"
  shift 2
  secure_config "$@"
  cat >"$PROPS" <<EOF
# generated by infra/kafka/broker.sh on each start: edit the script, not this file
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$cport
listeners=PLAINTEXT://$HOST:$port,CONTROLLER://$HOST:$cport$SECURE_LISTENERS
advertised.listeners=PLAINTEXT://$HOST:$port$SECURE_LISTENERS
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT$SECURE_MAP
${SECURE_PROPS}log.dirs=$LOGDIR
metadata.log.dir=$LOGDIR
# single node
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
default.replication.factor=1
min.insync.replicas=1
group.initial.rebalance.delay.ms=0
# topics are declared in infra/kafka/topics.json and created by the app
auto.create.topics.enable=false
# small machine
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
log.cleaner.dedupe.buffer.size=16777216
EOF
  cat >"$LOG4J" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- generated by infra/kafka/broker.sh -->
<Configuration status="warn" shutdownHook="disable">
  <Appenders>
    <RollingFile name="file" fileName="$LOGFILE" filePattern="$LOGFILE.%i">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
      <SizeBasedTriggeringPolicy size="20MB"/>
      <DefaultRolloverStrategy max="3"/>
    </RollingFile>
    <Console name="console" target="SYSTEM_OUT">
      <PatternLayout pattern="[%d{HH:mm:ss}] %p %m (%c)%n"/>
      <Filters>
        <!-- Warnings of every first start (the offsets topic asked for by two groups at once)
             and every stop of a healthy broker: the file has them. -->
        <RegexFilter regex=".*(The metadata log appears to be empty|Auto topic creation failed for __consumer_offsets with error 'TOPIC_ALREADY_EXISTS'|Attempting to close NetworkClient that has already been closed).*"
                     onMatch="DENY" onMismatch="NEUTRAL"/>
        <ThresholdFilter level="\${sys:memstream.kafka.console.level:-OFF}"/>
      </Filters>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="INFO">
      <AppenderRef ref="file"/>
      <AppenderRef ref="console"/>
    </Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.clients" level="WARN"/>
  </Loggers>
</Configuration>
EOF
}

prepare() {  # choose ports, write config, format storage on first start
  mkdir -p "$DATA"
  local prev_port="" prev_cport="" port cport
  if [[ -f "$PORTSFILE" ]]; then
    read -r prev_port prev_cport <"$PORTSFILE" || true
  fi
  port="$(choose_port "${KAFKA_PORT:-}" "$prev_port" 19092 "")"
  cport="$(choose_port "${KAFKA_CONTROLLER_PORT:-}" "$prev_cport" 19093 "$port")"
  [[ "$port" != "$cport" ]] || die "KAFKA_PORT and the controller port are both $port"
  if [[ -n "${KAFKA_PORT:-}" ]] && ! port_free "$port"; then
    die "KAFKA_PORT=$port is in use"
  fi
  echo "$port $cport" >"$PORTSFILE"
  echo "$HOST:$port" >"$BOOTFILE"
  local protocol secure_file previous secure_port secure_ports=()
  read_secure_listeners
  for protocol in "${SECURE_PROTOCOLS[@]}"; do
    secure_file="$BOOTFILE.${protocol,,}"
    previous=""
    [[ -f "$secure_file" ]] && previous="$(cut -d: -f2 "$secure_file")"
    while :; do
      secure_port="$(choose_port "" "$previous" "" "$port")"
      [[ "$secure_port" != "$cport" && " ${secure_ports[*]} " != *" $secure_port "* ]] && break
      previous=""
    done
    secure_ports+=("$secure_port")
    echo "$HOST:$secure_port" >"$secure_file"
  done
  write_config "$port" "$cport" "${secure_ports[@]}"
  if [[ ! -f "$LOGDIR/meta.properties" ]]; then
    note "formatting ${LOGDIR#"$ROOT"/} (first start)"
    mkdir -p "$LOGDIR"
    local scram=()
    mapfile -t scram < <(scram_arguments)
    # static quorum (controller.quorum.voters): the controller port is not written into the
    # metadata log, so a later start may pick another port if the old one is taken
    "$(java_bin)" -Xmx256m -cp "$LIB/*" -Dlog4j2.configurationFile="$LOG4J" \
        kafka.tools.StorageTool format -t "$(new_cluster_id)" -c "$PROPS" "${scram[@]}" \
        >>"$LOGFILE" 2>&1 || die "formatting the storage failed: see $LOGFILE"
  fi
}

java_cmd() {  # java_cmd CONSOLE_LEVEL: the broker's command line
  local heap extra
  read -r -a heap <<<"${KAFKA_HEAP_OPTS:--Xms128m -Xmx512m}"
  read -r -a extra <<<"${KAFKA_JVM_OPTS:-}"
  JAVA_CMD=(
    "$(java_bin)" "${heap[@]}" "${CDS_OPTS[@]}" -XX:+UseG1GC -XX:MaxGCPauseMillis=20
    -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15
    -XX:ErrorFile="$DATA/hs_err_%p.log" -Djava.awt.headless=true "${extra[@]}"
    -Dlog4j2.configurationFile="$LOG4J" -Dmemstream.kafka.console.level="$1"
    -Dkafka.logs.dir="$DATA"
    -cp "$LIB/*" kafka.Kafka "$PROPS"
  )
}

# ---------------------------------------------------------------- class-data sharing
# The JVM's AppCDS archive of the broker's classes halves the start-up time (JDK 17: dumped at
# the exit of a `start`ed broker, used by later starts). Keyed by the pom and the JDK; checked
# with -Xshare:on before use, since a damaged archive crashes the JVM. KAFKA_CDS=0 turns it off.
cds_archive() {
  local java key
  java="$(readlink -f "$(java_bin)")"
  key="$( { pom_hash; echo "$java"; stat -c '%s %Y' "$java"; } | sha256sum | cut -c1-16)"
  echo "$CACHE/cds/broker-$key.jsa"
}

cds_valid() {  # cds_valid ARCHIVE: can this JVM map it? (a damaged one makes it abort)
  local rc
  # in a subshell, so that bash does not report the abort of the check on stderr
  rc="$( ("$(java_bin)" -XX:ErrorFile="$CACHE/cds/hs_err_%p.log" -Xshare:on \
      -XX:SharedArchiveFile="$1" -cp "$LIB/*" -version >/dev/null 2>&1; echo $?) 2>/dev/null)"
  rm -f "$CACHE"/cds/hs_err_*.log
  [[ "$rc" == 0 ]]
}

cds_opts() {  # cds_opts MODE(start|run): sets CDS_OPTS
  CDS_OPTS=()
  rm -f "$DATA/cds-pending"
  [[ "${KAFKA_CDS:-1}" != 0 ]] || return 0
  local jsa
  jsa="$(cds_archive)"
  if [[ -f "$jsa" ]]; then
    if cds_valid "$jsa"; then
      CDS_OPTS=(-XX:SharedArchiveFile="$jsa")
      return 0
    fi
    note "discarding an unusable class-data archive"
    rm -f "$jsa"
  fi
  if [[ "$1" == start ]]; then
    # one temporary name per data dir: brokers of two data dirs may dump at the same time
    local tmp
    tmp="$jsa.$(echo "$DATA" | sha256sum | cut -c1-8).tmp"
    mkdir -p "$(dirname "$jsa")"
    rm -f "$tmp"
    CDS_OPTS=(-XX:ArchiveClassesAtExit="$tmp")
    echo "$jsa $tmp" >"$DATA/cds-pending"
  fi
}

# after a clean exit of a broker started with ArchiveClassesAtExit: keep the archive
cds_promote() {
  [[ -f "$DATA/cds-pending" ]] || return 0
  local jsa tmp
  read -r jsa tmp <"$DATA/cds-pending" || true
  rm -f "$DATA/cds-pending"
  [[ -n "$jsa" && -n "$tmp" ]] || return 0
  if [[ -f "$tmp" ]] && cds_valid "$tmp"; then
    mv -f "$tmp" "$jsa"
    # archives of other poms or JDKs are of no further use
    find "$(dirname "$jsa")" -name 'broker-*.jsa' ! -name "$(basename "$jsa")" -delete
  else
    rm -f "$tmp"
  fi
}

# ---------------------------------------------------------------- readiness
# Exit 0 once the broker is usable by clients: a Metadata request lists the broker, and the
# group coordinator has loaded every partition of __consumer_offsets (after a restart the
# broker answers Metadata ~0.3 s before committed offsets can be read). Stdlib only, so it
# works before the virtualenv exists. Exit 1 after TIMEOUT seconds, 2 when PID dies.
wait_ready() {  # wait_ready BOOTSTRAP TIMEOUT [PID]
  "$(python_bin)" - "$1" "$2" "${3:-}" <<'PY'
import os, socket, struct, sys, time

host, port = sys.argv[1].rsplit(":", 1)
deadline = time.monotonic() + float(sys.argv[2])
pid = int(sys.argv[3]) if sys.argv[3] else None
OFFSETS = b"__consumer_offsets"


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(">" + fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> bytes:
        n = self.take("h")
        value = self.data[self.pos : self.pos + max(n, 0)]
        self.pos += max(n, 0)
        return value


def call(api: int, version: int, body: bytes) -> Reader:
    with socket.create_connection((host, int(port)), timeout=2) as s:
        s.settimeout(2)
        client = b"memstream-probe"
        msg = struct.pack(">hhih", api, version, 1, len(client)) + client + body
        s.sendall(struct.pack(">i", len(msg)) + msg)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        r = Reader(buf[4:])
        r.take("i")  # correlation id
        return r


def metadata(topics: list[bytes]) -> tuple[int, dict[bytes, tuple[int, int]]]:
    """Metadata v4: (number of brokers, {topic: (error_code, partitions)})."""
    body = struct.pack(">i", len(topics))
    for t in topics:
        body += struct.pack(">h", len(t)) + t
    r = call(3, 4, body + b"\x00")
    r.take("i")  # throttle
    brokers = r.take("i")
    for _ in range(brokers):
        r.take("i"), r.string(), r.take("i"), r.string()
    r.string()  # cluster id
    r.take("i")  # controller
    out = {}
    for _ in range(r.take("i")):
        err, name = r.take("h"), r.string()
        r.take("b")  # internal
        n = r.take("i")
        for _ in range(n):
            r.take("h"), r.take("i"), r.take("i")
            for _ in range(2):  # replicas, isr
                for _ in range(r.take("i")):
                    r.take("i")
        out[name] = (err, n)
    return brokers, out


def java_hash(s: str) -> int:
    h = 0
    for ch in s:  # ASCII: one UTF-16 unit per character
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def groups_loaded(partitions: int) -> bool:
    """OffsetFetch v3 of one probe group per __consumer_offsets partition: no error."""
    probes: dict[int, bytes] = {}
    i = 0
    while len(probes) < partitions:
        g = f"memstream-probe-{i}"
        h = java_hash(g)
        p = (0 if h == -(1 << 31) else abs(h)) % partitions
        probes.setdefault(p, g.encode())
        i += 1
    for g in probes.values():
        r = call(9, 3, struct.pack(">h", len(g)) + g + struct.pack(">i", -1))
        r.take("i")  # throttle
        if r.take("i") != 0:  # topics: a probe group has none
            return False
        if r.take("h") != 0:  # COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR …
            return False
    return True


def ready() -> bool:
    brokers, topics = metadata([OFFSETS])
    if brokers < 1:
        return False
    err, partitions = topics.get(OFFSETS, (3, 0))
    if err == 3:  # UNKNOWN_TOPIC_OR_PARTITION: no group has committed yet
        return True
    return err == 0 and partitions > 0 and groups_loaded(partitions)


while True:
    if pid is not None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            sys.exit(2)
    try:
        if ready():
            sys.exit(0)
    except (OSError, struct.error):
        pass
    if time.monotonic() > deadline:
        sys.exit(1)
    time.sleep(0.1)
PY
}

# ---------------------------------------------------------------- commands
# Jars in place, then hold the data directory's lock on fd 9 for the rest of the command, so
# that two starts never race for the same directory (the broker itself closes fd 9).
lock_data_dir() {
  cmd_fetch
  mkdir -p "$DATA"
  exec 9>"$DATA/.lock"
  flock 9
}

cmd_start() {
  lock_data_dir
  local pid
  if pid="$(running_pid)"; then
    # already running: make sure it answers, print the address
    wait_ready "$(cat "$BOOTFILE")" "$TIMEOUT" "$pid" || die "broker pid $pid does not answer"
    if [[ -n "${KAFKA_PORT:-}" && "$(cat "$BOOTFILE")" != "$HOST:$KAFKA_PORT" ]]; then
      note "already running on $(cat "$BOOTFILE"); KAFKA_PORT=$KAFKA_PORT ignored (stop it first)"
    fi
    cat "$BOOTFILE"
    return 0
  fi
  prepare
  cds_opts start
  java_cmd OFF
  {
    echo "===== $(date -Is) start: ${JAVA_CMD[*]}"
  } >>"$LOGFILE"
  # setsid: the broker outlives this shell and is not hit by the caller's Ctrl-C
  setsid "${JAVA_CMD[@]}" </dev/null >>"$LOGFILE" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$PIDFILE"
  local rc=0
  wait_ready "$(cat "$BOOTFILE")" "$TIMEOUT" "$pid" || rc=$?
  if [[ $rc -ne 0 ]]; then
    if [[ $rc -eq 2 ]]; then note "the broker exited during start-up"; else
      note "the broker did not answer within ${TIMEOUT}s; stopping it"
      kill -TERM "$pid" 2>/dev/null || true
    fi
    rm -f "$PIDFILE"
    tail -n 30 "$LOGFILE" >&2
    exit 1
  fi
  cat "$BOOTFILE"
}

# Clients connected to PORT: established TCP connections whose local end is PORT.
client_connections() {
  local port_hex
  port_hex="$(printf '%04X' "$1")"
  cat /proc/net/tcp /proc/net/tcp6 2>/dev/null \
    | awk -v local_end=":$port_hex" '$4 == "01" && substr($2, length($2) - 4) == local_end' \
    | wc -l
}

# Wait until no client is connected to PORT, at most KAFKA_DRAIN_S seconds (default 3: a
# process manager kills what is still running after 5).
wait_for_clients_to_leave() {
  local deadline=$((SECONDS + ${KAFKA_DRAIN_S:-3}))
  while ((SECONDS < deadline)) && (($(client_connections "$1") > 0)); do
    sleep 0.1
  done
}

cmd_run() {
  lock_data_dir
  local pid
  if pid="$(running_pid)"; then
    die "already running (pid $pid, $(cat "$BOOTFILE")): '$0 stop' it first"
  fi
  prepare
  cds_opts run
  java_cmd "${KAFKA_CONSOLE_LEVEL:-WARN}"
  echo "===== $(date -Is) run: ${JAVA_CMD[*]}" >>"$LOGFILE"
  # The JVM in a session of its own: honcho signals the whole process group at once, and a
  # broker that stopped with its clients would leave them shouting on their way out. This
  # shell takes the signal, lets the clients leave first, then stops the JVM.
  setsid "${JAVA_CMD[@]}" </dev/null 9>&- &
  pid=$!
  echo "$pid" >"$PIDFILE"
  exec 9>&-  # release the lock: `stop`/`status` may take it
  local stopping=0 signalled=0
  trap 'stopping=1' TERM INT HUP
  note "broker pid $pid on $(cat "$BOOTFILE") (log: ${LOGFILE#"$ROOT"/})"
  local rc=0
  while :; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break
    if [[ $stopping -eq 1 && $signalled -eq 0 ]]; then
      wait_for_clients_to_leave "$(cut -d: -f2 "$BOOTFILE")"
      kill -TERM "$pid" 2>/dev/null || true
      signalled=1
    fi
  done
  rm -f "$PIDFILE"
  if [[ $stopping -eq 1 || $rc -eq 143 || $rc -eq 130 ]]; then
    note "broker stopped"
    exit 0
  fi
  note "broker exited with status $rc; see $LOGFILE"
  exit "$rc"
}

cmd_stop() {
  local pid i
  if ! pid="$(running_pid)"; then
    rm -f "$PIDFILE"
    echo "stopped"
    return 0
  fi
  kill -TERM "$pid"
  for ((i = 0; i < 300; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    note "broker pid $pid did not stop within 30s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$DATA/cds-pending"
  fi
  cds_promote
  rm -f "$PIDFILE"
  echo "stopped"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    echo "running pid=$pid bootstrap=$(cat "$BOOTFILE")"
  else
    echo "stopped"
    exit 3
  fi
}

cmd_bootstrap() {
  [[ -f "$BOOTFILE" ]] || die "no $BOOTFILE: start the broker first"
  cat "$BOOTFILE"
}

cmd_wait() {
  # Under honcho the broker starts beside its waiters: give it time to write its address.
  local waited=0
  while [[ ! -f "$BOOTFILE" ]]; do
    (( waited++ < TIMEOUT * 10 )) || die "no $BOOTFILE after ${TIMEOUT}s: is the broker starting?"
    sleep 0.1
  done
  wait_ready "$(cat "$BOOTFILE")" "$TIMEOUT" || die "broker at $(cat "$BOOTFILE") does not answer"
}

case "${1:-}" in
  fetch) cmd_fetch ;;
  start) cmd_start ;;
  run) cmd_run ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  bootstrap) cmd_bootstrap ;;
  wait) cmd_wait ;;
  *) echo "usage: $0 {fetch|start|run|stop|status|bootstrap|wait}" >&2; exit 2 ;;
esac
