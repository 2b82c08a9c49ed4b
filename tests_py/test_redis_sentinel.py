"""``cpp_redis`` behind Redis Sentinel, and writes that wait for replicas: the
URL and argument forms, their errors, and an app on a real deployment (a master,
a replica and a sentinel on loopback) that runs tasks before and after its master
is SIGKILLed. The engine's side of it: tests_cpp/redis_sentinel_test.cc."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pynenc import Pynenc, PynencBuilder

from pynenc_cpp import BadConfig
from pynenc_cpp._component import redis_uri
from pynenc_cpp._urls import redis_url_problem
from pynenc_cpp.builder import sentinel_url
from pynenc_cpp.config import ConfigCpp
from tests_py import runner_tasks as rt
from tests_py.redis_server import RedisServer, await_state, raw_reply
from tests_py.test_cpp_runner import FAST, running


def _conf(app: Pynenc) -> ConfigCpp:
    """The app's pynenc-cpp settings, as its adapters read them."""
    return ConfigCpp(config_values=app.config_values, config_filepath=app.config_filepath)


def test_sentinel_urls_are_accepted_and_their_mistakes_named() -> None:
    for good in (
        "redis+sentinel://127.0.0.1:26379,h2:26380/mymaster/0",
        "sentinel://h/mymaster",
        "redis+sentinel://:pw@[::1]:26379/m/3?sentinel_password=s&min_replicas=1",
    ):
        assert redis_url_problem(good) is None, good
    assert "master's name" in str(redis_url_problem("redis+sentinel://h:26379"))
    assert "master's name" in str(redis_url_problem("sentinel://h:26379/"))
    assert "port" in str(redis_url_problem("sentinel://h:0/m"))
    assert "not a number" in str(redis_url_problem("sentinel://h/m/x"))
    assert "sentinel_password" in str(redis_url_problem("redis://h/0?sentinel_password=x"))
    problem = str(redis_url_problem("sentinel://:secret@h/m?sentinel_password=hidden&x=1"))
    assert "unknown option 'x'" in problem
    assert "secret" not in problem and "hidden" not in problem


def test_the_builder_writes_the_url_from_sentinels_and_a_master_name() -> None:
    url = sentinel_url(
        [("10.0.0.1", 26379), "10.0.0.2:26380", ("::1", 26381)],
        "shop master",
        password="p/w",
        db=2,
        sentinel_password="s&p",
    )
    assert url == (
        "redis+sentinel://:p%2Fw@10.0.0.1:26379,10.0.0.2:26380,[::1]:26381/shop%20master/2"
        "?sentinel_password=s%26p"
    )
    app = (
        PynencBuilder()
        .app_id("sentinel-args")
        .cpp_redis(sentinels=[("127.0.0.1", 26379)], master_name="m", min_replicas=1)
        .build()
    )
    conf = _conf(app)
    assert conf.cpp_redis_url == "redis+sentinel://127.0.0.1:26379/m/0"
    assert redis_uri(conf) == "redis+sentinel://127.0.0.1:26379/m/0?min_replicas=1"
    with pytest.raises(BadConfig, match="needs master_name"):
        PynencBuilder().cpp_redis(sentinels=[("h", 1)])
    with pytest.raises(BadConfig, match="not both"):
        PynencBuilder().cpp_redis("redis://h/0", sentinels=[("h", 1)], master_name="m")
    with pytest.raises(BadConfig, match="go with sentinels"):
        PynencBuilder().cpp_redis("redis://h/0", master_name="m")
    with pytest.raises(BadConfig, match="cpp_redis_min_replicas"):
        PynencBuilder().cpp_redis("redis://h/0", min_replicas=-1)


def test_min_replicas_in_the_url_and_the_setting_must_agree() -> None:
    app = (
        PynencBuilder()
        .app_id("replicas-agree")
        .cpp_redis("redis://h/0?min_replicas=2", min_replicas=2)
        .build()
    )
    conf = _conf(app)
    assert redis_uri(conf) == "redis://h/0?min_replicas=2"
    conf.cpp_redis_min_replicas = 1
    with pytest.raises(BadConfig, match="disagree"):
        redis_uri(conf)


@dataclass
class Deployment:
    master: RedisServer
    replica: RedisServer
    sentinel: RedisServer

    def url(self, query: str = "") -> str:
        return f"redis+sentinel://127.0.0.1:{self.sentinel.port}/pm/0{query}"


@pytest.fixture
def deployment(tmp_path: Path) -> Iterator[Deployment]:
    """A master, its replica and one sentinel (quorum 1, down after 500 ms); all
    three stopped afterwards, also on failure."""
    servers: list[RedisServer] = []
    try:
        # No 5 s wait for more replicas before a diskless sync (Redis 7's default).
        master = RedisServer(
            tmp_path / "master", extra_args=("--repl-diskless-sync-delay", "0")
        ).start()
        servers.append(master)
        replica = RedisServer(
            tmp_path / "replica", extra_args=("--replicaof", "127.0.0.1", str(master.port))
        ).start()
        servers.append(replica)
        await_state(
            "the replica", lambda: "state=online" in raw_reply(master.port, "INFO", "replication")
        )
        conf = (
            f"sentinel monitor pm 127.0.0.1 {master.port} 1\n"
            "sentinel down-after-milliseconds pm 500\n"
            "sentinel failover-timeout pm 3000\n"
        )
        sentinel = RedisServer(tmp_path / "sentinel", sentinel_conf=conf).start()
        servers.append(sentinel)
        await_state(
            "the sentinel to see the replica",
            lambda: str(replica.port) in raw_reply(sentinel.port, "SENTINEL", "replicas", "pm"),
        )
        yield Deployment(master, replica, sentinel)
    finally:
        for server in reversed(servers):
            server.stop(signal.SIGKILL)


def test_an_app_on_sentinel_runs_tasks_before_and_after_its_master_is_killed(
    deployment: Deployment,
) -> None:
    app = (
        PynencBuilder()
        .app_id(f"sentinel-{uuid.uuid4().hex[:8]}")
        .cpp_redis(deployment.url("?connect_timeout_ms=20000"))
        .cpp_runner(workers=2)
        .custom_config(**FAST)
        .build()
    )
    rt.use(app)
    with running(app):
        assert rt.add(1, 2).result == 3
        deployment.master.stop(signal.SIGKILL)
        killed = time.monotonic()
        # Submitted and run on the promoted replica, through the sentinel.
        assert rt.add(2, 3).result == 5
        after_kill = time.monotonic() - killed
    role = raw_reply(deployment.replica.port, "ROLE")
    assert "master" in role, role
    # Within the failover (500 ms to notice, then the promotion) and the 20 s
    # connect budget: no timing claim beyond that (benchmarks measure, not tests).
    assert after_kill < 20


def test_doctor_reports_the_replication_and_warns_when_acknowledged_work_can_be_lost(
    deployment: Deployment,
) -> None:
    from pynenc_cpp import _core

    waits = _core.describe_backend(deployment.url("?min_replicas=1"), "doctor-sentinel")
    facts = dict(waits["facts"])
    assert facts["role"] == "master"
    assert facts["connected_replicas"] == "1"
    assert facts["min_replicas"].startswith("1 (WAIT up to 1000 ms")
    assert facts["sentinel"] == f"master 'pm' named by 127.0.0.1:{deployment.sentinel.port}"
    assert not any("replica" in w for w in waits["warnings"] + waits["errors"])

    no_wait = _core.describe_backend(deployment.url(), "doctor-sentinel")
    assert any("do not wait for the replicas" in w for w in no_wait["warnings"])

    too_many = _core.describe_backend(deployment.url("?min_replicas=2"), "doctor-sentinel")
    assert any("every write fails" in e for e in too_many["errors"])
