"""Configuration: RocketMQ's defaults, file < environment < --set, and refusals that explain."""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from coordinator.core.config import (
    Config,
    StreamsConfig,
    load_config,
    parse_duration,
    parse_overrides,
    parse_size,
)
from coordinator.core.errors import ConfigurationError
from coordinator.runtime.artifacts import JAR_CACHE_ENV


def test_defaults_are_rocketmqs() -> None:
    config = load_config()
    assert config.transaction_timeout == timedelta(seconds=6)
    assert config.transaction_check_interval == timedelta(seconds=30)
    assert config.transaction_check_max == 15
    assert config.file_reserved_time == timedelta(hours=72)
    assert config.max_message_size == 4 * 1024 * 1024
    assert config.default_queue_count == 4
    assert config.max_check_immunity == timedelta(hours=1)  # RocketMQ proxy's cap
    assert config.warehouse == str(Path.cwd() / "warehouse")


def test_relative_paths_are_relative_to_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(
        overrides={
            "warehouse": "wh",
            "streams.checkpoint_dir": "var/cp",
            "rest.auth_file": "tokens.toml",
        },
    )
    assert config.warehouse == str(tmp_path / "wh")
    assert config.streams.checkpoint_dir == str(tmp_path / "var" / "cp")
    assert config.rest.auth_file == str(tmp_path / "tokens.toml")
    # Fixed at start: a later change of directory does not move the data.
    monkeypatch.chdir("/")
    assert config.warehouse == str(tmp_path / "wh")
    # Hadoop URIs and absolute paths are taken as they are.
    remote = load_config(
        overrides={"warehouse": "s3a://bucket/wh", "streams.checkpoint_dir": "/cp"}
    )
    assert (remote.warehouse, remote.streams.checkpoint_dir) == ("s3a://bucket/wh", "/cp")
    assert load_config(overrides={"warehouse": "file:/tmp/wh"}).warehouse == "file:/tmp/wh"
    assert load_config().rest.auth_file == ""  # empty: open mode, not a path


def test_max_check_immunity_is_a_positive_duration_within_file_reserved_time() -> None:
    assert load_config(overrides={"max_check_immunity": "10m"}).max_check_immunity == timedelta(
        minutes=10
    )
    with pytest.raises(ConfigurationError, match="max_check_immunity must be positive"):
        load_config(overrides={"max_check_immunity": "0s"})
    with pytest.raises(ConfigurationError, match="must not exceed file_reserved_time"):
        load_config(overrides={"max_check_immunity": "2h", "file_reserved_time": "90m"})


def test_variables_of_other_parts_are_not_configuration_keys() -> None:
    # The documented jar cache override must not make every txcoord command refuse to start.
    assert load_config(environ={JAR_CACHE_ENV: "/opt/jars", "TXCOORD_TOPIC": "T"}) == load_config()
    with pytest.raises(ConfigurationError, match="unknown configuration key 'jar_caches'"):
        load_config(environ={"TXCOORD_JAR_CACHES": "/opt/jars"})


def test_names_with_a_trailing_newline_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="not a valid Kafka topic name"):
        load_config(overrides={"kafka.half_topic": "txcoord.half\n"})
    with pytest.raises(ConfigurationError, match="expected a duration"):
        parse_duration("6s\nx")


def test_file_then_environment_then_command_line(tmp_path: Path) -> None:
    path = tmp_path / "txcoord.toml"
    path.write_text(
        'transaction_timeout = "10s"\ntransaction_check_max = 3\nwarehouse = "/data/wh"\n'
        '[kafka]\nbootstrap_servers = "127.0.0.1:19092"\npartitions = 8\n'
        '[streams]\ntick_interval = "500ms"\n'
    )
    config = load_config(
        path,
        environ={
            "TXCOORD_TRANSACTION_CHECK_MAX": "5",
            "TXCOORD_KAFKA__PARTITIONS": "2",
            "UNRELATED": "x",
        },
        overrides={"transaction_check_max": "7"},
    )
    assert config.transaction_timeout == timedelta(seconds=10)
    assert config.transaction_check_max == 7
    assert config.warehouse == "/data/wh"
    assert config.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert config.kafka.partitions == 2
    assert config.streams.tick_interval == timedelta(milliseconds=500)
    assert config.streams.trigger_interval == timedelta(seconds=1)  # untouched default


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6s", 6),
        ("500ms", 0.5),
        ("30m", 1800),
        ("72h", 259200),
        ("1d", 86400),
        (15, 15),
        ("2.5s", 2.5),
        (" 7 s ", 7),
    ],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["6 seconds", "-1s", "s", "", True, None, [6]])
def test_bad_durations_are_refused(text: object) -> None:
    with pytest.raises(ConfigurationError, match="expected a duration"):
        parse_duration(text, "transaction_timeout")


def test_sizes() -> None:
    assert parse_size("4MiB") == 4 * 1024 * 1024
    assert parse_size("512KiB") == 512 * 1024
    assert parse_size(100) == 100
    with pytest.raises(ConfigurationError, match="expected a size"):
        parse_size("4 megabytes", "max_message_size")


def test_unknown_keys_are_refused_with_a_suggestion(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("transaction_timout = '6s'\n")
    with pytest.raises(
        ConfigurationError, match=r"'transaction_timout'.*c\.toml.*'transaction_timeout'"
    ):
        load_config(path)
    with pytest.raises(ConfigurationError, match=r"unknown .*'kafka\.bootstrap'.*TXCOORD_KAFKA__"):
        load_config(environ={"TXCOORD_KAFKA__BOOTSTRAP": "x"})
    with pytest.raises(ConfigurationError, match=r"'nonsense'.*--set.*known keys"):
        load_config(overrides={"nonsense": "1"})


def test_wrong_types_name_the_key_and_the_source(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("transaction_check_max = 'many'\n")
    with pytest.raises(
        ConfigurationError, match=r"transaction_check_max \(from .*c\.toml\).*integer"
    ):
        load_config(path)
    with pytest.raises(ConfigurationError, match=r"kafka\.partitions \(from --set\).*integer"):
        load_config(overrides={"kafka.partitions": "four"})
    with pytest.raises(ConfigurationError, match=r"warehouse \(from .*c\.toml\).*a string"):
        path.write_text("warehouse = 3\n")
        load_config(path)


def test_missing_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("transaction_timeout = \n")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_config(bad)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"transaction_timeout": "0s"}, "transaction_timeout must be positive"),
        ({"transaction_check_max": "0"}, "transaction_check_max must be 1..10000"),
        ({"default_queue_count": "0"}, "default_queue_count must be 1..1024"),
        ({"max_message_size": "1GiB"}, "max_message_size must be 1 B..64 MiB"),
        ({"file_reserved_time": "5s"}, "every half would expire before its first check"),
        ({"streams.tick_interval": "4s"}, "tick_interval .* at most half of transaction_timeout"),
        ({"streams.trigger_interval": "10s"}, "trigger_interval .* at most half"),
        ({"kafka.half_topic": "a/b"}, "not a valid Kafka topic name"),
        ({"kafka.op_topic": "txcoord.half"}, "must differ"),
        (
            {"kafka.topics_per_group": "true", "kafka.sasl_username": "ops@corp"},
            "kafka.sasl_username names this principal's operator topic",
        ),
        ({"rest.port": "0"}, "rest.port must be 1..65535"),
        ({"rest.port": "70000"}, "rest.port must be 1..65535"),
        ({"rest.host": " "}, "rest.host must not be empty"),
        ({"rest.max_request_size": "1MiB"}, "a base64 body of max_message_size .* must fit"),
        ({"max_message_size": "64MiB"}, "rest.max_request_size .* must be at least"),
        ({"rest.max_request_size": "2GiB"}, "rest.max_request_size must be at most 1 GiB"),
        ({"rest.check_poll_max_wait": "0s"}, "check_poll_max_wait must be positive"),
        ({"rest.check_poll_max_wait": "10m"}, "check_poll_max_wait must be positive and at most"),
    ],
)
def test_impossible_values_are_refused(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_config(overrides=overrides)


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConfigurationError) as caught:
        Config(transaction_check_max=0, default_queue_count=0)
    assert "transaction_check_max" in str(caught.value)
    assert "default_queue_count" in str(caught.value)


def test_compaction_can_be_turned_off_but_not_run_backwards() -> None:
    off = load_config(overrides={"streams.compact_interval": "0s"})
    assert off.streams.compact_interval == timedelta(0)
    with pytest.raises(ConfigurationError, match="compact_interval must be 0 or more"):
        Config(streams=StreamsConfig(compact_interval=timedelta(seconds=-1)))


def test_the_log_retention_is_an_hour_unless_set_and_never_under_a_minute() -> None:
    assert Config().streams.log_retention == timedelta(hours=1)
    week = load_config(overrides={"streams.log_retention": "7d"})
    assert week.streams.log_retention == timedelta(days=7)
    with pytest.raises(ConfigurationError, match="log_retention must be 1m or more"):
        load_config(overrides={"streams.log_retention": "30s"})


def test_set_options_are_parsed() -> None:
    assert parse_overrides(["a=1", "kafka.x = y=z"]) == {"a": "1", "kafka.x": "y=z"}
    with pytest.raises(ConfigurationError, match="key=value"):
        parse_overrides(["novalue"])


def test_the_example_file_loads_and_shows_the_defaults() -> None:
    example = Path(__file__).parents[3] / "deploy" / "txcoord.example.toml"
    assert load_config(example) == load_config()


def test_the_example_file_names_every_key() -> None:
    """Each key is in the example, set to its default or commented out (TLS, SASL, ...)."""
    example = Path(__file__).parents[3] / "deploy" / "txcoord.example.toml"
    named, section = set(), ""
    for line in example.read_text().splitlines():
        if header := re.fullmatch(r"\[(\w+)\]", line.strip()):
            section = header.group(1) + "."
        elif key := re.match(r"#?\s*(\w+)\s*=", line):
            named.add(section + key.group(1))
    config = load_config()
    keys = set()
    for top in fields(config):
        value = getattr(config, top.name)
        if is_dataclass(value):
            keys |= {f"{top.name}.{f.name}" for f in fields(value)}
        else:
            keys.add(top.name)
    assert sorted(keys - named) == []


def test_the_rest_section() -> None:
    rest = load_config().rest
    assert (rest.host, rest.port, rest.auth_file) == ("127.0.0.1", 8080, "")
    assert rest.max_request_size == 16 * 1024 * 1024
    assert rest.check_poll_max_wait == timedelta(seconds=30)
    changed = load_config(
        environ={"TXCOORD_REST__PORT": "9090", "TXCOORD_REST__AUTH_FILE": "/etc/tokens.toml"},
        overrides={
            "rest.max_request_size": "32MiB",
            "rest.check_poll_max_wait": "500ms",
            "rest.host": "0.0.0.0",
        },
    )
    assert changed.rest.port == 9090
    assert changed.rest.auth_file == "/etc/tokens.toml"
    assert changed.rest.max_request_size == 32 * 1024 * 1024
    assert changed.rest.check_poll_max_wait == timedelta(milliseconds=500)
    assert changed.rest.host == "0.0.0.0"
    # A larger max_message_size is possible once the request limit makes room for it.
    big = load_config(overrides={"max_message_size": "16MiB", "rest.max_request_size": "24MiB"})
    assert big.max_message_size == 16 * 1024 * 1024


def test_rest_keys_are_typed_and_known() -> None:
    with pytest.raises(ConfigurationError, match=r"rest\.port \(from --set\).*integer"):
        load_config(overrides={"rest.port": "http"})
    with pytest.raises(ConfigurationError, match=r"rest\.max_request_size.*expected a size"):
        load_config(overrides={"rest.max_request_size": "lots"})
    with pytest.raises(ConfigurationError, match=r"'rest\.auth'.*'rest\.auth_file'"):
        load_config(overrides={"rest.auth": "x"})
