"""The wheel as a user gets it (docs/building.md, "Wheels").

``scripts/build_wheels.sh`` (``make wheel``) builds the wheel of this Python and repairs
it with auditwheel; the tests check that its ``_core`` needs nothing but glibc's own
libraries, then install it into a fresh virtualenv and, in a private mount namespace
where the system's libhiredis cannot be loaded, run a task through a ``CppRunner`` on
``cpp_sqlite`` and on ``cpp_redis`` and start a two-node cluster.

``make wheel`` runs this file once per wheel it built: ``PYNENC_CPP_WHEEL`` names the
wheel and ``PYNENC_CPP_WHEEL_PYTHON`` the interpreter of its CPython version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests_py.redis_server import RedisServer

ROOT = Path(__file__).resolve().parents[1]

#: The lowest tag this toolchain reaches (glibc 2.34's symbol versions of pthread_* and
#: dl*; libstdc++ is linked into _core). docs/building.md says what blocks a lower one.
EXPECTED_TAG = "manylinux_2_34_x86_64"
#: What _core may need from the system: glibc's libraries and libgcc_s, which every
#: manylinux policy allows. Everything else is inside _core (or pynenc_cpp.libs/).
SYSTEM_LIBS = {"linux-vdso.so.1", "libc.so.6", "libm.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2"}
#: A wheel past this has picked up something it should not carry (5.2 MB today).
MAX_WHEEL_MB = 20

ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("PYNENC_CPP_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_wheels.sh"), "--out", str(out)]
        + ["--pythons", version, "--no-sdist"],
        check=True,
        env=ENV,
        timeout=1200,  # a relink when scripts/setup.sh built the tree, else a compile
    )
    (built,) = out.glob("pynenc_cpp-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the wheel (and pynenc from PyPI) installed."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    base = os.environ.get("PYNENC_CPP_WHEEL_PYTHON") or getattr(
        sys, "_base_executable", sys.executable
    )
    subprocess.run([base, "-m", "venv", str(where)], check=True, env=ENV, timeout=120)
    py = where / "bin" / "python"
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        env=ENV,
        timeout=600,
    )
    return py


def _core_of(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(into)
    (core,) = (into / "pynenc_cpp").glob("_core*.so")
    return core


def test_the_wheel_is_manylinux_and_its_engine_needs_only_glibc(
    wheel: Path, tmp_path: Path
) -> None:
    assert EXPECTED_TAG in wheel.name, wheel.name
    assert wheel.stat().st_size < MAX_WHEEL_MB * 1024 * 1024, wheel.stat().st_size
    shown = subprocess.run(
        [str(Path(sys.executable).parent / "auditwheel"), "show", str(wheel)],
        check=True,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    ).stdout
    assert f'"{EXPECTED_TAG}"' in " ".join(shown.split()), shown

    # The typing files ship: py.typed and one stub per submodule of _core.
    names = set(zipfile.ZipFile(wheel).namelist())
    for stub in ("py.typed", "_core/__init__.pyi", "_core/cluster.pyi"):
        assert f"pynenc_cpp/{stub}" in names, sorted(n for n in names if "pynenc_cpp/" in n)

    core = _core_of(wheel, tmp_path)
    ldd = subprocess.run(["ldd", str(core)], check=True, capture_output=True, text=True).stdout
    needed: dict[str, str] = {}
    for line in ldd.splitlines():
        parts = line.split()
        if parts:
            needed[Path(parts[0]).name] = line.strip()
    assert "libc.so.6" in needed, ldd  # ldd read it
    foreign = {
        name: line
        for name, line in needed.items()
        if name not in SYSTEM_LIBS and "pynenc_cpp.libs" not in line
    }
    assert not foreign, f"_core needs libraries outside glibc and pynenc_cpp.libs/: {foreign}"
    assert not [line for line in needed.values() if "not found" in line], ldd


def _hidden_libraries() -> list[str]:
    """The system's libhiredis files: bound over with /dev/null in the test's namespace."""
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    paths = {
        os.path.realpath(m.group(1))
        for m in re.finditer(r"libhiredis[^ ]* .*=> (\S+)", out)
        if os.path.exists(m.group(1))
    }
    return sorted(paths)


APP = textwrap.dedent(
    """
    import os
    from pynenc import PynencBuilder

    sqlite_app = (PynencBuilder().app_id("wheel-sqlite")
                  .cpp_sqlite(path=os.environ["WHEEL_DB"]).cpp_runner(workers=2).build())
    redis_app = (PynencBuilder().app_id("wheel-redis")
                 .cpp_redis(url=os.environ["WHEEL_REDIS"]).cpp_runner(workers=2).build())

    @sqlite_app.task
    def add_on_sqlite(x: int, y: int) -> int:
        return x + y

    @redis_app.task
    def add_on_redis(x: int, y: int) -> int:
        return x + y
    """
)

SCRIPT = textwrap.dedent(
    """
    import ctypes, threading

    for name in ("libhiredis.so.0.14", "libhiredis.so.1.1.0", "libhiredis.so"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        raise SystemExit(f"{name} can still be loaded: the namespace hides nothing")
    print("hiredis hidden")

    import pynenc_cpp
    assert "site-packages" in pynenc_cpp.__file__, pynenc_cpp.__file__
    # The stubs' directory does not hide the extension's submodules.
    import pynenc_cpp._core.cluster as cluster_core
    assert cluster_core.ClusterNode is pynenc_cpp._core.ClusterNode
    import wheel_app

    for label, app, task in (("sqlite", wheel_app.sqlite_app, wheel_app.add_on_sqlite),
                             ("redis", wheel_app.redis_app, wheel_app.add_on_redis)):
        runner = app.runner
        thread = threading.Thread(target=runner.run, daemon=True)
        thread.start()
        try:
            print(type(runner).__name__, label, task(2, 3).result)
        finally:
            runner.stop_runner_loop()
            thread.join(30)
        assert not thread.is_alive()

    from pynenc_cpp.cluster import ClusterConfig, run_cluster

    master = threading.Event()
    opts = dict(host="127.0.0.1", port=0, quorum=2, secret="wheel-test-secret-0123456789",
                heartbeat_ms=100, suspect_timeout_ms=300, stabilize_ms=100)
    first = run_cluster(lambda a: master.set(), None, ClusterConfig(**opts))
    try:
        second = run_cluster(lambda a: master.set(), None,
                             ClusterConfig(seeds=[first.address], **opts))
        try:
            assert master.wait(30), "no master elected"
            nodes = (first, second)
            print("cluster", len({h.node_id for h in nodes}),
                  sum(h.status().is_master for h in nodes))
        finally:
            second.stop()
    finally:
        first.stop()
    """
)


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.timeout(900)
def test_the_installed_wheel_runs_tasks_and_a_cluster_without_the_systems_libhiredis(
    venv: Path, tmp_path: Path, redis: RedisServer
) -> None:
    unshare = shutil.which("unshare")
    assert unshare, "unshare (util-linux) is needed for the private mount namespace"
    (tmp_path / "wheel_app.py").write_text(APP)
    (tmp_path / "check.py").write_text(SCRIPT)
    hide = "".join(f"mount --bind /dev/null {p} && " for p in _hidden_libraries())
    # Root makes the namespace directly; anyone else through a user namespace.
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    env = dict(ENV, WHEEL_DB=str(tmp_path / "tasks.db"), WHEEL_REDIS=redis.url)
    out = subprocess.run(
        [unshare, *flags, "sh", "-c", f'{hide}exec "$0" check.py', str(venv)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split("\n")[:4] == [
        "hiredis hidden",
        "CppRunner sqlite 5",
        "CppRunner redis 5",
        "cluster 2 1",
    ], out.stdout + out.stderr


@pytest.mark.parametrize(
    "hidden,names",
    [
        ("/usr/include/hiredis", "libhiredis-dev (Debian/Ubuntu) or hiredis-devel (Fedora/RHEL)"),
        ("/usr/include/openssl", "libssl-dev (Debian/Ubuntu) or openssl-devel (Fedora/RHEL)"),
    ],
)
def test_a_build_without_a_system_library_names_the_package_to_install(
    hidden: str, names: str, tmp_path: Path
) -> None:
    """What `pip install` of the sdist prints on a machine that lacks a -dev package: the
    configure stops with one line naming it (here the headers are hidden by an empty
    directory bound over them in a private mount namespace)."""
    cmake = shutil.which("cmake")
    assert cmake and Path(hidden).is_dir(), "scripts/setup.sh installs cmake and the -dev packages"
    empty = tmp_path / "empty"
    empty.mkdir()
    flags = ["-m"] if os.geteuid() == 0 else ["-r", "-m"]
    configure = (
        f'mount --bind {empty} {hidden} && exec "$0" -S {ROOT} -B {tmp_path / "build"} '
        "-DPYNENC_CPP_BUILD_TESTS=OFF -DPYNENC_CPP_PORTABLE=ON"
    )
    out = subprocess.run(
        ["unshare", *flags, "sh", "-c", configure, cmake],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=120,
    )
    assert out.returncode != 0, out.stdout
    said = [line for line in out.stderr.splitlines() if "pynenc-cpp needs" in line]
    assert len(said) == 1 and names in said[0], out.stderr
