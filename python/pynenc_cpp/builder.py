"""The pynenc builder plugin: adds ``cpp_mem()`` to ``PynencBuilder``.

Registered in the ``pynenc.plugins`` entry-point group (see pyproject.toml), so
it is available as soon as pynenc-cpp is installed::

    app = PynencBuilder().app_id("demo").cpp_mem().build()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pynenc.builder import PynencBuilder

#: Component class names per backend, as pynenc resolves them from config.
MEM_COMPONENTS: dict[str, str] = {
    "broker_cls": "CppMemBroker",
    "orchestrator_cls": "CppMemOrchestrator",
    "state_backend_cls": "CppMemStateBackend",
    "trigger_cls": "CppMemTrigger",
    "client_data_store_cls": "CppMemClientDataStore",
}


def cpp_mem(builder: PynencBuilder) -> PynencBuilder:
    """Use the in-memory native components for every backend.

    Like pynenc's ``memory()``: state lives in this process, so only runners that
    share the process (``ThreadRunner``, ``DummyRunner``) can be used with it.
    """
    # Importing registers the classes as subclasses of pynenc's ABCs, which is
    # how pynenc resolves the class names below.
    import pynenc_cpp  # noqa: F401

    builder._config.update(MEM_COMPONENTS)
    builder._config["cpp_backend_uri"] = "memory://"
    builder._using_memory_components = True
    builder._plugin_components.update(MEM_COMPONENTS)
    return builder


def _validate(config: dict[str, Any]) -> None:
    """Reject a half-configured app: cpp components must all share one backend URI."""
    uri = config.get("cpp_backend_uri")
    if uri is None:
        return
    if not isinstance(uri, str):
        raise TypeError(f"cpp_backend_uri must be a str, got {type(uri).__name__}")


class CppPlugin:
    """Entry point object: pynenc calls ``register_builder_methods`` once."""

    @staticmethod
    def register_builder_methods(builder_cls: type[PynencBuilder]) -> None:
        builder_cls.register_plugin_method("cpp_mem", cpp_mem)
        builder_cls.register_plugin_validator(_validate)
