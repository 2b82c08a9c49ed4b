"""pynenc-cpp: a C++ engine for the pynenc task framework.

Use it through pynenc's builder::

    from pynenc import PynencBuilder
    app = PynencBuilder().app_id("my_app").cpp_mem().build()

The component classes below are what the builder selects; they subclass pynenc's
own ABCs and delegate every call to the native engine in ``pynenc_cpp._core``.
"""

from pynenc_cpp import _core
from pynenc_cpp.broker import CppMemBroker
from pynenc_cpp.client_data_store import CppMemClientDataStore
from pynenc_cpp.errors import (
    BackendError,
    BadConfig,
    EngineError,
    InvalidArgument,
    InvocationNotFound,
)
from pynenc_cpp.orchestrator import CppMemOrchestrator
from pynenc_cpp.state_backend import CppMemStateBackend
from pynenc_cpp.trigger import CppMemTrigger

__version__: str = _core.__version__

__all__ = [
    "BackendError",
    "BadConfig",
    "CppMemBroker",
    "CppMemClientDataStore",
    "CppMemOrchestrator",
    "CppMemStateBackend",
    "CppMemTrigger",
    "EngineError",
    "InvalidArgument",
    "InvocationNotFound",
    "__version__",
]
