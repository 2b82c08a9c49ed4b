"""Configuration of the pynenc-cpp components, read like every pynenc config.

Values come from the app's config (``PynencBuilder`` / ``config_values``), a
config file or ``PYNENC__CONFIGCPP__<FIELD>`` environment variables, so that a
child process rebuilds the same components from the pickled config alone.
"""

from __future__ import annotations

from cistell import ConfigField
from pynenc.conf.config_base import ConfigPynencBase


class ConfigCpp(ConfigPynencBase):
    """
    :cvar ConfigField[str] cpp_backend_uri:
        Storage of every pynenc-cpp component: ``memory://`` (process-local).
        ``sqlite:///path`` and ``redis://host:port/db`` arrive with the durable backends.
    """

    cpp_backend_uri = ConfigField("memory://")
