"""The leading Kafka/NiFi prefix of a message, which templates never repeat (their ``pattern`` reads the body).

One anchored regex for every leading prefix Kafka's LogContext or NiFi's component logger writes. The
classifier (:mod:`toolkit.events.classifier`) applies it in Spark; :func:`split_prefix` is its Python mirror,
with which a catalogue file's samples are checked without Spark (``stream-incident catalogue --check``).
"""

from __future__ import annotations

import re

PREFIX_PY = (
    r"^(?:"
    r"\[(?P<client_kind>Consumer|Producer|AdminClient) (?:instanceId=[^,\]]*, )?clientId=(?P<client_ref>[^,\]]*)"
    r"(?:, groupId=(?P<group_id>[^,\]]*))?(?:, transactionalId=[^,\]]*)?\] ?"
    r"|(?P<thread_kind>stream-client|stream-thread|global-stream-thread|state-updater) \[(?P<thread_ref>[^\]]*)\] ?"
    r"(?:(?P<task_kind>stream-task|standby-task|task) \[(?P<task_ref>[^\]]*)\] ?)?"
    r"|(?P<old_task_kind>stream-task|standby-task|task) \[(?P<old_task_ref>[^\]]*)\] ?"
    # NiFi components; a flow template is no component (its "added to" line is no processor's)
    r"|(?!Template\[)(?P<component_type>\w+)\[id=(?P<component_id>[0-9a-fA-F-]{36})\] ?"
    r"|topology-test-driver "
    r")"
)

_PREFIX = re.compile(PREFIX_PY)
_TASK_PREFIX = re.compile(r"(?:^|\] ?)(?:stream-task|standby-task|task) \[")
_STARTS = (("[Consumer ", "consumer"), ("[Producer ", "producer"), ("[AdminClient ", "admin"),
           ("stream-client ", "stream-client"), ("stream-thread ", "stream-thread"),
           ("global-stream-thread ", "global-stream-thread"), ("state-updater ", "state-updater"),
           ("topology-test-driver ", "none"))


def prefix_kind(prefix: str) -> str:
    """What a matched prefix is (a value of :data:`toolkit.catalogue.PREFIX_KINDS`), as the classifier tells it."""
    if prefix == "":
        return "none"
    if _TASK_PREFIX.search(prefix):
        return "task"
    return next((kind for start, kind in _STARTS if prefix.startswith(start)), "component")


def split_prefix(message: str) -> tuple[str, str]:
    """``(prefix kind, body)`` of a message: the body is the message without its leading prefix."""
    m = _PREFIX.match(message)
    prefix = m.group(0) if m else ""
    return prefix_kind(prefix), message[len(prefix):]


__all__ = ["PREFIX_PY", "prefix_kind", "split_prefix"]
