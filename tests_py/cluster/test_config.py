"""ClusterConfig: defaults, validation messages and PYNENC_CPP_CLUSTER_* parsing."""

from __future__ import annotations

import dataclasses

import pytest

from pynenc_cpp import _core
from pynenc_cpp.cluster import ENV_PREFIX, ClusterConfig


def test_defaults_match_the_engine() -> None:
    c = ClusterConfig()
    o = _core.ClusterOptions()
    for f in dataclasses.fields(ClusterConfig):
        if f.name == "secret_file":  # Python-side only: resolved into `secret`
            assert c.secret_file == ""
            continue
        if f.name in ("metrics_port", "metrics_addr"):  # Python-side only: the metrics server
            assert (c.metrics_port, c.metrics_addr) == (0, "127.0.0.1")
            continue
        expected = getattr(o, f.name)
        got = getattr(c, f.name)
        if f.name == "seeds":
            got = list(got)
        assert got == expected, f.name
    assert c.standalone


def test_to_options_copies_every_field() -> None:
    c = ClusterConfig(
        host="127.0.0.1",
        port=7000,
        seeds=["127.0.0.1:7001"],
        secret="s",
        quorum=2,
        heartbeat_ms=50,
        suspect_timeout_ms=150,
        stabilize_ms=10,
        state_dir="/tmp/x",
        node_class="worker",
        metadata={"zone": "a"},
        max_frame_bytes=4096,
        send_queue_bound=8,
        cluster_name="c",
        lease_ms=120,
        election="hrw",
        activation_log="/tmp/a.jsonl",
        indirect_probes=1,
        generation_source="sqlite:///tmp/g.db",
        placement="random:7",
        request_timeout_ms=900,
        spawn_timeout_ms=1200,
    )
    o = c.to_options()
    for f in dataclasses.fields(ClusterConfig):
        if f.name in ("secret_file", "metrics_port", "metrics_addr"):
            assert not hasattr(o, f.name)  # handled by the Python layer
            continue
        got = getattr(o, f.name)
        want = getattr(c, f.name)
        assert (list(want) if f.name == "seeds" else want) == got, f.name
    assert c.seeds == ("127.0.0.1:7001",)
    assert not c.standalone
    assert "topsecret" not in repr(dataclasses.replace(c, secret="topsecret"))


@pytest.mark.parametrize(
    ("kwargs", "field_name"),
    [
        ({"port": 70000}, "port"),
        ({"metrics_port": -1}, "metrics_port"),
        ({"metrics_addr": 1}, "metrics_addr"),
        ({"port": -1}, "port"),
        ({"heartbeat_ms": 0}, "heartbeat_ms"),
        ({"heartbeat_ms": 100, "suspect_timeout_ms": 150}, "suspect_timeout_ms"),
        ({"quorum": -1}, "quorum"),
        ({"stabilize_ms": -5}, "stabilize_ms"),
        ({"lease_ms": -1}, "lease_ms"),
        ({"max_frame_bytes": 10}, "max_frame_bytes"),
        ({"send_queue_bound": 0}, "send_queue_bound"),
        ({"election": "random"}, "election"),
        ({"election": "hrw", "election_class": "x"}, "election_class"),
        ({"seeds": ["nohost"]}, "seeds"),
        ({"seeds": ["h:0"]}, "seeds"),
        ({"seeds": "127.0.0.1:1"}, "seeds"),
        ({"metadata": {"k": 1}}, "metadata"),
        ({"cluster_name": ""}, "cluster_name"),
        ({"heartbeat_ms": "100"}, "heartbeat_ms"),
        ({"heartbeat_ms": 10**18, "suspect_timeout_ms": 10**18}, "heartbeat_ms.*one day"),
        ({"request_timeout_ms": 86_400_001}, "request_timeout_ms.*one day"),
        ({"leave_timeout_ms": 2**62}, "leave_timeout_ms.*one day"),
        ({"generation_source": "postgres://x"}, "generation_source"),
        ({"placement": "random"}, "placement"),
        ({"placement": "random:x"}, "placement"),
        ({"placement": "pinned:"}, "placement"),
        ({"placement": "most_loaded"}, "placement"),
        ({"request_timeout_ms": 0}, "request_timeout_ms"),
        ({"spawn_timeout_ms": -1}, "spawn_timeout_ms"),
        ({"secret": " "}, "secret is only whitespace"),
        ({"secret": "\t\n"}, "secret is only whitespace"),
    ],
)
def test_invalid_values_name_the_field(kwargs: dict, field_name: str) -> None:
    with pytest.raises(ValueError, match=field_name):
        ClusterConfig(**kwargs)


def test_non_loopback_with_secret_is_accepted() -> None:
    assert ClusterConfig(host="0.0.0.0", secret="k").secret == "k"


def test_from_env_reads_every_kind_of_field() -> None:
    env = {
        ENV_PREFIX + "HOST": "127.0.0.1",
        ENV_PREFIX + "PORT": "7100",
        ENV_PREFIX + "SEEDS": "127.0.0.1:7101, 127.0.0.1:7102,",
        ENV_PREFIX + "SECRET": "shh",
        ENV_PREFIX + "QUORUM": "2",
        ENV_PREFIX + "HEARTBEAT_MS": "100",
        ENV_PREFIX + "SUSPECT_TIMEOUT_MS": "300",
        ENV_PREFIX + "STABILIZE_MS": "200",
        ENV_PREFIX + "STATE_DIR": "/var/lib/x",
        ENV_PREFIX + "NODE_CLASS": "worker",
        ENV_PREFIX + "METADATA": "zone=a, rack = 7",
        ENV_PREFIX + "MAX_FRAME_BYTES": "65536",
        ENV_PREFIX + "SEND_QUEUE_BOUND": "64",
        ENV_PREFIX + "CLUSTER_NAME": "prod",
        ENV_PREFIX + "LEASE_MS": "250",
        ENV_PREFIX + "ELECTION": "oldest",
        ENV_PREFIX + "ELECTION_CLASS": "worker",
        ENV_PREFIX + "ACTIVATION_LOG": "/tmp/act.jsonl",
        ENV_PREFIX + "INDIRECT_PROBES": "2",
        "UNRELATED": "x",
    }
    c = ClusterConfig.from_env(environ=env)
    assert c == ClusterConfig(
        host="127.0.0.1",
        port=7100,
        seeds=("127.0.0.1:7101", "127.0.0.1:7102"),
        secret="shh",
        quorum=2,
        heartbeat_ms=100,
        suspect_timeout_ms=300,
        stabilize_ms=200,
        state_dir="/var/lib/x",
        node_class="worker",
        metadata={"zone": "a", "rack": "7"},
        max_frame_bytes=65536,
        send_queue_bound=64,
        cluster_name="prod",
        lease_ms=250,
        election="oldest",
        election_class="worker",
        activation_log="/tmp/act.jsonl",
        indirect_probes=2,
    )


def test_from_env_uses_os_environ_and_overrides_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_PREFIX + "PORT", "not-a-number")
    monkeypatch.setenv(ENV_PREFIX + "QUORUM", "3")
    c = ClusterConfig.from_env(port=5)  # the bad variable is overridden, so never parsed
    assert (c.port, c.quorum) == (5, 3)


def test_from_env_custom_prefix() -> None:
    c = ClusterConfig.from_env(
        prefix="MY_", environ={"MY_HEARTBEAT_MS": "50", "MY_SUSPECT_TIMEOUT_MS": "100"}
    )
    assert (c.heartbeat_ms, c.suspect_timeout_ms) == (50, 100)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("PORT", "abc"),
        ("HEARTBEAT_MS", "1.5"),
        ("SEEDS", "127.0.0.1"),
        ("SEEDS", "127.0.0.1:99999"),
        ("METADATA", "novalue"),
        ("METADATA", "=v"),
    ],
)
def test_from_env_errors_name_the_variable(var: str, value: str) -> None:
    with pytest.raises(ValueError, match=ENV_PREFIX + var):
        ClusterConfig.from_env(environ={ENV_PREFIX + var: value})


def test_from_env_semantic_error_names_the_variable() -> None:
    with pytest.raises(ValueError, match=f"quorum.*{ENV_PREFIX}QUORUM"):
        ClusterConfig.from_env(environ={ENV_PREFIX + "QUORUM": "-2"})


def test_config_is_frozen() -> None:
    c = ClusterConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.port = 1  # type: ignore[misc]
    assert dataclasses.replace(c, port=9).port == 9


@pytest.mark.parametrize("bad", [float("inf"), float("nan"), 86_400.001, 1e300, 0, -1, "5", True])
def test_timeouts_are_finite_positive_and_at_most_a_day(bad: object) -> None:
    from pynenc_cpp.cluster.runtime import timeout_ms

    with pytest.raises(ValueError, match="timeout"):
        timeout_ms(bad)  # type: ignore[arg-type]


def test_timeout_ms_converts_within_bounds() -> None:
    from pynenc_cpp.cluster.runtime import timeout_ms

    assert timeout_ms(86_400) == 86_400_000
    assert timeout_ms(0.0001) == 1
    assert timeout_ms(2.5) == 2500
