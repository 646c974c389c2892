"""Redaction of secrets in log text and config values.

Two flavours of the same rules: Spark column expressions (native ``regexp_replace``, for
DataFrames) and plain-Python functions (for strings already on the driver, e.g. report text).
Kafka itself prints ``[hidden]`` for password-typed settings, but applications log their own
properties, JAAS lines and URLs with credentials, so the toolkit redacts again.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F

REDACTED = "[redacted]"

#: Config keys whose values are secrets (case-insensitive): *password*, *secret*, *token*,
#: *credential*, sasl.jaas.config / *jaas*, basic.auth.user.info, *.key / key, *apikey* /
#: api.key, access.key, private.key, session.token.
SECRET_KEY_REGEX = (
    r"(?i)(password|passwd|secret|token|credential|jaas|user\.info|api[._-]?key|access[._-]?key"
    r"|private[._-]?key|(^|[._-])key$)"
)

# Values that carry no secret and are worth keeping (an unset password is a finding in itself).
_NOT_SECRET_VALUES = ("", "null", "[hidden]")

# (Java regex, Java replacement). Python versions are derived below; $1 -> \g<1>.
_TEXT_RULES: tuple[tuple[str, str], ...] = (
    # `key = value` lines of config dumps and properties whose key looks secret
    # (the key is checked by a look-ahead: a search for the word inside the greedy key would rescan the
    # rest of the key at every occurrence, quadratic in a long one)
    (
        r"(?im)^(\s*(?=[\w.-]*?(?:password|passwd|secret|token|credential|jaas|user\.info|api[._-]?key"
        r"|access[._-]?key|private[._-]?key))[\w.-]*\s*[=:]\s*)\S.*$",
        "$1" + REDACTED,
    ),
    (r"(?m)^(\s*(?:[\w-]+\.)*key\s*=\s*)\S.*$", "$1" + REDACTED),
    # password="x" / secret=x / token: x inside free text (JAAS lines, connection strings)
    (
        r"(?i)\b(password|passwd|secret|token|apikey|api_key|secretAccessKey|aws_secret_access_key)"
        r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s;,\"']+)",
        "$1$2" + REDACTED,
    ),
    # credentials in URLs: scheme://user:pass@host. A match may only begin where a run of scheme
    # characters begins (the run's leading digits, '+', '.' or '-' are kept in $1): started inside
    # the run, the search would rescan it from every position, quadratic in a long token (base64).
    (r"(?<![A-Za-z0-9+.-])([0-9+.-]*[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+):[^@\s/]+@", "$1:" + REDACTED + "@"),
    # AWS access key ids
    (r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", REDACTED),
)

_PY_TEXT_RULES = tuple(
    (re.compile(pattern), re.sub(r"\$(\d)", r"\\g<\1>", replacement)) for pattern, replacement in _TEXT_RULES
)
_PY_SECRET_KEY = re.compile(SECRET_KEY_REGEX)


def redact_text(text: str | None) -> str | None:
    """Redact secrets in free text (a log message, a config dump, a URL)."""
    if text is None:
        return None
    for pattern, replacement in _PY_TEXT_RULES:
        text = pattern.sub(replacement, text)
    return text


def is_secret_key(key: str) -> bool:
    """True when a config key names a secret."""
    return bool(_PY_SECRET_KEY.search(key))


def redact_config_value(key: str, value: str | None) -> str | None:
    """The value to show for ``key``: redacted when the key is secret, else text-redacted."""
    if value is None:
        return None
    if is_secret_key(key) and value.strip() not in _NOT_SECRET_VALUES:
        return REDACTED
    return redact_text(value)


def redact_text_col(text: Column) -> Column:
    """Spark expression: :func:`redact_text` on a string column."""
    for pattern, replacement in _TEXT_RULES:
        text = F.regexp_replace(text, pattern, replacement)
    return text


#: Lower-case words one of which every secret the rules above can find contains; a line with none
#: of them skips the regular expressions (most log lines), which keeps redaction cheap.
_HINTS = ("pass", "secret", "token", "cred", "jaas", "key", "user.info", "://", "akia", "asia")


#: What every rule's match holds whatever its words: a ``=`` or ``:`` after a key (the config, free-text and
#: URL rules) or an AWS key id's head. A text with none of them skips the hint words (one short scan each,
#: usually ended at the first ``:`` or ``=``, instead of ten over the whole text).
_MARKS = ("=", ":", "AKIA", "ASIA")


def redact_text_guarded_col(text: Column) -> Column:
    """:func:`redact_text_col`, run only on texts that hold a mark every rule needs and a hint word (cheap
    ``contains`` tests first)."""
    marked = None
    for mark in _MARKS:
        cond = text.contains(mark)
        marked = cond if marked is None else marked | cond
    lowered = F.lower(text)
    hinted = None
    for hint in _HINTS:
        cond = lowered.contains(hint)
        hinted = cond if hinted is None else hinted | cond
    return F.when(marked & hinted, redact_text_col(text)).otherwise(text)


def redact_config_value_col(key: Column, value: Column) -> Column:
    """Spark expression: :func:`redact_config_value` on key/value columns."""
    keep = F.trim(value).isin(*_NOT_SECRET_VALUES)
    return (
        F.when(value.isNull(), F.lit(None).cast("string"))
        .when(key.rlike(SECRET_KEY_REGEX) & ~keep, F.lit(REDACTED))
        .otherwise(redact_text_col(value))
    )


__all__ = [
    "REDACTED",
    "SECRET_KEY_REGEX",
    "is_secret_key",
    "redact_config_value",
    "redact_config_value_col",
    "redact_text",
    "redact_text_col",
    "redact_text_guarded_col",
]
