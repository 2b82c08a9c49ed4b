"""The specs' rules live in the engine (cpp/src/cluster/coordinator/specs.cc) and the
dataclasses raise them when they are made: the exact messages users saw when the
rules were Python's own, InvalidArgument (a ValueError) for a rule, ValueError for
a field of the wrong type, and the agent family's rules at construction."""

from __future__ import annotations

import pytest

from pynenc_cpp import InvalidArgument
from pynenc_cpp.cluster import (
    ActorSpec,
    AgentFamily,
    CrashStrategy,
    Pinned,
    PlacementConstraints,
    RandomPlacement,
    SingletonAnchor,
    SingletonSpec,
)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ActorSpec("", "t"), "label must be a non-empty str, got ''"),
        (lambda: ActorSpec("é" * 513, "t"), "label must be at most 1024 bytes, got 1026"),
        (lambda: ActorSpec("a", ""), "actor_type must be a non-empty str, got ''"),
        (lambda: ActorSpec("a", "t" * 257), "actor_type must be at most 256 bytes, got 257"),
        (
            lambda: ActorSpec("a", "t", initial_state=b"x" * (128 * 1024 + 1)),
            "initial_state must be at most 131072 bytes, got 131073",
        ),
        (lambda: CrashStrategy.wait_for_return(0), "wait_for_return needs wait_s > 0, got 0"),
        (lambda: CrashStrategy.wait_for_return(-2.5), "wait_for_return needs wait_s > 0, got -2.5"),
        (
            lambda: PlacementConstraints(required_classes=("w", "")),
            "required_classes must contain non-empty str, got ''",
        ),
        (
            lambda: PlacementConstraints(anti_affinity_labels=("",)),
            "anti_affinity_labels must contain non-empty str, got ''",
        ),
        (
            lambda: PlacementConstraints(required_metadata={"": "eu"}),
            "required_metadata must map non-empty str to str, got '': 'eu'",
        ),
        (
            lambda: PlacementConstraints(colocate_with=""),
            "colocate_with must be None or a non-empty str, got ''",
        ),
        (
            lambda: PlacementConstraints(required_node_id=""),
            "required_node_id must be None or a non-empty str, got ''",
        ),
        (
            lambda: ActorSpec(
                "a", "t", constraints=PlacementConstraints(anti_affinity_labels=("a",))
            ),
            "constraints name the spec's own label 'a'",
        ),
        (lambda: SingletonAnchor("node"), "a node anchor needs a non-empty value"),
        (
            lambda: SingletonSpec("s", "t", drain_timeout_s=0),
            "drain_timeout_s must be > 0 and <= 86400 (a day), got 0",
        ),
        (
            lambda: SingletonSpec("s", "t", drain_timeout_s=86_401),
            "drain_timeout_s must be > 0 and <= 86400 (a day), got 86401",
        ),
        (lambda: SingletonSpec("s", "t", state=b"x" * (128 * 1024 + 1)), "state must be at most"),
        (lambda: AgentFamily("", ()), "scheme must be a non-empty str, got ''"),
        (
            lambda: AgentFamily("proj", (), drain_timeout_s=-1),
            "drain_timeout_s must be > 0 and <= 86400 (a day), got -1",
        ),
    ],
)
def test_a_broken_rule_raises_the_engines_message(make, message: str) -> None:
    with pytest.raises(InvalidArgument) as raised:
        make()
    assert str(raised.value).startswith(message), str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ActorSpec(5, "t"), "label must be a non-empty str, got 5"),  # type: ignore[arg-type]
        (lambda: ActorSpec("a", "t", initial_state="s"), "initial_state must be bytes, got str"),  # type: ignore[arg-type]
        (lambda: CrashStrategy.wait_for_return(float("nan")), "wait_s must be a number of seconds"),
        (
            lambda: PlacementConstraints(required_classes=("w", 3)),  # type: ignore[arg-type]
            "required_classes must contain non-empty str, got 3",
        ),
        (lambda: SingletonAnchor("class", 7), "a class anchor needs a non-empty value"),  # type: ignore[arg-type]
        (lambda: SingletonAnchor("leader", 7), "anchor value must be a str, got 7"),  # type: ignore[arg-type]
        (lambda: RandomPlacement(-1), "seed must be an int in [0, 2**64), got -1"),
        (lambda: ActorSpec("a", "t", strategy=Pinned(3)), "Pinned's node_id must be a str"),  # type: ignore[arg-type]
        # Text the engine cannot take (a lone surrogate) is refused here, not by pybind11.
        (lambda: ActorSpec("\ud800", "t"), "label must be a non-empty str, got '\\ud800'"),
        (
            lambda: PlacementConstraints(colocate_with="\udfff"),
            "colocate_with must be None or a non-empty str",
        ),
        (lambda: SingletonAnchor("node", "\ud800"), "a node anchor needs a non-empty value"),
        # Times the engine's int64 milliseconds cannot hold.
        (
            lambda: SingletonSpec("s", "t", drain_timeout_s=1e300),
            "drain_timeout_s must be at most 9223372036854775 seconds, got 1e+300",
        ),
        (
            lambda: CrashStrategy.wait_for_return(10**400),
            "wait_s must be at most 9223372036854775 seconds",
        ),
        (lambda: CrashStrategy.wait_for_return(float("inf")), "wait_s must be a number of seconds"),
    ],
)
def test_a_field_of_the_wrong_type_is_a_value_error(make, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        make()
    assert not isinstance(raised.value, InvalidArgument)
    assert str(raised.value).startswith(message), str(raised.value)


def test_rules_once_in_the_engine_reach_every_dataclass() -> None:
    # Rules the Python classes never had, now raised when the spec is made.
    with pytest.raises(InvalidArgument, match="a Pinned strategy needs a non-empty node_id"):
        ActorSpec("a", "t", strategy=Pinned(""))
    with pytest.raises(InvalidArgument, match="does not start with 'proj://'"):
        AgentFamily("proj", ("other://a",))
    with pytest.raises(InvalidArgument, match="supported: 'proj://z'"):
        AgentFamily("proj", ("proj://a",), supported=("proj://z",))
    with pytest.raises(InvalidArgument, match="must not contain"):
        AgentFamily("a/b", ())
    with pytest.raises(InvalidArgument, match="^agents must contain non-empty str, got ''"):
        AgentFamily("proj", ("proj://a", ""))


def test_specs_within_the_rules_are_made() -> None:
    spec = ActorSpec(
        "a",
        "t",
        crash_strategy=CrashStrategy.wait_for_return(0.001),
        constraints=PlacementConstraints(required_metadata={"zone": ""}, colocate_with="b"),
        strategy=Pinned("n1"),
    )
    assert spec._to_core().wait_ms == 1
    assert SingletonSpec("s", "t", anchor=SingletonAnchor.of_class("edge"), drain_timeout_s=86_400)
    assert AgentFamily("proj", ("proj://a", "proj://b"), supported=("proj://b",)).supported == (
        "proj://b",
    )
    assert RandomPlacement(2**64 - 1).seed == 2**64 - 1

    class Index:  # an integer type of another library (numpy's, say)
        def __index__(self) -> int:
            return 7

    seeded = RandomPlacement(Index())  # type: ignore[arg-type]
    assert seeded.seed == 7 and type(seeded.seed) is int
    assert ActorSpec("a", "t", strategy=seeded)._to_core().strategy_seed == 7
