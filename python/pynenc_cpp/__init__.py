"""pynenc-cpp: a C++ engine for the pynenc task framework.

Use it through pynenc's builder::

    from pynenc import PynencBuilder
    app = PynencBuilder().app_id("my_app").cpp_sqlite(path="my_app.db").build()

The component classes below are what the builder selects; they subclass pynenc's
own ABCs and delegate every call to the native engine in ``pynenc_cpp._core``.
"""

from pynenc_cpp import _core

if getattr(_core, "__file__", None) is None:  # only the stubs' directory was found
    raise ImportError(
        "pynenc_cpp._core, the compiled engine, is missing: install the package "
        "(pip install pynenc-cpp, or scripts/setup.sh in a checkout) rather than "
        "importing the source tree"
    )
from pynenc_cpp.broker import CppBroker, CppMemBroker, CppRedisBroker, CppSqliteBroker
from pynenc_cpp.client_data_store import (
    CppClientDataStore,
    CppMemClientDataStore,
    CppRedisClientDataStore,
    CppSqliteClientDataStore,
)
from pynenc_cpp.errors import (
    BackendConnectionError,
    BackendError,
    BadConfig,
    Conflict,
    EngineError,
    InvalidArgument,
    InvocationNotFound,
    StaleGeneration,
    Timeout,
    Unavailable,
)
from pynenc_cpp.native import (
    CppMemNativeOrchestrator,
    CppNativeOrchestrator,
    CppRedisNativeOrchestrator,
    CppSqliteNativeOrchestrator,
)
from pynenc_cpp.orchestrator import (
    CppMemOrchestrator,
    CppOrchestrator,
    CppRedisOrchestrator,
    CppSqliteOrchestrator,
)
from pynenc_cpp.runner import ConfigCppRunner, CppRunner, TaskAbortedError, TaskTimeoutError
from pynenc_cpp.state_backend import (
    CppMemStateBackend,
    CppRedisStateBackend,
    CppSqliteStateBackend,
    CppStateBackend,
)
from pynenc_cpp.trigger import CppMemTrigger, CppRedisTrigger, CppSqliteTrigger, CppTrigger

__version__: str = _core.__version__

__all__ = [
    "BackendConnectionError",
    "BackendError",
    "BadConfig",
    "Conflict",
    "CppBroker",
    "CppClientDataStore",
    "CppMemBroker",
    "CppMemClientDataStore",
    "CppMemNativeOrchestrator",
    "CppMemOrchestrator",
    "CppMemStateBackend",
    "CppMemTrigger",
    "CppNativeOrchestrator",
    "CppOrchestrator",
    "CppRedisBroker",
    "CppRedisClientDataStore",
    "CppRedisNativeOrchestrator",
    "CppRedisOrchestrator",
    "CppRedisStateBackend",
    "CppRedisTrigger",
    "CppRunner",
    "ConfigCppRunner",
    "CppSqliteBroker",
    "CppSqliteClientDataStore",
    "CppSqliteNativeOrchestrator",
    "CppSqliteOrchestrator",
    "CppSqliteStateBackend",
    "CppSqliteTrigger",
    "CppStateBackend",
    "CppTrigger",
    "EngineError",
    "InvalidArgument",
    "InvocationNotFound",
    "StaleGeneration",
    "TaskAbortedError",
    "TaskTimeoutError",
    "Timeout",
    "Unavailable",
    "__version__",
]
