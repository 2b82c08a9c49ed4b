"""orchestrator adapter (being written)."""


class CppMemOrchestrator:
    pass
