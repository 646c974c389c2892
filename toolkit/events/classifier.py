"""Records -> canonical events: template dispatch and field extraction (:func:`classify`).

Everything here is native Spark (column expressions and higher-order functions):
no Python UDFs, no RDDs, nothing collected per record, so it runs unchanged on Spark Connect.

How :func:`classify` works, in one pass over the records:

1. The leading Kafka/NiFi prefix is parsed once with one anchored regex (``stream-thread [..] ``,
   ``stream-client [..] ``, ``state-updater [..] ``, ``task [..] ``, ``[Consumer clientId=..,
   groupId=..] ``, ``ConsumeKinesis[id=..] ``...). Real logs sometimes lack the space after the
   ``]`` (KAFKA-7672 log), so the space is optional. The rest of the message is the *body*.
2. A cheap gate (:func:`_worth_trying`: logger class, level, a few literals) sets aside records no
   template can match. For the others, the words of the message look up candidate templates in a
   constant map (word -> template numbers); each candidate is checked with ``contains(literal)``
   and its prefix kind before its regex, and the lowest matching number (priority order) wins
   (:func:`_tag_templates`, native higher-order functions over constant arrays).
3. Groups are extracted only for the chosen template: its pattern and group numbers are read from
   constant arrays by template number, so each field is a single ``regexp_extract`` (the named
   ``_with_*`` steps of :func:`_extract`). Values are cast with ``try_cast`` and combined with what
   the prefix says (thread, client id, process id, task, consumer group).

Lines that name several partitions (partition lists, checkpoint maps, restore progress) keep one
row per record: the parsed list is in ``partitions`` (array of struct ``topic, partition, offset,
end_offset, records``) and, only when the list has exactly one element, also in the scalar
``topic``/``partition``/``offset``/``end_offset``/``records`` columns. Task lists likewise go to
``task_ids`` (array of strings) and, when single, to ``task_id``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue import (
    FIELD_TYPES, ITEM_FIELDS, Template, literal_tokens, load_templates, logger_aliases, logger_wrappers,
)
from toolkit.redact import redact_text_col
from toolkit.regex import to_java_regex
from toolkit.sqltext import sql_str

#: Record columns carried into the events table.
RECORD_KEEP: tuple[str, ...] = (
    "source", "line_no", "host", "ts", "level", "thread", "logger", "message", "stack",
)

#: Typed event fields, in output order (see ``toolkit.catalogue.FIELD_TYPES`` for types).
EVENT_FIELDS: tuple[str, ...] = tuple(FIELD_TYPES)

#: All columns of :func:`classify`'s output, in order.
EVENT_COLUMNS: tuple[str, ...] = (
    *RECORD_KEEP, "product", "template_id", "event", "also_events", "prefix_kind",
    *EVENT_FIELDS, "partitions", "task_ids",
)

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

# One anchored regex for every leading prefix Kafka's LogContext or NiFi's component logger writes.
_PREFIX_PY = (
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
_PREFIX_GROUPS = re.compile(_PREFIX_PY).groupindex
_PREFIX_JAVA = to_java_regex(_PREFIX_PY)

# Kafka client ids end with a role suffix; strip it to get the owning thread / client.
_CLIENT_SUFFIX = r"-(?:restore-consumer|consumer|(?:\d+_\d+-)?producer)$"
_CLIENT_ID_OF_THREAD = (
    r"^(.+)-(?:StreamThread-\d+|StateUpdater-\d+|TaskExecutor-\d+|GlobalStreamThread|CleanupThread|CloseThread"
    r"|global|admin)$"
)
_STREAMS_THREAD = r"-(?:StreamThread|StateUpdater)-\d+$"
_TASK_ITEM = r"(?<![\w.-])(?:[\w.-]+?__)?\d+_\d+(?![\w])"
_EXCEPTION_CLASS = r"^\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*(?:Exception|Error|Throwable))(?::|\s|$)"

#: What a multi-line template reads: the body and, after it, the stack trace (an exception's multi-line
#: message often opens the stack trace: "Error encountered sending record ... due to:\n<cause>\nWritten ...").
_FULL_TEXT = "CASE WHEN stack IS NULL THEN _body ELSE concat(_body, '\\n', stack) END"


def _nullif_empty(col: Column) -> Column:
    # nullif keeps one evaluation of ``col`` (Spark binds it as a common expression)
    return F.nullif(col, F.lit(""))


def _prefix_part(name: str) -> Column:
    return _nullif_empty(F.regexp_extract(F.col("message"), _PREFIX_JAVA, _PREFIX_GROUPS[name]))


def _prefix_kind(prefix: Column) -> Column:
    """What the leading prefix is, from cheap string tests on the matched prefix text."""
    return (
        F.when(prefix == "", F.lit("none"))
        .when(prefix.rlike(r"(?:^|\] ?)(?:stream-task|standby-task|task) \["), F.lit("task"))
        .when(prefix.startswith("[Consumer "), F.lit("consumer"))
        .when(prefix.startswith("[Producer "), F.lit("producer"))
        .when(prefix.startswith("[AdminClient "), F.lit("admin"))
        .when(prefix.startswith("stream-client "), F.lit("stream-client"))
        .when(prefix.startswith("stream-thread "), F.lit("stream-thread"))
        .when(prefix.startswith("global-stream-thread "), F.lit("global-stream-thread"))
        .when(prefix.startswith("state-updater "), F.lit("state-updater"))
        .when(prefix.startswith("topology-test-driver "), F.lit("none"))
        .otherwise(F.lit("component"))
    )


def _with_prefix_parts(tagged: DataFrame) -> DataFrame:
    """Add the detailed prefix groups (client id, group id, thread, task...) as ``_p_*`` columns."""
    with_parts = tagged
    for name in _PREFIX_GROUPS:
        with_parts = with_parts.withColumn(f"_p_{name}", _prefix_part(name))
    return with_parts.withColumn("_p_task_kind_any", F.coalesce(F.col("_p_task_kind"), F.col("_p_old_task_kind")))


def _dispatch_keys(templates: Sequence[Template]) -> list[str]:
    """Per template, the word of its literal shared by the fewest templates (longest on ties)."""
    counts = Counter(w for t in templates for w in set(literal_tokens(t.literal)))
    return [min(literal_tokens(t.literal), key=lambda w: (counts[w], -len(w))) for t in templates]


def _tag_templates(records: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """Records with ``_prefix``, ``_body``, ``_prefix_kind`` and ``_tidx`` (first matching template or null).

    Candidate templates come from the message's words: a constant map word -> template numbers
    (one dispatch word per template, taken from its literal) gives the few templates worth
    trying. For those, ``contains(literal)`` and the prefix kind are checked before the regex, so
    a regex only runs on real hits. Everything is a native higher-order function over constant
    arrays; a CASE WHEN over hundreds of templates takes Spark's optimizer tens of seconds to
    plan and outgrows the 64 KB generated-method limit.
    """
    keys = _dispatch_keys(templates)
    by_key: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        by_key.setdefault(key, []).append(i)
    # Constants go in as folded JSON literals (see _sql_const).
    key_map = _sql_const(by_key, "map<string,array<int>>")
    literals = _sql_array([t.literal for t in templates])
    patterns = _sql_array([t.java_pattern for t in templates])
    prefixes = _sql_array(["," + ",".join(t.prefix) + "," if t.prefix else "" for t in templates])
    candidates = (
        "array_sort(array_distinct(flatten(transform(array_distinct(split(message, '[^A-Za-z0-9]+')), "
        f"w -> coalesce(try_element_at({key_map}, w), cast(array() as array<int>))))))"
    )
    multiline = _sql_const([t.multiline for t in templates], "array<boolean>")
    matches = (
        f"i -> contains(message, get({literals}, i)) "
        f"AND (get({prefixes}, i) = '' OR contains(get({prefixes}, i), concat(',', _prefix_kind, ','))) "
        f"AND regexp_like(CASE WHEN get({multiline}, i) THEN {_FULL_TEXT} ELSE _first END, get({patterns}, i))"
    )
    # templates are in priority order, so the lowest matching number wins
    tidx = F.expr(f"array_min(filter({candidates}, {matches}))")

    tagged = (
        records.where(F.col("message").isNotNull())
        .withColumn("_prefix", F.regexp_extract(F.col("message"), _PREFIX_JAVA, 0))
        .withColumn("_body", F.expr("substr(message, length(_prefix) + 1)"))
        # single-line templates read the first line only (see Template.multiline)
        .withColumn("_first", F.expr("CASE WHEN contains(_body, '\\n') THEN substring_index(_body, '\\n', 1) ELSE _body END"))
        .withColumn("_prefix_kind", _prefix_kind(F.col("_prefix")))
    )
    return tagged.withColumn("_tidx", tidx)


def _split_by_gate(records: DataFrame, templates: Sequence[Template]) -> tuple[DataFrame, DataFrame]:
    """(records worth trying against the templates, records no template can match).

    The gate runs first, on its own: the template dispatch uses higher-order functions Spark does not
    compile, and fed every line they would cost more than the whole parse.
    """
    gate = F.coalesce(_worth_trying(templates), F.lit(True))
    return records.where(gate), records.where(~gate)


#: Levels at which every record is tried against the templates, whatever its logger.
ALWAYS_TRY_LEVELS = ("WARN", "ERROR")


def _logger_class(logger: Column) -> Column:
    """``org.apache.kafka.streams.processor.internals.StreamThread$1`` / ``o.a.k.s.p.i.StreamThread`` -> ``StreamThread``."""
    return F.substring_index(F.substring_index(logger, ".", -1), "$", 1)


def _simple_class(logger: str) -> str:
    return logger.rsplit(".", 1)[-1].split("$", 1)[0]


#: Logger class endings always tried: consumer/config classes were split and renamed across client versions.
ALWAYS_TRY_CLASS_SUFFIXES = ("Config", "Consumer", "Coordinator")
#: Kafka Streams' package however a layout abbreviates it (``org.apache.kafka.streams.``, ``o.a.k.s.``,
#: Quarkus' ``org.apa.kaf.str.``, logback's ``o.a.kafka.streams.``): always tried, its internals change
#: class names across versions. Other packages are judged by their class name, which abbreviation keeps.
_STREAMS_PACKAGE = r"^o[a-z]*\.a[a-z]*\.k[a-z]*\.s[a-z]*\."
#: A logger printed whole: a dotted name, or a capitalised class name alone (``%c{1}``, ``%logger{0}``).
_CLEAN_LOGGER = r"^(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*$"


def _worth_trying(templates: Sequence[Template]) -> Column:
    """Cheap test whether a record can match any template at all (most lines of a real log cannot).

    A record is skipped only when the gate can tell cheaply that no template is printed under its
    logger: the logger is printed whole (a dotted name or a capitalised class name), outside
    Kafka Streams' package however abbreviated, and its class is neither a template's class nor a name
    that class is printed under (``loggers.toml``); and the record is below WARN and carries none
    of the literals of templates not tied to a logger (exception texts are logged by whoever caught
    them). A missing logger, or one cut by a width pattern (``reamThread``, ``...Thread``), goes
    through to the literal prefilter. The test is a few substring checks and a hash-set lookup.
    """
    unbound = [t for t in templates if not t.logger or t.logger == "-" or t.logger.endswith(("Exception", "Error"))]
    classes = {_simple_class(t.logger) for t in templates if t not in unbound}
    aliases = logger_aliases()
    classes |= {name for base in classes for name in aliases.get(base, ())}
    logger, cls = F.col("logger"), _logger_class(F.col("logger"))
    gate = (logger.isNull() | (logger == "") | F.col("level").isNull() | F.col("level").isin(*ALWAYS_TRY_LEVELS)
            | cls.isin(*sorted(classes)))
    gate = gate | (logger.startswith("o") & logger.rlike(_STREAMS_PACKAGE))
    for suffix in ALWAYS_TRY_CLASS_SUFFIXES:
        gate = gate | cls.endswith(suffix)
    gate = gate | ~logger.rlike(_CLEAN_LOGGER) | cls.isin(*logger_wrappers())
    literals = sorted({t.literal for t in unbound}, key=lambda lit: (len(lit), lit))
    # A literal that holds a shorter one adds nothing to the OR, only one more pass over every message.
    for i, literal in enumerate(literals):
        if not any(shorter in literal for shorter in literals[:i]):
            gate = gate | F.col("message").contains(literal)
    return gate


def _sql_const(value: object, sql_type: str) -> str:
    """A constant array/map as SQL: ``from_json('<json>', '<type>')``.

    Spark folds it into a literal once; written as ``array('a', 'b', ...)`` with hundreds of
    elements, the analyzer alone takes seconds per DataFrame step.
    """
    return f"from_json({sql_str(json.dumps(value))}, {sql_str(sql_type)})"


def _sql_array(values: Sequence[object]) -> str:
    sql_type = "array<string>" if values and isinstance(values[0], str) else "array<int>"
    return _sql_const(list(values), sql_type)


def _extract(tagged: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """Typed fields for records whose ``_tidx`` is set.

    The chosen template's pattern and group numbers are looked up in constant arrays by
    ``_tidx``, so each field is one ``regexp_extract`` with a per-row pattern; sorting by template
    within each partition lets Spark reuse the compiled pattern across consecutive rows. The
    expressions are SQL text applied in a handful of ``selectExpr`` calls (one analysis each); each
    step below reads columns the previous ones added.
    """
    looked_up = _with_template_lookups(tagged, templates)
    grouped = _with_group_texts(looked_up)
    typed = _with_typed_fields(grouped)
    identified = _with_partitions_and_ids(typed)
    scalar = _with_process_and_single_partition(identified)
    with_app = _with_app_id(scalar)
    out = _with_store_and_scalars(with_app)
    return out.select(*[redact_text_col(F.col("message")).alias("message") if c == "message" else c for c in EVENT_COLUMNS])


#: Raw group texts extracted per template (``_g_<name>``): the typed fields plus the two lists.
_GROUP_NAMES: tuple[str, ...] = (*FIELD_TYPES, "partitions", "tasks")


def _with_template_lookups(tagged: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """The chosen template's facts per row: product, id, events, Java pattern, the text it reads,
    its item regex and group numbers (``_gi_*``, ``_ii_*``), plus the prefix groups (``_p_*``)."""
    groups = [t.groups for t in templates]
    items = [t.item_groups for t in templates]
    prefix_cols = [
        f"nullif(regexp_extract(message, {sql_str(_PREFIX_JAVA)}, {idx}), '') AS _p_{name}"
        for name, idx in _PREFIX_GROUPS.items()
    ]
    return tagged.sortWithinPartitions("_tidx").selectExpr(
        "*",
        *prefix_cols,
        f"get({_sql_array([t.product for t in templates])}, _tidx) AS product",
        f"get({_sql_array([t.id for t in templates])}, _tidx) AS template_id",
        f"get({_sql_array([t.event for t in templates])}, _tidx) AS event",
        f"get({_sql_const([list(t.also) for t in templates], 'array<array<string>>')}, _tidx) AS also_events",
        f"get({_sql_array([t.java_pattern for t in templates])}, _tidx) AS _pattern",
        f"CASE WHEN get({_sql_const([t.multiline for t in templates], 'array<boolean>')}, _tidx) THEN {_FULL_TEXT}"
        " ELSE _first END AS _text",
        f"get({_sql_array([t.java_item for t in templates])}, _tidx) AS _item",
        *[f"get({_sql_array([g.get(n, 0) for g in groups])}, _tidx) AS _gi_{n}" for n in _GROUP_NAMES],
        *[f"get({_sql_array([g.get(f, 0) for g in items])}, _tidx) AS _ii_{f}" for f in ITEM_FIELDS],
    )


def _with_group_texts(looked_up: DataFrame) -> DataFrame:
    """The text of each group the template names (``_g_*``, null when absent or empty)."""
    return looked_up.selectExpr(
        "*",
        "coalesce(_p_task_kind, _p_old_task_kind) AS _p_task_kind_any",
        *[f"nullif(CASE WHEN _gi_{n} > 0 THEN regexp_extract(_text, _pattern, _gi_{n}) END, '') AS _g_{n}"
          for n in _GROUP_NAMES],
    )


def _typed(name: str) -> str:
    """SQL for the group text of field ``name`` cast to its catalogue type."""
    kind = FIELD_TYPES[name]
    return f"_g_{name}" if kind == "string" else f"try_cast(_g_{name} AS {kind})"


def _with_typed_fields(grouped: DataFrame) -> DataFrame:
    """Typed fields read directly off the groups, the partition list items (``_i_*``), task ids, and what
    the prefix says about thread, client, consumer group and NiFi component."""
    item_arrays = [
        f"CASE WHEN _g_partitions IS NOT NULL AND _ii_{f} > 0 THEN regexp_extract_all(_g_partitions, _item, _ii_{f}) END AS _i_{f}"
        for f in ITEM_FIELDS
    ]
    client_thread = f"regexp_replace(_p_client_ref, {sql_str(_CLIENT_SUFFIX)}, '')"
    return grouped.selectExpr(
        "*",
        *item_arrays,
        f"CASE WHEN _g_tasks IS NOT NULL THEN regexp_extract_all(_g_tasks, {sql_str(_TASK_ITEM)}, 0) END AS task_ids",
        # thread from the prefix, never from the truncated %t column; the assignor prefix is <thread>-consumer
        "coalesce(_g_stream_thread,"
        " CASE WHEN _p_thread_kind IN ('stream-thread', 'state-updater', 'global-stream-thread')"
        "      THEN regexp_replace(_p_thread_ref, '-consumer$', '') END,"
        f" CASE WHEN {client_thread} RLIKE {sql_str(_STREAMS_THREAD)} THEN {client_thread} END) AS stream_thread",
        f"{client_thread} AS _client_thread",
        "CASE WHEN _p_group_id NOT IN ('', 'null') THEN _p_group_id END AS _group_id",
        "coalesce(_g_component_type, _p_component_type) AS component_type",
        "coalesce(_g_component_id, _p_component_id) AS component_id",
        f"coalesce(_g_error_class, nullif(regexp_extract(stack, {sql_str(_EXCEPTION_CLASS)}, 1), '')) AS error_class",
        *[f"{_typed(n)} AS {n}" for n in FIELD_TYPES if n not in _DERIVED],
    )


def _with_partitions_and_ids(typed: DataFrame) -> DataFrame:
    """The ``partitions`` struct array, and ``client_id``, ``task_id``, ``task_role`` from the template's
    groups, else from the prefix, the stream thread or the single task of the list."""
    partitions = (
        "CASE WHEN _i_topic IS NOT NULL THEN transform(_i_topic, (t, i) -> named_struct("
        "'topic', t, 'partition', try_cast(get(_i_partition, i) AS int), 'offset', try_cast(get(_i_offset, i) AS bigint),"
        " 'end_offset', try_cast(get(_i_end_offset, i) AS bigint), 'records', try_cast(get(_i_records, i) AS bigint))) END"
    )
    return typed.selectExpr(
        "*",
        f"{partitions} AS partitions",
        "coalesce(_g_client_id,"
        " CASE WHEN _p_thread_kind = 'stream-client' THEN _p_thread_ref END,"
        f" nullif(regexp_extract(stream_thread, {sql_str(_CLIENT_ID_OF_THREAD)}, 1), ''),"
        f" nullif(regexp_extract(_client_thread, {sql_str(_CLIENT_ID_OF_THREAD)}, 1), '')) AS client_id",
        "coalesce(_g_task_id, _p_task_ref, _p_old_task_ref, CASE WHEN size(task_ids) = 1 THEN task_ids[0] END) AS task_id",
        "CASE WHEN lower(coalesce(_g_task_role, _p_task_kind_any)) IN ('standby', 'standby-task') THEN 'standby'"
        " WHEN lower(coalesce(_g_task_role, _p_task_kind_any)) IN ('active', 'stream', 'stream-task', 'task') THEN 'active'"
        " END AS task_role",
    )


def _with_process_and_single_partition(identified: DataFrame) -> DataFrame:
    """``process_id`` (the template's, else the UUID that ends the client id) and the scalar partition
    fields ``_s_*``: the template's own group, else the single list element."""
    return identified.selectExpr(
        "*",
        f"coalesce(_g_process_id, nullif(regexp_extract(client_id, '({_UUID})$', 1), '')) AS process_id",
        *[
            f"coalesce({_typed(f)}, CASE WHEN size(partitions) = 1 THEN partitions[0].{f} END) AS _s_{f}"
            for f in ITEM_FIELDS
        ],
    )


def _with_app_id(scalar: DataFrame) -> DataFrame:
    """``app_id``: the template's, else the consumer group, the client id before its process UUID, or the
    changelog topic's name before ``-<store>-changelog``."""
    changelog_app = (
        "CASE WHEN _g_store IS NOT NULL AND endswith(_s_topic, concat('-', _g_store, '-changelog'))"
        " THEN substr(_s_topic, 1, length(_s_topic) - length(_g_store) - 11) END"
    )
    return scalar.selectExpr(
        "*",
        f"coalesce(_g_app_id, _group_id, nullif(regexp_extract(client_id, '^(.+)-{_UUID}$', 1), ''), nullif({changelog_app}, '')) AS app_id",
    )


def _with_store_and_scalars(with_app: DataFrame) -> DataFrame:
    """``store`` (the template's, else read off ``<app_id>-<store>-changelog``), ``prefix_kind`` and the
    scalar partition fields under their own names."""
    store_from_topic = (
        "CASE WHEN startswith(_s_topic, concat(app_id, '-')) AND endswith(_s_topic, '-changelog')"
        " THEN substr(_s_topic, length(app_id) + 2, length(_s_topic) - length(app_id) - 11) END"
    )
    return with_app.selectExpr(
        "*",
        f"coalesce(_g_store, nullif({store_from_topic}, '')) AS store",
        "_prefix_kind AS prefix_kind",
        *[f"_s_{f} AS {f}" for f in ITEM_FIELDS],
    )


_DERIVED = frozenset(
    {"stream_thread", "client_id", "process_id", "task_id", "task_role", "app_id", "store",
     "component_type", "component_id", "error_class", *ITEM_FIELDS}
)


def classify(records: DataFrame, templates: Sequence[Template] | None = None) -> DataFrame:
    """Turn log records into canonical events (one row per classified record).

    ``records`` follows ``toolkit.schemas.RECORD_SCHEMA`` (extra columns are ignored).
    ``templates`` defaults to the packaged catalogue. Records no template matches are dropped here;
    see :func:`unknown_shapes` for them. Output columns: :data:`EVENT_COLUMNS`; ``message`` is
    redacted (:mod:`toolkit.redact`), ``ts`` stays null when the record had none.
    """
    templates = list(load_templates() if templates is None else templates)
    if not templates:
        raise ValueError("classify needs at least one template")
    candidates, _ = _split_by_gate(records, templates)
    tagged = _tag_templates(candidates, templates).where(F.col("_tidx").isNotNull())
    return _extract(tagged, templates)
