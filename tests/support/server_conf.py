"""A stand-in for a session's ``conf`` on a server that refuses some settings (a locked-down Spark Connect
server, or a cluster that keeps an internal setting to itself)."""

from __future__ import annotations


class ServerConf:
    """``spark.conf`` of a session on ``master`` that refuses every key in ``refused`` (as Spark words it)."""

    def __init__(self, refused: set[str] | frozenset[str] = frozenset(), master: str | None = None):
        self.refused = set(refused)
        self.values: dict[str, str] = {} if master is None else {"spark.master": master}

    def set(self, key: str, value: str) -> None:
        if key in self.refused:
            raise RuntimeError(f"[CANNOT_MODIFY_CONFIG] Cannot modify the value of the Spark config: {key}")
        self.values[key] = value

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def unset(self, key: str) -> None:
        self.values.pop(key, None)
