"""The layout catalogue (``catalogue/layouts.toml``) as Python objects: layouts, wrappers, detection settings.

A layout's pattern describes a record's whole first line. The Spark parse reads it in two parts
(:attr:`Layout.head`): the *head* (stamp, level, thread, logger: everything before the message), matched
once per line with an anchored regular expression that stops where the message begins, and the *rest*,
taken as it is (``(?P<message>.*)$``) or with Kafka's `` (logger)`` trailer cut off its end. A pattern whose
message is followed by anything else is matched whole.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources

FIELD_SEP = "\u0001"  # never printed by a logger; used to split one regex rewrite into fields
FIELDS = ("ts", "level", "thread", "logger", "message")
ANSI_ESCAPE = r"\x1b\[[0-9;?]*[A-Za-z]"
# Lines that belong to a stack trace (logback/log4j throwable rendering).
STACK_LINE = (
    r"^(?:\s+at |\s*\.\.\. \d+ (?:more|common frames omitted)|\s*Caused by: |\s*Suppressed: |"
    r"\s*[A-Za-z_$][\w$]*(?:\.[\w$]+)+(?:Exception|Error|Throwable)(?:: |:?$))"
)
# RFC 3339 stamps of docker/kubectl/journald wrappers: 0-9 fraction digits, Z or an offset.
WRAPPER_TS_FORMATS = (
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][.SSSSSS][.SSS]XXX",
    "yyyy-MM-dd'T'HH:mm:ss[.SSSSSSSSS][.SSSSSS][.SSS]XX",
    "yyyy-MM-dd'T'HH:mm:ss[,SSSSSS][,SSS]XX",
)
LOGGER_TRAILER = r"^(.*?) ?\(([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)$"
#: A single-line message that ends with " (logger)" / " (logger:line)": Kafka's layout, loosely fitted.
MESSAGE_TRAILER = r"^(.*) \(([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)$"
#: What follows the last " (" of a line that ends with a logger trailer: the logger, a line number, ")".
TRAILER_NAME = r"^([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)$"
DOTTED_NAME = r"^[A-Za-z_$][\w$]*(?:\.[\w$]+)+$"
#: java.util.logging's SimpleFormatter: the second line of a record starts with the level.
JUL_LEVEL_LINE = r"^(SEVERE|WARNING|INFO|CONFIG|FINEST|FINER|FINE): ?"
#: Levels as layouts print them; other spellings (lower case, padded, java.util.logging's) are normalised.
CANONICAL_LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
#: First words of the JVM's default uncaught-exception output (ThreadGroup.uncaughtException).
UNCAUGHT_HEAD = 'Exception in thread "'
#: A record start that prints no timestamp but opens with its level (%p %m (%c)%n, a quoted fragment).
LEVEL_HEAD = r"^(?:TRACE|DEBUG|INFO|WARN|ERROR|FATAL) +(?=\S)"
#: Wiki markup that pasted logs carry at a line's start or end (JIRA {quote}, {code}, {noformat}).
PASTE_TAGS = ("quote", "code", "noformat")
PASTE_MARKUP = rf"^(?:\{{(?:{'|'.join(PASTE_TAGS)})(?::[^}}]*)?\}})+|(?:\{{(?:{'|'.join(PASTE_TAGS)})\}})+$|^`(?=[^`])|(?<=[^`]) ?`$"
#: The generic layout's stamp carries a date (everything but a time of day or a syslog stamp).
DATED_STAMP = r"^\d{4}[-/]\d{2}[-/]\d{2}|, \d{4} |^\d{2} [A-Z][a-z]{2} \d{4} "

#: How a pattern may continue after its message group, and how the Spark parse reads that part.
#: ``rest``: the message runs to the end of the line; ``trailer``: it ends with Kafka's `` (logger)``.
REST_TAIL = "(?P<message>.*)$"
TRAILER_TAIL = r"(?P<message>.*?)(?: \((?P<logger>[A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\))?$"
_MESSAGE_GROUP = "(?P<message>"


def generic_fields(groups: dict[str, str | None]) -> dict[str, str]:
    """Fields of a generic-layout match (Python mirror of the Spark columns in :mod:`toolkit.layouts.fields`)."""
    def get(name: str) -> str:
        return (groups.get(name) or "").strip()

    thread, logger, message = get("thread"), get("logger"), groups.get("message") or ""
    if not logger and re.match(DOTTED_NAME, thread):
        logger, thread = thread, ""
    thread = get("thread_a") or thread or get("thread_c")
    if not logger and (m := re.match(MESSAGE_TRAILER, message)):
        message, logger = m.group(1), m.group(2)
    return {"ts": get("ts"), "level": get("level"), "thread": thread, "logger": logger, "message": message}


@dataclass(frozen=True)
class HeadSplit:
    """A layout pattern cut where its message begins (see the module's docstring)."""

    #: the anchored regex of everything before the message (Python syntax, named groups)
    head: str
    #: ``rest`` or ``trailer`` (see :data:`REST_TAIL`, :data:`TRAILER_TAIL`)
    tail: str


def split_head(pattern: str | None) -> HeadSplit | None:
    """The head and tail of ``pattern``, or None when its message is followed by anything but the line's end
    or a logger trailer (such a pattern is matched whole)."""
    if not pattern or not pattern.startswith("^"):
        return None
    at = pattern.find(_MESSAGE_GROUP)
    if at <= 1:
        return None
    rest = pattern[at:]
    tail = "rest" if rest == REST_TAIL else "trailer" if rest == TRAILER_TAIL else None
    if tail is None:
        return None
    head = pattern[:at]
    try:
        compiled = re.compile(head)
    except re.error:
        return None
    # A head that can match nothing would make every line a record start.
    if compiled.match("") is not None:
        return None
    return HeadSplit(head, tail)


@dataclass(frozen=True)
class Layout:
    """One log layout from ``catalogue/layouts.toml``."""

    id: str
    description: str
    pattern: str | None = None
    ts_formats: tuple[str, ...] = ()
    logger_trailer: bool = False
    json: bool = False
    json_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    samples: tuple[dict, ...] = ()
    #: the per-line fallback for record starts no named layout fits (see :func:`generic_fields`)
    generic: bool = False
    #: generic layout: the pattern for a line that prints no timestamp but opens with its level
    bare_pattern: str | None = None

    @property
    def regex(self) -> re.Pattern[str] | None:
        return _compile(self.pattern) if self.pattern else None

    @cached_property
    def head(self) -> HeadSplit | None:
        """The pattern cut where the message begins, for the Spark parse (None: matched whole)."""
        return split_head(self.pattern)

    @property
    def message_only(self) -> bool:
        """``%m%n``: every line is a message (the layout chosen when lines carry only Kafka/NiFi prefixes)."""
        return self.id == "message-only"

    def fields(self, line: str) -> dict[str, str] | None:
        """The fields of a record's first line (ts, level, thread, logger, message), or None.

        The same split the Spark parser makes (leading whitespace ignored); for tests and tools.
        """
        if self.regex is None:
            return None
        head = line.lstrip()
        m = self.regex.match(head) or (_compile(self.bare_pattern).match(head) if self.bare_pattern else None)
        if not m:
            return None
        if self.generic:
            return generic_fields(m.groupdict())
        return {k: (m.groupdict().get(k) or "") for k in FIELDS}

    @property
    def has_date(self) -> bool:
        return any("yyyy" in f for f in self.ts_formats)

    @cached_property
    def always_dated(self) -> bool:
        """Every stamp this layout's pattern accepts opens with a date (``yyyy-MM-dd``), as every format it is read
        with does: its records never borrow a date, which a line's time then need not be tested for."""
        if self.json or not self.pattern or not self.ts_formats or not all("yyyy" in f for f in self.ts_formats):
            return False
        at = self.pattern.find("(?P<ts>")
        return at >= 0 and self.pattern.startswith((r"\d{4}-\d{2}-\d{2}", r"\d{4}[-/]\d{2}[-/]\d{2}"), at + 7)


@dataclass(frozen=True)
class Wrapper:
    """A prefix that a log shipper or container runtime puts in front of every line."""

    id: str
    description: str
    pattern: str
    sample: str = ""
    #: a JSON wrapper (docker's json-file driver): the line is this key of the object, the stamp json_ts_key
    json_key: str | None = None
    json_ts_key: str | None = None

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)

    def strip(self, line: str) -> str | None:
        """The line without this wrapper, or None when the line does not carry it."""
        if self.json_key is None:
            m = self.regex.match(line)
            return line[m.end():] if m else None
        import json

        try:
            obj = json.loads(line)
        except ValueError:
            return None
        inner = obj.get(self.json_key) if isinstance(obj, dict) else None
        return inner.rstrip("\r\n") if isinstance(inner, str) else None


@dataclass
class Catalogue:
    layouts: list[Layout]
    wrappers: dict[str, Wrapper]
    chains: list[tuple[str, ...]]
    sample_lines: int
    min_start_share: float
    min_wrapper_share: float

    def layout(self, layout_id: str) -> Layout:
        for layout in self.layouts:
            if layout.id == layout_id:
                return layout
        raise KeyError(layout_id)

    @property
    def generic(self) -> Layout:
        """The fallback layout tried on every timestamped line its file's layout does not fit."""
        return next(l for l in self.layouts if l.generic)

    @property
    def named(self) -> list[Layout]:
        """Layouts chosen per file by detection (every layout but the generic fallback)."""
        return [l for l in self.layouts if not l.generic]


@lru_cache(maxsize=None)
def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def layout_from_entry(raw: dict) -> Layout:
    """One ``[[layout]]`` table of a catalogue file as a :class:`Layout`."""
    keys = {k.removesuffix("_keys"): tuple(v) for k, v in raw.items() if k.endswith("_keys")}
    pattern, bare = raw.get("pattern"), None
    if "stamp" in raw:  # generic: [stamp] then tail; a level-first line without a stamp reads the tail alone
        pattern = rf"^\[?(?P<ts>{raw['stamp']})\]?{raw['tail']}"
        bare = rf"^(?P<ts>)(?={LEVEL_HEAD[1:]}){raw['tail']}"
    return Layout(
        id=raw["id"],
        description=raw.get("description", ""),
        pattern=pattern,
        bare_pattern=bare,
        ts_formats=tuple(raw.get("ts_formats", ())),
        logger_trailer=bool(raw.get("logger_trailer", False)),
        json=bool(raw.get("json", False)),
        json_keys=keys,
        samples=tuple(raw.get("samples", ())),
        generic=bool(raw.get("generic", False)),
    )


@lru_cache(maxsize=1)
def _shipped_layouts() -> Catalogue:
    """The layout catalogue shipped with the package, read once per process."""
    text = resources.files("toolkit.catalogue").joinpath("layouts.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    layouts = [layout_from_entry(raw) for raw in data["layout"]]
    wrappers = {w["id"]: Wrapper(w["id"], w.get("description", ""), w["pattern"], w.get("sample", ""),
                                 w.get("json_key"), w.get("json_ts_key"))
                for w in data.get("wrapper", [])}
    det = data.get("detection", {})
    return Catalogue(
        layouts=layouts,
        wrappers=wrappers,
        chains=[()] + [tuple(c) for c in det.get("chains", [])],
        sample_lines=int(det.get("sample_lines", 400)),
        min_start_share=float(det.get("min_start_share", 0.05)),
        min_wrapper_share=float(det.get("min_wrapper_share", 0.9)),
    )


#: The catalogue with the user catalogue's layouts in use (:func:`set_user_layouts`); None: the shipped one alone.
_with_user: Catalogue | None = None


def set_user_layouts(layouts: tuple[Layout, ...]) -> None:
    """Add a site's own layouts (already validated) to every :func:`load_layouts` answer from now on, after the
    shipped named layouts (on ties, detection prefers the shipped ones) and before the generic fallback. An empty
    tuple returns to the shipped catalogue alone."""
    global _with_user
    if not layouts:
        _with_user = None
        return
    shipped = _shipped_layouts()
    named = [layout for layout in shipped.layouts if not layout.generic]
    generic = [layout for layout in shipped.layouts if layout.generic]
    _with_user = Catalogue(layouts=[*named, *layouts, *generic], wrappers=shipped.wrappers, chains=shipped.chains,
                           sample_lines=shipped.sample_lines, min_start_share=shipped.min_start_share,
                           min_wrapper_share=shipped.min_wrapper_share)


def load_layouts() -> Catalogue:
    """The layout catalogue: the one shipped with the package, plus the user catalogue's layouts in use."""
    return _with_user if _with_user is not None else _shipped_layouts()


def carries_line_hosts(wrappers: tuple[str, ...], cat: Catalogue | None = None) -> bool:
    """Whether a wrapper chain names each line's host (kubectl --prefix, compose, stern, journald)."""
    cat = cat or load_layouts()
    return any("wrap_host" in cat.wrappers[w].regex.groupindex for w in wrappers if w in cat.wrappers)
