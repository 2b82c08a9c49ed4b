"""Shared plumbing of the adapters: the config and the engine URI of one app."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from pynenc_cpp.config import ConfigCpp

if TYPE_CHECKING:
    from pynenc import Pynenc


class CppComponentMixin:
    """Gives an adapter ``cpp_conf`` and ``engine_uri`` read from its app's config."""

    app: Pynenc

    @cached_property
    def cpp_conf(self) -> ConfigCpp:
        return ConfigCpp(
            config_values=self.app.config_values,
            config_filepath=self.app.config_filepath,
        )

    @property
    def engine_uri(self) -> str:
        return self.cpp_conf.cpp_backend_uri
