"""trigger adapter (being written)."""


class CppMemTrigger:
    pass
