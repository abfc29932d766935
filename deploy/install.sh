#!/usr/bin/env bash
# The one install step behind `make up` and `make test`.
#
#   .venv/              Python environment with this package (editable), its engine and dev extras
#   .cache/m2/          Maven's local repository (downloads from Maven Central)
#   .cache/jars/spark/  Delta Lake + Spark Kafka connector jars  -> spark.jars
#   .cache/jars/kafka/  Kafka broker (KRaft) + log4j2 binding     -> broker classpath
#   .cache/jars/s3/     hadoop-aws + the AWS SDK modules it uses  -> class path of a
#                       coordinator whose warehouse or checkpoints are on s3a://
#   .cache/jars/stage/  the coordinator's stateful stage, compiled here from streams/jvm/
#                       against pyspark's own jars (no jar is committed)  -> spark.jars
#   .cache/jars/rocketmq/       RocketMQ 5's official Java client (one shaded jar)
#   .cache/jars/rocketmq-peer/  a RocketMQ application written with it, compiled here from
#                       deploy/jvm/rocketmq-peer/: the Java peer of the gRPC endpoint's tests
#   .cache/jars/cds/    class archives the Spark driver's and the broker's JVMs start from,
#                       recorded by one short run of the local stack
#                       (coordinator/runtime/class_archives.py)
#
# Idempotent: every stage is skipped when its inputs have not changed since it last
# succeeded (a stamp file records a hash of the inputs), so a warm run does almost nothing.
# Nothing here writes outside the checkout.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=${PYTHON:-python3}
UV_VERSION=0.13.9
cache="$root/.cache"
mkdir -p "$cache"

log() { printf '[install] %s\n' "$*" >&2; }
die() { printf '[install] error: %s\n' "$*" >&2; exit 1; }

need() { command -v "$1" >/dev/null 2>&1 || die "$1 is required ($2)"; }
need "$python" "Python >= 3.11"
need java "Java 17"
need mvn "Apache Maven 3.8+"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "Python >= 3.11 is required; found $("$python" --version 2>&1). Set PYTHON=/path/to/python3.11."
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/ *java.specification.version = //p')
[ "${java_major:-0}" -ge 17 ] 2>/dev/null || die "Java 17+ is required; found '${java_major:-unknown}'."

# maven <args...>: Maven without colour, progress or blank lines. Maven 3.8 writes colour
# resets (ESC[0m) even in batch mode with style.color=never, so they are stripped here;
# the exit status is Maven's (pipefail).
maven() {
  mvn --batch-mode --no-transfer-progress --quiet -Dstyle.color=never "$@" 2>&1 \
    | sed -u $'s/\x1b\\[[0-9;]*m//g' | { grep -v '^[[:space:]]*$' || true; } >&2
}

# stamp <name> <inputs...>: succeed when the stage's inputs are unchanged since its last success.
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }
fresh() { local name=$1; shift; [ -f "$cache/$name.stamp" ] && [ "$(cat "$cache/$name.stamp")" = "$(digest "$@")" ]; }
stamp() { local name=$1; shift; digest "$@" >"$cache/$name.stamp"; }

# 1. Python environment. Up to date only if `txcoord` runs from elsewhere: its script's
# interpreter exists and the editable package resolves (both name paths, which a moved or
# deleted checkout would break).
if fresh python pyproject.toml && (cd / && "$root/.venv/bin/txcoord" --help) >/dev/null 2>&1; then
  log "python environment is up to date (.venv)"
else
  log "creating .venv and installing txcoord[engine,dev] (pyspark is a ~450 MB download on a cold machine)"
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  # uv installs the same requirements as pip in less than half the time (most of it is
  # unpacking pyspark); pip stays in the environment for whoever needs it.
  .venv/bin/python -m pip install --quiet --upgrade pip "uv==$UV_VERSION"
  # setuptools warns on every editable install that folders named like the package may
  # shadow it on import: here those folders are the package itself.
  PYTHONWARNINGS="ignore:Editable installation" NO_COLOR=1 \
    .venv/bin/uv pip install --quiet --python .venv/bin/python -e '.[engine,dev]'
  # pyspark is published as a source distribution only: uv builds it into its cache (~1 GB),
  # and a registry whose answers it may not reuse gets a new copy on every install, the old
  # ones left behind (37 GB of them filled one machine's disk). Drop what uv no longer uses.
  .venv/bin/uv cache prune --quiet
  stamp python pyproject.toml
fi

# 2. JVM artifacts from Maven Central, copied into plain folders of jars.
resolve() {  # resolve <name> <pom>
  local name=$1 pom=$2 out="$cache/jars/$1"
  if fresh "jars-$name" "$pom" deploy/jvm/maven-settings.xml && compgen -G "$out/*.jar" >/dev/null; then
    log "jars for $name are up to date (.cache/jars/$name)"
    return
  fi
  log "resolving $name jars from Maven Central"
  rm -rf "$out"
  maven -s deploy/jvm/maven-settings.xml -f "$pom" -Dmaven.repo.local="$cache/m2" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$out" \
    || die "Maven could not resolve $pom (is Maven Central reachable?)"
  if [ "$name" != kafka ]; then prune_provided "$pom" "$out"; fi
  stamp "jars-$name" "$pom" deploy/jvm/maven-settings.xml
  log "$name: $(ls "$out" | wc -l) jars in .cache/jars/$name"
}

# The connectors' transitive dependencies overlap Spark's own (Hadoop, Jackson, Parquet,
# log4j, Scala...), in other versions. Spark's copy is the one its classes were built
# against and the one the class loader finds first anyway, so drop ours: a jar goes when
# pyspark/jars already holds the same Maven artifact in any version.
prune_provided() {
  local pom=$1 out=$2 listing="$cache/spark-dependencies.txt" provided coordinate
  provided=$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  maven -s deploy/jvm/maven-settings.xml -f "$pom" -Dmaven.repo.local="$cache/m2" \
    dependency:list -DincludeScope=runtime -DoutputFile="$listing" >/dev/null
  # lines look like "   group:artifact:jar[:classifier]:version:scope"
  grep -E '^ +[^ :]+:[^ :]+:jar:' "$listing" | while read -r coordinate; do
    IFS=: read -r -a part <<<"${coordinate%% *}"
    local artifact=${part[1]} version=${part[${#part[@]}-2]}
    if compgen -G "$provided/$artifact-[0-9]*.jar" >/dev/null; then
      rm -f "$out/$artifact-$version.jar"
    fi
  done
}
resolve spark deploy/jvm/spark-connectors.pom.xml
resolve kafka deploy/jvm/kafka-broker.pom.xml
resolve s3 deploy/jvm/s3a.pom.xml
resolve rocketmq deploy/jvm/rocketmq-client.pom.xml

# 3. The stateful stage (streams/jvm/*.java), compiled against the Spark that pip installed.
build_stage() {
  local out="$cache/jars/stage" classes="$cache/stage-classes" sources spark_jars
  sources=$(find streams/jvm -name '*.java' | sort)
  # shellcheck disable=SC2086
  if fresh jars-stage $sources pyproject.toml && [ -f "$out/txcoord-stage.jar" ]; then
    log "the stateful stage is up to date (.cache/jars/stage)"
    return
  fi
  need javac "a Java 17 JDK (the stage is compiled from streams/jvm/)"
  spark_jars=$(.venv/bin/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
  log "compiling the stateful stage (streams/jvm/)"
  rm -rf "$classes" "$out" && mkdir -p "$classes" "$out"
  # shellcheck disable=SC2086
  javac --release 17 -Xlint:unchecked -Werror -nowarn -d "$classes" -cp "$spark_jars/*" $sources \
    || die "the stateful stage (streams/jvm/) did not compile"
  jar --create --file "$out/txcoord-stage.jar" -C "$classes" . || die "could not package the stage"
  rm -rf "$classes"
  # shellcheck disable=SC2086
  stamp jars-stage $sources pyproject.toml
}
build_stage

# The Java peer of the RocketMQ gRPC endpoint (deploy/jvm/rocketmq-peer/), against the client.
build_rocketmq_peer() {
  local out="$cache/jars/rocketmq-peer" classes="$cache/rocketmq-peer-classes" sources
  sources=$(find deploy/jvm/rocketmq-peer -name '*.java' | sort)
  # shellcheck disable=SC2086
  if fresh jars-rocketmq-peer $sources "$cache/jars-rocketmq.stamp" && [ -f "$out/txcoord-rocketmq-peer.jar" ]; then
    log "the RocketMQ Java peer is up to date (.cache/jars/rocketmq-peer)"
    return
  fi
  need javac "a Java 17 JDK (the RocketMQ Java peer is compiled from deploy/jvm/rocketmq-peer/)"
  log "compiling the RocketMQ Java peer (deploy/jvm/rocketmq-peer/)"
  rm -rf "$classes" "$out" && mkdir -p "$classes" "$out"
  # shellcheck disable=SC2086
  javac --release 17 -Xlint:unchecked -Werror -nowarn -d "$classes" -cp "$cache/jars/rocketmq/*" $sources \
    || die "the RocketMQ Java peer (deploy/jvm/rocketmq-peer/) did not compile"
  jar --create --file "$out/txcoord-rocketmq-peer.jar" -C "$classes" . || die "could not package the peer"
  rm -rf "$classes"
  # shellcheck disable=SC2086
  stamp jars-rocketmq-peer $sources "$cache/jars-rocketmq.stamp"
}
build_rocketmq_peer

# 4. Class archives: the JVMs of the local stack start from classes parsed once, here. An
# archive belongs to one JDK build and one set of jars, so any change records them again.
# Only speed depends on them: a failed recording is reported, and the JVMs start without.
record_classes() {
  local archives="$cache/jars/cds" jdk="$cache/class-path.txt" inputs
  # The JDK's build and the class path's real location (an archive fits only them).
  { java -version 2>&1; readlink -f "$cache/jars/stage/txcoord-stage.jar"; } >"$jdk"
  inputs=("$jdk" "$cache/jars-spark.stamp" "$cache/jars-kafka.stamp" "$cache/jars-s3.stamp"
          "$cache/jars/stage/txcoord-stage.jar" pyproject.toml coordinator/runtime/class_archives.py
          coordinator/record_classes.py coordinator/runtime/spark_session.py)
  if fresh classes "${inputs[@]}" && [ -f "$archives/spark-driver.jsa" ] && [ -f "$archives/kafka-broker.jsa" ]; then
    log "the class archives are up to date (.cache/jars/cds)"
    return
  fi
  log "recording the class archives of the Spark driver and the broker (a run of the local stack, about a minute)"
  if .venv/bin/python -m coordinator.record_classes >"$cache/record-classes.log" 2>&1; then
    stamp classes "${inputs[@]}"
    log "$(tail -n 1 "$cache/record-classes.log")"
  else
    log "warning: the class archives could not be recorded; the JVMs start without (slower). See .cache/record-classes.log"
  fi
}
record_classes

log "ready"
