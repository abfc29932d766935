"""Deployment files that cannot run here: the image recipe, the Kubernetes manifests, S3.

No Docker, no cluster, no JVM: these tests read deploy/container/, deploy/k8s/ and deploy/s3/
and catch what would only break at build or rollout time: versions that drift from the pins
of pyproject.toml (Spark, Delta, the Hadoop that pyspark ships), files the Dockerfile copies
that do not exist or that .dockerignore leaves out of the build context, an embedded TOML
configuration the coordinator would refuse, S3 properties that differ between
spark-defaults.conf and the SparkApplication.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import re
import shlex
import subprocess
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from coordinator import app
from coordinator.core.config import Config, load_config

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "container" / "Dockerfile"
SPARK_APPLICATION = DEPLOY / "k8s" / "sparkapplication.yaml"
CONFIG_MAP = DEPLOY / "k8s" / "configmap.yaml"
NETWORK_POLICY = DEPLOY / "k8s" / "networkpolicy.yaml"
SPARK_DEFAULTS = DEPLOY / "s3" / "spark-defaults.conf"
S3_README = DEPLOY / "s3" / "README.md"
S3_POM = DEPLOY / "s3" / "s3-connectors.pom.xml"
POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
#: Spark's memory strings (spark.driver.memory and the operator's memory fields).
SPARK_MEMORY = re.compile(r"^\d+[kmgt]?$", re.IGNORECASE)
#: Properties of the S3 setup that deploy/s3/spark-defaults.conf and the manifest share.
S3_PREFIXES = ("spark.delta.logStore.", "spark.io.delta.storage.", "spark.hadoop.fs.s3a.")


# --- sources of truth ------------------------------------------------------------------


def pinned_versions() -> dict[str, str]:
    """Return {distribution: version} of the `==` pins in pyproject.toml (base and engine)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {}
    for requirement in project["dependencies"] + project["optional-dependencies"]["engine"]:
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^;\s]+)", requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def pin(name: str) -> str:
    """Return the version pyproject.toml pins for `name`."""
    versions = pinned_versions()
    assert name in versions, f"pyproject.toml does not pin {name} with == (pins: {versions})"
    return versions[name]


def pyspark_hadoop_version() -> str:
    """Return the Hadoop version of the client jars inside the installed pyspark."""
    spec = importlib.util.find_spec("pyspark")  # finds the package without starting Spark
    assert spec is not None and spec.submodule_search_locations, "pyspark is not installed"
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    assert len(found) == 1, f"expected one hadoop-client-api jar in {jars}, found {found}"
    return found[0].name.removeprefix("hadoop-client-api-").removesuffix(".jar")


def yaml_documents(path: Path) -> list[dict[str, Any]]:
    """Return the non-empty YAML documents of `path`."""
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    assert all(isinstance(doc, dict) for doc in documents), f"{path}: a document is no mapping"
    return documents


def one_of_kind(path: Path, kind: str) -> dict[str, Any]:
    """Return the only document of `kind` in `path`."""
    found = [doc for doc in yaml_documents(path) if doc.get("kind") == kind]
    assert len(found) == 1, f"{path}: expected one {kind}, found {len(found)}"
    return found[0]


def spark_properties(path: Path) -> dict[str, str]:
    """Return the properties of a spark-defaults.conf (key, whitespace or '=', value)."""
    properties = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = re.split(r"(\s*=\s*|\s+)", line, maxsplit=1)
        properties[key] = value.strip()
    return properties


def pom_dependencies(path: Path) -> dict[str, str]:
    """Return {groupId:artifactId: version} of a POM's dependencies, properties resolved."""
    project = ET.parse(path).getroot()
    declared = project.find("m:properties", POM_NS)
    children = [] if declared is None else list(declared)
    properties = {p.tag.split("}")[1]: p.text or "" for p in children}

    def resolve(text: str) -> str:
        return re.sub(r"\$\{([^}]+)\}", lambda m: properties[m.group(1)], text)

    found = {}
    for dependency in project.findall("m:dependencies/m:dependency", POM_NS):
        group = dependency.findtext("m:groupId", "", POM_NS)
        artifact = dependency.findtext("m:artifactId", "", POM_NS)
        found[f"{group}:{artifact}"] = resolve(dependency.findtext("m:version", "", POM_NS))
    return found


# --- the Dockerfile ----------------------------------------------------------------------


@dataclass
class Stage:
    """One FROM of a Dockerfile: its base image (ARGs substituted), name and instructions."""

    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """Return the arguments of every `keyword` instruction of this stage."""
        return [args for word, args in self.instructions if word == keyword]


def instructions(text: str) -> list[tuple[str, str]]:
    """Return (KEYWORD, arguments) for each instruction, continuation lines joined."""
    result: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not pending):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, args = (pending + stripped).partition(" ")
        result.append((keyword.upper(), args.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return result


def global_args(parsed: list[tuple[str, str]]) -> dict[str, str]:
    """Return the defaults of the ARGs declared before the first FROM."""
    defaults = {}
    for keyword, args in parsed:
        if keyword == "FROM":
            break
        if keyword == "ARG":
            name, _, default = args.partition("=")
            defaults[name] = default
    return defaults


def stages(text: str) -> list[Stage]:
    """Return the build stages of a Dockerfile, in order."""
    parsed = instructions(text)
    defaults = global_args(parsed)
    result: list[Stage] = []
    for keyword, args in parsed:
        if keyword == "FROM":
            words = [w for w in args.split() if not w.startswith("--")]
            base = re.sub(r"\$\{(\w+)\}", lambda m: defaults[m.group(1)], words[0])
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            result.append(Stage(base, name))
        elif result:
            result[-1].instructions.append((keyword, args))
    return result


def copy_parts(args: str) -> tuple[dict[str, str], list[str], str]:
    """Return (flags, sources, destination) of a COPY instruction (shell form)."""
    words = shlex.split(args)
    flags = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--"))
    rest = [w for w in words if not w.startswith("--")]
    return flags, rest[:-1], rest[-1]


def dockerignore_excludes(path: str, patterns: list[str]) -> bool:
    """Return True when .dockerignore `patterns` leave `path` out of the build context.

    Docker's rules, simplified: the last pattern matching the path or one of its parent
    folders wins; `!` re-includes; `**/` matches any depth, including none.
    """
    candidates = [path] + [str(p) for p in PurePosixPath(path).parents if str(p) != "."]
    excluded = False
    for raw in patterns:
        negated = raw.startswith("!")
        pattern = raw.removeprefix("!").strip("/")
        variants = {pattern, pattern.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(c, v) for c in candidates for v in variants):
            excluded = not negated
    return excluded


def dockerignore_patterns() -> list[str]:
    """Return the patterns of the repository's .dockerignore ([] without one)."""
    path = ROOT / ".dockerignore"
    if not path.exists():
        return []
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


@pytest.fixture(scope="module")
def dockerfile() -> list[Stage]:
    """The stages of deploy/container/Dockerfile."""
    return stages(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def runtime(dockerfile: list[Stage]) -> Stage:
    """The final stage: the image that runs."""
    return dockerfile[-1]


def workdir(stage: Stage) -> PurePosixPath:
    """Return the last WORKDIR of `stage` (the image's application folder)."""
    folders = stage.all("WORKDIR")
    assert folders, "the runtime stage sets no WORKDIR"
    return PurePosixPath(folders[-1])


def in_repository(image_path: str, stage: Stage) -> Path:
    """Return the repository file that the image holds at `image_path` (under WORKDIR)."""
    relative = PurePosixPath(image_path).relative_to(workdir(stage))
    return ROOT / relative


# --- the manifests -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def application() -> dict[str, Any]:
    """The SparkApplication of deploy/k8s/."""
    return one_of_kind(SPARK_APPLICATION, "SparkApplication")


@pytest.fixture(scope="module")
def spark_conf(application: dict[str, Any]) -> dict[str, Any]:
    """The SparkApplication's sparkConf."""
    conf: dict[str, Any] = application["spec"]["sparkConf"]
    return conf


def config_location(application: dict[str, Any]) -> tuple[str, str]:
    """Return (ConfigMap name, key) of the file the application's --config names."""
    spec = application["spec"]
    arguments = spec["arguments"]
    assert "--config" in arguments, f"the application gets no --config: {arguments}"
    config_path = PurePosixPath(arguments[arguments.index("--config") + 1])
    mounts = {m["name"]: m["mountPath"] for m in spec["driver"].get("volumeMounts", [])}
    for volume in spec.get("volumes", []):
        if "configMap" in volume and mounts.get(volume["name"]) == str(config_path.parent):
            return volume["configMap"]["name"], config_path.name
    raise AssertionError(f"no ConfigMap volume of the driver is mounted at {config_path.parent}")


# --- tests: SparkApplication -------------------------------------------------------------


def test_spark_application_has_what_the_operator_needs(application: dict[str, Any]) -> None:
    assert application["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    assert application["kind"] == "SparkApplication"
    spec = application["spec"]
    assert spec["type"] == "Python"
    assert spec["mode"] in {"cluster", "client"}
    assert isinstance(spec["image"], str) and spec["image"].strip()
    assert spec["mainApplicationFile"].startswith("local:///")
    for role in ("driver", "executor"):
        pod = spec[role]
        assert isinstance(pod["cores"], int) and pod["cores"] >= 1, f"{role}.cores"
        assert SPARK_MEMORY.match(str(pod["memory"])), f"{role}.memory {pod['memory']!r}"
    assert spec["executor"]["instances"] >= 1


def test_spark_version_is_the_pyspark_pin(application: dict[str, Any]) -> None:
    assert application["spec"]["sparkVersion"] == pin("pyspark")


def test_image_versions_are_the_pins(application: dict[str, Any]) -> None:
    annotations = application["metadata"]["annotations"]
    assert annotations["txcoord.io/delta-version"] == pin("delta-spark")
    assert annotations["txcoord.io/hadoop-version"] == pyspark_hadoop_version()


def test_spark_conf_values_are_strings(spark_conf: dict[str, Any]) -> None:
    # The operator's sparkConf is map[string]string: an unquoted `false` or 4 is refused.
    not_strings = {k: v for k, v in spark_conf.items() if not isinstance(v, str)}
    assert not not_strings


def test_main_application_file_is_the_coordinator_in_the_image(
    application: dict[str, Any], runtime: Stage
) -> None:
    image_path = application["spec"]["mainApplicationFile"].removeprefix("local://")
    source = in_repository(image_path, runtime)
    assert source == ROOT / "coordinator" / "app.py"
    copied = {copy_parts(a)[1][0].strip("/") for a in runtime.all("COPY") if "--from" not in a}
    assert source.relative_to(ROOT).parts[0] in copied, "the image does not copy it"


def test_a_fenced_driver_is_not_restarted_and_a_drained_one_is(
    application: dict[str, Any],
) -> None:
    """The operator's OnFailure restarts non-zero exits only: the arguments must make a fenced
    driver's exit zero (restarted, it would fence the newer coordinator in turn) and a clean
    stop's (a node drain's SIGTERM) non-zero, or a drained coordinator would stay down."""
    spec = application["spec"]
    policy = spec["restartPolicy"]
    assert policy["type"] == "OnFailure", "Always restarts a fenced driver too"
    assert policy["onFailureRetries"] >= 1000, "a long-running stream is restarted every time"
    args = app.parse_args([str(a) for a in spec["arguments"]])
    assert args.fenced_exit_code == 0
    assert args.stopped_exit_code != 0


def test_class_path_is_the_jar_folders_of_the_image(
    spark_conf: dict[str, Any], runtime: Stage
) -> None:
    jar_folders = {
        str(workdir(runtime) / copy_parts(a)[2])
        for a in runtime.all("COPY")
        if copy_parts(a)[0].get("from") in ("jars", "stage")  # connectors; the stage
    }
    assert len(jar_folders) >= 2, f"the image copies too few jar folders: {jar_folders}"
    for role in ("driver", "executor"):
        entries = spark_conf[f"spark.{role}.extraClassPath"].split(":")
        assert {e.removesuffix("*").rstrip("/") for e in entries} == {
            f.rstrip("/") for f in jar_folders
        }


def test_driver_log4j_configuration_exists(application: dict[str, Any], runtime: Stage) -> None:
    options = application["spec"]["driver"]["javaOptions"]
    match = re.search(r"-Dlog4j2\.configurationFile=file:(\S+)", options)
    assert match, options
    assert in_repository(match.group(1), runtime).is_file()


# --- tests: the embedded configuration ---------------------------------------------------


def driver_env(application: dict[str, Any]) -> dict[str, Any]:
    """Return the driver's environment variables by name (their manifest entries)."""
    return {e["name"]: e for e in application["spec"]["driver"].get("env", [])}


def embedded_config(
    application: dict[str, Any], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> Config:
    """Return the configuration the application's ConfigMap holds, as the driver loads it
    (with the driver's Secret-fed variables set, as the operator sets them)."""
    name, key = config_location(application)
    config_map = one_of_kind(CONFIG_MAP, "ConfigMap")
    assert config_map["metadata"]["name"] == name
    for variable, entry in driver_env(application).items():
        assert "secretKeyRef" in entry.get("valueFrom", {}), f"{variable}: not from a Secret"
        monkeypatch.setenv(variable, "from-the-secret")
    path = folder / key
    path.write_text(config_map["data"][key])
    return load_config(path, environ={}, overrides={})  # raises on unknown keys or values


def test_config_map_is_a_configuration_the_coordinator_accepts(
    application: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = embedded_config(application, tmp_path, monkeypatch)
    assert config.warehouse.startswith("s3a://")
    assert config.streams.checkpoint_dir.startswith("s3a://")


def test_the_example_is_a_secured_deployment(
    application: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 61, finding 16: the example ran plaintext Kafka on the shared topics (any
    client that reaches the broker acts for every group). Now SASL over TLS, the groups'
    topics apart, the password from a Secret through the driver's environment."""
    config = embedded_config(application, tmp_path, monkeypatch)
    kafka = config.kafka
    assert kafka.security_protocol == "SASL_SSL" and kafka.topics_per_group
    assert kafka.sasl_password_env in driver_env(application)
    assert not kafka.sasl_password_file, "a password file would have to be mounted too"
    assert kafka.replication_factor >= 3 and kafka.min_insync_replicas >= 2


def test_driver_exposes_the_metrics_port_to_its_executors_and_the_monitoring_only(
    application: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = embedded_config(application, tmp_path, monkeypatch)
    driver = application["spec"]["driver"]
    ports = {port["containerPort"] for port in driver.get("ports", [])}
    assert config.metrics.port in ports
    assert config.metrics.host == "0.0.0.0", "a scraper cannot reach the pod's loopback"
    policy = one_of_kind(NETWORK_POLICY, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= driver["labels"].items()
    assert policy["policyTypes"] == ["Ingress"]
    executor = application["spec"]["executor"]["labels"]
    rules = policy["ingress"]
    from_executors = [r for r in rules if "ports" not in r]
    assert [r["from"][0]["podSelector"]["matchLabels"] for r in from_executors] == [executor]
    metrics = [r for r in rules if "ports" in r]
    assert [p["port"] for r in metrics for p in r["ports"]] == [config.metrics.port]
    assert all("namespaceSelector" in r["from"][0] for r in metrics)


# --- tests: S3 ---------------------------------------------------------------------------


def test_spark_defaults_configure_the_dynamodb_log_store() -> None:
    properties = spark_properties(SPARK_DEFAULTS)
    assert properties["spark.delta.logStore.s3a.impl"] == "io.delta.storage.S3DynamoDBLogStore"
    prefix = "spark.io.delta.storage.S3DynamoDBLogStore.ddb."
    assert properties[prefix + "tableName"]
    assert properties[prefix + "region"] == properties["spark.hadoop.fs.s3a.endpoint.region"]


def test_manifest_carries_the_s3_settings_of_spark_defaults(spark_conf: dict[str, Any]) -> None:
    s3 = {k: v for k, v in spark_properties(SPARK_DEFAULTS).items() if k.startswith(S3_PREFIXES)}
    assert len(s3) >= 4
    assert {k: spark_conf.get(k) for k in s3} == s3
    extra = {k for k in spark_conf if k.startswith(S3_PREFIXES)} - set(s3)
    assert not extra, f"S3 settings only in the manifest: {extra}"


def test_s3_jars_match_delta_and_hadoop() -> None:
    dependencies = pom_dependencies(S3_POM)
    assert dependencies["io.delta:delta-storage-s3-dynamodb"] == pin("delta-spark")
    assert dependencies["org.apache.hadoop:hadoop-aws"] == pyspark_hadoop_version()


@pytest.mark.parametrize("path", [S3_README, SPARK_DEFAULTS], ids=lambda p: p.name)
def test_documented_versions_match(path: Path) -> None:
    text = path.read_text()
    delta = re.findall(r"delta-storage-s3-dynamodb[:-](\d+(?:\.\d+)+)", text)
    hadoop = re.findall(r"hadoop-aws[:-](\d+(?:\.\d+)+)", text)
    assert delta and hadoop, f"{path.name} names no delta-storage-s3-dynamodb / hadoop-aws version"
    assert set(delta) == {pin("delta-spark")}
    assert set(hadoop) == {pyspark_hadoop_version()}


# --- tests: the Dockerfile ---------------------------------------------------------------


def test_image_runs_java_17(dockerfile: list[Stage], runtime: Stage) -> None:
    assert re.match(r"^eclipse-temurin:17-jre\b", runtime.base), runtime.base
    external = [s.base for s in dockerfile if s.base not in {t.name for t in dockerfile}]
    assert all(re.search(r"temurin[:-]17\b", base) for base in external), external


def test_image_python_is_3_11_or_later() -> None:
    defaults = global_args(instructions(DOCKERFILE.read_text()))
    major, minor = (int(part) for part in defaults["PYTHON_VERSION"].split("."))
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    floor = re.fullmatch(r">=\s*(\d+)\.(\d+)", required)
    assert floor, required
    assert (major, minor) >= (int(floor.group(1)), int(floor.group(2))) >= (3, 11)


def copy_sources(dockerfile: list[Stage]) -> list[str]:
    """Return what the Dockerfile's COPY and ADD take from the build context."""
    return [
        source
        for stage in dockerfile
        for args in stage.all("COPY") + stage.all("ADD")
        if "from" not in copy_parts(args)[0]
        for source in copy_parts(args)[1]
    ]


def repository_files() -> list[str]:
    """Return the repository's tracked files, relative to its root."""
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return listed.stdout.splitlines()


def test_every_copy_source_is_in_the_build_context(dockerfile: list[Stage]) -> None:
    ignored = dockerignore_patterns()
    sources = copy_sources(dockerfile)
    assert sources
    for source in sources:
        assert list(ROOT.glob(source.rstrip("/"))), f"COPY {source}: no such file in the repo"
        assert not dockerignore_excludes(source.rstrip("/"), ignored), f"{source} is ignored"


def test_copy_from_names_an_earlier_stage(dockerfile: list[Stage]) -> None:
    for index, stage in enumerate(dockerfile):
        earlier = {s.name for s in dockerfile[:index]}
        for args in stage.all("COPY"):
            origin = copy_parts(args)[0].get("from")
            assert origin is None or origin in earlier, f"COPY --from={origin}"


def test_entrypoint_runs_submit_coordinator(runtime: Stage) -> None:
    (entrypoint,) = runtime.all("ENTRYPOINT")
    command = json.loads(entrypoint)  # exec form: signals reach the process
    if command[0] == "/usr/bin/tini":
        assert any("tini" in run.split() for run in runtime.all("RUN")), "tini is not installed"
    scripts = [part for part in command if part.startswith(str(workdir(runtime)))]
    assert len(scripts) == 1, command
    script = in_repository(scripts[0], runtime)
    assert script.is_file() and os.access(script, os.X_OK), f"{script} is not executable"
    execs = re.search(r"^\s*exec\s+\S*/deploy/submit-coordinator\b", script.read_text(), re.M)
    assert execs, f"{script.name} does not exec deploy/submit-coordinator"
    submit = ROOT / "deploy" / "submit-coordinator"
    assert submit.is_file() and os.access(submit, os.X_OK)


def test_jars_are_resolved_like_the_install_step(dockerfile: list[Stage]) -> None:
    (jars,) = [stage for stage in dockerfile if stage.name == "jars"]
    runs = " ".join(jars.all("RUN"))
    assert "deploy/jvm/spark-connectors.pom.xml" in runs
    resolver = DEPLOY / "container" / "resolve-jars"
    assert os.access(resolver, os.X_OK)
    install, resolve = (DEPLOY / "install.sh").read_text(), resolver.read_text()
    for flag in (
        "--batch-mode",
        "-Dstyle.color=never",
        "-s deploy/jvm/maven-settings.xml",
        "dependency:copy-dependencies -DincludeScope=runtime",
        "dependency:list -DincludeScope=runtime",
    ):
        assert flag in install, f"deploy/install.sh no longer runs Maven with {flag}"
        assert flag in resolve, f"resolve-jars runs Maven without {flag}"


def test_the_build_context_is_exactly_what_the_image_copies(dockerfile: list[Stage]) -> None:
    """The real .dockerignore on the real files: a file is sent to the build iff a COPY uses it.

    Tests, notebooks, the benchmark results and the CI files stay out, and so do bytecode
    and the local jar cache and virtual environment (the image resolves its own).
    """
    ignored = dockerignore_patterns()
    copied = [PurePosixPath(source.rstrip("/")) for source in copy_sources(dockerfile)]
    files = repository_files()
    assert "coordinator/app.py" in files and "tests/harness.py" in files, files[:20]
    for path in files:
        used = any(c == PurePosixPath(path) or c in PurePosixPath(path).parents for c in copied)
        assert dockerignore_excludes(path, ignored) is not used, path
    bytecode = Path(importlib.util.cache_from_source(str(ROOT / "coordinator" / "app.py")))
    local = [bytecode.relative_to(ROOT).as_posix(), ".venv/bin/python", ".cache/jars/spark"]
    assert [path for path in local if not dockerignore_excludes(path, ignored)] == []
