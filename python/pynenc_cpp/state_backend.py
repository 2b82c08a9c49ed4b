"""state_backend adapter (being written)."""


class CppMemStateBackend:
    pass
