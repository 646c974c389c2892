"""Records -> canonical events, using the template catalogue (``toolkit/catalogue/*.toml``).

Everything here is native Spark (column expressions, window functions, higher-order functions):
no Python UDFs, no RDDs, nothing collected per record, so it runs unchanged on Spark Connect.

How :func:`classify` works, in one pass over the records:

1. The leading Kafka/NiFi prefix is parsed once with one anchored regex (``stream-thread [..] ``,
   ``stream-client [..] ``, ``state-updater [..] ``, ``task [..] ``, ``[Consumer clientId=..,
   groupId=..] ``, ``ConsumeKinesis[id=..] ``...). Real logs sometimes lack the space after the
   ``]`` (KAFKA-7672 log), so the space is optional. The rest of the message is the *body*.
2. A ``CASE WHEN contains(message, literal_i) AND [prefix ok] AND body RLIKE pattern_i THEN i``
   chain picks the first matching template (priority order); the cheap ``contains`` prefilter
   short-circuits, so a regex only runs for messages that carry its literal.
3. Groups are extracted only for the chosen template: a broadcast join with the small templates
   table supplies its pattern and group numbers, so each field is a single ``regexp_extract``.
   Values are cast with ``try_cast`` and combined with what the prefix says (thread, client id,
   process id, task, consumer group).

Lines that name several partitions (partition lists, checkpoint maps, restore progress) keep one
row per record: the parsed list is in ``partitions`` (array of struct ``topic, partition, offset,
end_offset, records``) and, only when the list has exactly one element, also in the scalar
``topic``/``partition``/``offset``/``end_offset``/``records`` columns. Task lists likewise go to
``task_ids`` (array of strings) and, when single, to ``task_id``.
"""

from __future__ import annotations

import re
import json
from collections import Counter
from typing import Sequence

import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from toolkit.catalogue import (
    FIELD_TYPES, ITEM_FIELDS, Template, literal_tokens, load_templates, logger_aliases, logger_wrappers,
)
from toolkit.redact import redact_config_value_col, redact_text_col
from toolkit.regex import to_java_regex

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
_TASK = r"(?:[\w.-]+?__)?\d+_\d+"

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

# Run markers: a JVM start. Strong ones are logged once per start; `Kafka version` is logged once per
# Kafka client (consumer, restore consumer, producer, admin...), so it only counts on hosts without
# strong markers.
_STRONG_START = (
    r"^(?:StreamsConfig values:"
    r"|(?:stream-client \[[^\]]*\] ?)?Kafka Streams version: "
    r"|stream-client \[[^\]]*\] ?State transition from CREATED to "
    r"|Starting NiFi \S+ using Java "
    r"|Launching NiFi\.\.\.)"
)
_WEAK_START = r"^Kafka version ?: "


#: What a multi-line template reads: the body and, after it, the stack trace (an exception's multi-line
#: message often opens the stack trace: "Error encountered sending record ... due to:\n<cause>\nWritten ...").
_FULL_TEXT = "CASE WHEN stack IS NULL THEN _body ELSE concat(_body, '\\n', stack) END"


def _sql_str(value: str) -> str:
    """A Spark SQL string literal (backslash escapes are processed by the SQL parser)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    for literal in sorted({t.literal for t in unbound}):
        gate = gate | F.col("message").contains(literal)
    return gate


def _sql_const(value: object, sql_type: str) -> str:
    """A constant array/map as SQL: ``from_json('<json>', '<type>')``.

    Spark folds it into a literal once; written as ``array('a', 'b', ...)`` with hundreds of
    elements, the analyzer alone takes seconds per DataFrame step.
    """
    return f"from_json({_sql_str(json.dumps(value))}, {_sql_str(sql_type)})"


def _sql_array(values: Sequence[object]) -> str:
    sql_type = "array<string>" if values and isinstance(values[0], str) else "array<int>"
    return _sql_const(list(values), sql_type)


def _extract(tagged: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """Typed fields for records whose ``_tidx`` is set.

    The chosen template's pattern and group numbers are looked up in constant arrays by
    ``_tidx``, so each field is one ``regexp_extract`` with a per-row pattern; sorting by template
    within each partition lets Spark reuse the compiled pattern across consecutive rows. The
    expressions are SQL text applied in a handful of ``selectExpr`` calls (one analysis each).
    """
    names = (*FIELD_TYPES, "partitions", "tasks")
    groups = [t.groups for t in templates]
    items = [t.item_groups for t in templates]
    prefix_cols = [
        f"nullif(regexp_extract(message, {_sql_str(_PREFIX_JAVA)}, {idx}), '') AS _p_{name}"
        for name, idx in _PREFIX_GROUPS.items()
    ]
    step1 = tagged.sortWithinPartitions("_tidx").selectExpr(
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
        *[f"get({_sql_array([g.get(n, 0) for g in groups])}, _tidx) AS _gi_{n}" for n in names],
        *[f"get({_sql_array([g.get(f, 0) for g in items])}, _tidx) AS _ii_{f}" for f in ITEM_FIELDS],
    )
    step2 = step1.selectExpr(
        "*",
        "coalesce(_p_task_kind, _p_old_task_kind) AS _p_task_kind_any",
        *[f"nullif(CASE WHEN _gi_{n} > 0 THEN regexp_extract(_text, _pattern, _gi_{n}) END, '') AS _g_{n}" for n in names],
    )

    def typed(name: str) -> str:
        kind = FIELD_TYPES[name]
        return f"_g_{name}" if kind == "string" else f"try_cast(_g_{name} AS {kind})"

    item_arrays = [
        f"CASE WHEN _g_partitions IS NOT NULL AND _ii_{f} > 0 THEN regexp_extract_all(_g_partitions, _item, _ii_{f}) END AS _i_{f}"
        for f in ITEM_FIELDS
    ]
    client_thread = f"regexp_replace(_p_client_ref, {_sql_str(_CLIENT_SUFFIX)}, '')"
    step3 = step2.selectExpr(
        "*",
        *item_arrays,
        f"CASE WHEN _g_tasks IS NOT NULL THEN regexp_extract_all(_g_tasks, {_sql_str(_TASK_ITEM)}, 0) END AS task_ids",
        # thread from the prefix, never from the truncated %t column; the assignor prefix is <thread>-consumer
        "coalesce(_g_stream_thread,"
        " CASE WHEN _p_thread_kind IN ('stream-thread', 'state-updater', 'global-stream-thread')"
        "      THEN regexp_replace(_p_thread_ref, '-consumer$', '') END,"
        f" CASE WHEN {client_thread} RLIKE {_sql_str(_STREAMS_THREAD)} THEN {client_thread} END) AS stream_thread",
        f"{client_thread} AS _client_thread",
        "CASE WHEN _p_group_id NOT IN ('', 'null') THEN _p_group_id END AS _group_id",
        "coalesce(_g_component_type, _p_component_type) AS component_type",
        "coalesce(_g_component_id, _p_component_id) AS component_id",
        f"coalesce(_g_error_class, nullif(regexp_extract(stack, {_sql_str(_EXCEPTION_CLASS)}, 1), '')) AS error_class",
        *[f"{typed(n)} AS {n}" for n in FIELD_TYPES if n not in _DERIVED],
    )
    partitions = (
        "CASE WHEN _i_topic IS NOT NULL THEN transform(_i_topic, (t, i) -> named_struct("
        "'topic', t, 'partition', try_cast(get(_i_partition, i) AS int), 'offset', try_cast(get(_i_offset, i) AS bigint),"
        " 'end_offset', try_cast(get(_i_end_offset, i) AS bigint), 'records', try_cast(get(_i_records, i) AS bigint))) END"
    )
    step4 = step3.selectExpr(
        "*",
        f"{partitions} AS partitions",
        "coalesce(_g_client_id,"
        " CASE WHEN _p_thread_kind = 'stream-client' THEN _p_thread_ref END,"
        f" nullif(regexp_extract(stream_thread, {_sql_str(_CLIENT_ID_OF_THREAD)}, 1), ''),"
        f" nullif(regexp_extract(_client_thread, {_sql_str(_CLIENT_ID_OF_THREAD)}, 1), '')) AS client_id",
        "coalesce(_g_task_id, _p_task_ref, _p_old_task_ref, CASE WHEN size(task_ids) = 1 THEN task_ids[0] END) AS task_id",
        "CASE WHEN lower(coalesce(_g_task_role, _p_task_kind_any)) IN ('standby', 'standby-task') THEN 'standby'"
        " WHEN lower(coalesce(_g_task_role, _p_task_kind_any)) IN ('active', 'stream', 'stream-task', 'task') THEN 'active'"
        " END AS task_role",
    )
    # scalar partition fields: the template's own group, else the single list element
    step5 = step4.selectExpr(
        "*",
        f"coalesce(_g_process_id, nullif(regexp_extract(client_id, '({_UUID})$', 1), '')) AS process_id",
        *[
            f"coalesce({typed(f)}, CASE WHEN size(partitions) = 1 THEN partitions[0].{f} END) AS _s_{f}"
            for f in ITEM_FIELDS
        ],
    )
    changelog_app = (
        "CASE WHEN _g_store IS NOT NULL AND endswith(_s_topic, concat('-', _g_store, '-changelog'))"
        " THEN substr(_s_topic, 1, length(_s_topic) - length(_g_store) - 11) END"
    )
    step6 = step5.selectExpr(
        "*",
        f"coalesce(_g_app_id, _group_id, nullif(regexp_extract(client_id, '^(.+)-{_UUID}$', 1), ''), nullif({changelog_app}, '')) AS app_id",
    )
    store_from_topic = (
        "CASE WHEN startswith(_s_topic, concat(app_id, '-')) AND endswith(_s_topic, '-changelog')"
        " THEN substr(_s_topic, length(app_id) + 2, length(_s_topic) - length(app_id) - 11) END"
    )
    out = step6.selectExpr(
        "*",
        f"coalesce(_g_store, nullif({store_from_topic}, '')) AS store",
        "_prefix_kind AS prefix_kind",
        *[f"_s_{f} AS {f}" for f in ITEM_FIELDS],
    )
    return out.select(*[redact_text_col(F.col("message")).alias("message") if c == "message" else c for c in EVENT_COLUMNS])


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


def template_hits(events: DataFrame) -> DataFrame:
    """Events per ``template_id`` as ``(template_id, hits)`` (input for :func:`catalogue_table`)."""
    return events.groupBy("template_id").agg(F.count(F.lit(1)).alias("hits"))


def catalogue_table(hit_counts: DataFrame | None = None, templates: Sequence[Template] | None = None) -> pd.DataFrame:
    """The catalogue as a bounded pandas table (one row per template), optionally with hit counts.

    ``hit_counts`` is a DataFrame with ``template_id`` and ``hits`` or ``count`` (e.g.
    :func:`template_hits`), or an events DataFrame (it is counted). Its size is bounded by the number of templates.
    """
    templates = list(load_templates() if templates is None else templates)
    table = pd.DataFrame(
        [
            {
                "id": t.id, "product": t.product, "event": t.event, "also": ", ".join(t.also),
                "logger": t.logger, "level": t.level, "versions": t.versions, "literal": t.literal,
                "samples": len(t.samples), "reference": t.reference,
            }
            for t in templates
        ]
    )
    if hit_counts is not None:
        # an events table (it has an `event` column, and a typed `count` field) is counted first
        counts = template_hits(hit_counts) if "event" in hit_counts.columns else hit_counts
        value = "hits" if "hits" in counts.columns else "count"
        known = [t.id for t in templates]
        rows = counts.where(F.col("template_id").isin(*known)).select("template_id", value).collect()
        hits = {r["template_id"]: int(r[value] or 0) for r in rows}
        table["hits"] = table["id"].map(lambda i: hits.get(i, 0)).astype("int64")
    return table


def _marker_kind(message: Column) -> Column:
    """Which strong start marker a message is (null when none): one kind is logged once per start."""
    return (F.when(message.rlike(r"^StreamsConfig values:"), F.lit("config"))
            .when(message.rlike(r"^(?:stream-client \[[^\]]*\] ?)?Kafka Streams version: "), F.lit("version"))
            .when(message.rlike(r"^stream-client \[[^\]]*\] ?State transition from CREATED to "), F.lit("created"))
            .when(message.rlike(r"^(?:Starting NiFi \S+ using Java |Launching NiFi\.\.\.)"), F.lit("nifi")))


#: Loggers of NiFi's bootstrap process (``nifi-bootstrap.log``), full or abbreviated.
NIFI_BOOTSTRAP_LOGGER = r"^(?:org\.apache\.nifi\.bootstrap|o\.a\.n\.b)\."


def is_nifi_bootstrap(df: DataFrame) -> Column:
    """True on rows NiFi's bootstrap process logged (by logger, or by template on events without one)."""
    by_logger = F.col("logger").rlike(NIFI_BOOTSTRAP_LOGGER) if "logger" in df.columns else F.lit(False)
    by_template = F.col("template_id").startswith("nifi.bootstrap.") if "template_id" in df.columns else F.lit(False)
    return F.coalesce(by_logger, F.lit(False)) | F.coalesce(by_template, F.lit(False))


def tag_runs(df: DataFrame, *, startup_gap_seconds: int = 60, same_start_seconds: int = 5) -> DataFrame:
    """Add ``run_no`` (int) and ``run_id`` (``<host>#<n>``): the process run of each row, per host.

    Works on records or events (needs ``host``, ``source``, ``line_no``, ``ts``, ``message``).
    A run starts at a JVM start marker: ``StreamsConfig values:``, ``Kafka Streams version:``,
    a client ``State transition from CREATED to ..``, NiFi ``Starting NiFi .. using Java``
    / ``Launching NiFi...``; ``Kafka version:`` banners count only on hosts with none of those
    (they repeat for every Kafka client of one start). A marker starts a new run when it is the
    host's first, when more than ``startup_gap_seconds`` passed since the previous marker, or when
    a marker of the same kind was already printed more than ``same_start_seconds`` earlier (each kind
    is printed once per start, so a quick restart is a new run, not part of the previous start);
    markers within ``same_start_seconds`` of such a start belong to it. NiFi bootstrap lines take the run in
    progress (the first run before any). Lines the JVM printed on its
    ``main`` thread just before a start marker (framework banners, ``Starting ... with PID``) belong to
    the run that marker opens; in layouts without thread names, so does the burst of lines right before
    the marker that follows a silence of ``STARTUP_SILENCE_SECONDS``. Other rows before the first marker get run 0. Rows without ``ts`` take
    the last known ``ts`` of their file for ordering.
    """
    by_file = Window.partitionBy("host", "source").orderBy("line_no").rowsBetween(Window.unboundedPreceding, 0)
    body = F.regexp_replace(F.col("message"), r"^(?:stream-client \[[^\]]*\] ?)", "")
    strong = F.coalesce(F.col("message").rlike(_STRONG_START), F.lit(False))
    weak = F.coalesce(body.rlike(_WEAK_START), F.lit(False))
    marked = (
        df.withColumn("_order_ts", F.coalesce(F.col("ts"), F.last("ts", ignorenulls=True).over(by_file)))
        .withColumn("_strong", strong)
        .withColumn("_weak", weak)
        .withColumn("_host_has_strong", F.max(F.col("_strong").cast("int")).over(Window.partitionBy("host")) == 1)
        .withColumn("_marker", F.col("_strong") | (F.col("_weak") & ~F.col("_host_has_strong")))
        .withColumn("_kind", F.when(F.col("_strong"), F.coalesce(_marker_kind(F.col("message")), F.lit("other"))))
    )
    order = Window.partitionBy("host").orderBy(F.col("_order_ts").asc_nulls_first(), "source", "line_no")
    before = order.rowsBetween(Window.unboundedPreceding, -1)
    markers_only = F.when(F.col("_marker"), F.col("_order_ts"))
    previous_marker_ts = F.last(markers_only, ignorenulls=True).over(before)
    any_marker_before = F.max(F.col("_marker").cast("int")).over(before)
    gap = F.col("_order_ts").cast("double") - previous_marker_ts.cast("double")
    same_kind = Window.partitionBy("host", "_kind").orderBy(F.col("_order_ts").asc_nulls_first(), "source", "line_no")
    previous_same_kind = F.lag("_order_ts").over(same_kind)
    since_same_kind = F.col("_order_ts").cast("double") - previous_same_kind.cast("double")
    # The same kind again within the start-up window: a second start (a quick restart). Further apart, the
    # gap rule decides (a slow start-up may print its kinds seconds apart).
    repeated = (F.col("_kind").isNotNull() & previous_same_kind.isNotNull()
                & (since_same_kind > same_start_seconds) & (since_same_kind <= startup_gap_seconds))
    candidate = F.col("_marker") & (
        F.coalesce(any_marker_before, F.lit(0)).eqNullSafe(0)
        | previous_marker_ts.isNull()
        | F.col("_order_ts").isNull()
        | (gap > startup_gap_seconds)
        | F.coalesce(repeated, F.lit(False))
    )
    marked = marked.withColumn("_candidate", candidate)
    # Several markers of one start (config dump, version banner, CREATED) open one run, not three.
    previous_candidate_ts = F.last(F.when(F.col("_candidate"), F.col("_order_ts")), ignorenulls=True).over(before)
    starts_run = F.col("_candidate") & (
        previous_candidate_ts.isNull() | F.col("_order_ts").isNull()
        | (F.col("_order_ts").cast("double") - previous_candidate_ts.cast("double") > same_start_seconds))
    result = marked.withColumn("_starts_run", starts_run).withColumn(
        "run_no", F.sum(F.col("_starts_run").cast("int")).over(order.rowsBetween(Window.unboundedPreceding, 0)).cast("int")
    )
    # A JVM prints on its "main" thread before the first marker (framework banners, "Starting ... with PID");
    # those lines open the next run rather than close the previous one.
    # "The nearest such row after this one" as a running frame over the reversed order: Spark recomputes a frame
    # that ends at UNBOUNDED FOLLOWING for every row (quadratic in a host's lines), a growing one it does not.
    reverse = Window.partitionBy("host").orderBy(F.col("_order_ts").desc_nulls_last(), F.col("source").desc(),
                                                 F.col("line_no").desc())
    after = reverse.rowsBetween(Window.unboundedPreceding, -1)
    boot = is_nifi_bootstrap(df)
    main = F.coalesce(F.lower(F.col("thread")).isin(*STARTUP_THREADS), F.lit(False)) if "thread" in df.columns \
        else F.lit(False)
    main = main & ~boot
    result = result.withColumn("_main", main)
    next_start = F.last(F.when(F.col("_starts_run"), F.col("_order_ts")), ignorenulls=True).over(after)
    next_other = F.last(F.when(~F.col("_main") & ~F.col("_starts_run"), F.col("_order_ts")), ignorenulls=True).over(after)
    next_start_row = F.last(F.when(F.col("_starts_run"), F.struct("_order_ts", "source", "line_no")),
                            ignorenulls=True).over(after)
    next_other_row = F.last(F.when(~F.col("_main") & ~F.col("_starts_run"), F.struct("_order_ts", "source", "line_no")),
                            ignorenulls=True).over(after)
    soon = next_start.isNotNull() & (next_start.cast("double") - F.col("_order_ts").cast("double") <= STARTUP_BURST_SECONDS)
    by_main_thread = (F.col("_main") & ~F.col("_starts_run") & soon
                      & (next_other.isNull() | (next_other_row >= next_start_row)))
    # Layouts without a thread: the burst of lines right before the marker, after a silence, is the new JVM's.
    silence = (F.col("_order_ts").cast("double")
               - F.lag("_order_ts").over(order).cast("double")) >= STARTUP_SILENCE_SECONDS
    result = result.withColumn("_burst", F.sum(F.coalesce(silence, F.lit(True)).cast("int")).over(
        order.rowsBetween(Window.unboundedPreceding, 0)))
    next_start_burst = F.last(F.when(F.col("_starts_run"), F.col("_burst")), ignorenulls=True).over(after)
    no_thread = F.col("thread").isNull() if "thread" in df.columns else F.lit(True)
    by_burst = no_thread & ~F.col("_starts_run") & soon & (next_start_burst == F.col("_burst"))
    opens_next = by_main_thread | F.coalesce(by_burst, F.lit(False))
    result = result.withColumn("run_no", F.when(opens_next, F.col("run_no") + 1).otherwise(F.col("run_no")))
    # NiFi's bootstrap launches the first run before that run's first line: its lines go with the run in
    # progress, or with the first run when none is yet.
    host_has_marker = F.max(F.col("_marker").cast("int")).over(Window.partitionBy("host")) == 1
    result = result.withColumn("run_no", F.when(boot & (F.col("run_no") == 0) & host_has_marker, F.lit(1))
                               .otherwise(F.col("run_no")))
    result = result.withColumn("run_id", F.concat_ws("#", F.coalesce(F.col("host"), F.lit("?")), F.col("run_no").cast("string")))
    return result.drop("_order_ts", "_strong", "_weak", "_host_has_strong", "_marker", "_starts_run", "_kind",
                       "_candidate", "_main", "_burst")


#: Threads a JVM starts on (the lines before the Kafka Streams start markers belong to the new run).
STARTUP_THREADS = ("main", "restartedmain")
#: How long before its first start marker a JVM's own start-up lines may begin.
STARTUP_BURST_SECONDS = 120
#: Without thread names: the silence that separates the previous run's last line from a new JVM's first.
STARTUP_SILENCE_SECONDS = 5




def run_bounds(records: DataFrame) -> DataFrame:
    """Per host and process run (the numbering of :func:`tag_runs`), its first and last line of any kind.

    Columns: ``host``, ``run_no``, ``run_id``, ``first_ts``, ``first_source``, ``last_ts``, ``last_source``, ``last_line_no``,
    ``last_text``, ``lines``, ``last_of_file`` (the run's last line is the last line of its file). Classified
    events alone miss the application's own lines, so a run's end is taken from here; lines no layout
    understands (``layout = 'unparsed'``: a supervisor's or shell's lines) and NiFi bootstrap lines are left out.
    """
    # Lines no layout understands are not the application's (a supervisor's "Main process exited", a shell
    # prompt in a pasted log): they neither extend nor open a run.
    parsed = F.col("layout").isNull() | (F.col("layout") != "unparsed") if "layout" in records.columns else F.lit(True)
    keep = [c for c in ("host", "source", "line_no", "ts", "thread", "message") if c in records.columns]
    # NiFi's bootstrap is another JVM that outlives the application (it logs the launch before and the
    # termination after): its lines neither open, extend nor end the application's run.
    parsed = parsed & ~is_nifi_bootstrap(records)
    base = records.where(F.col("host").isNotNull() & parsed).select(*keep)
    file_end = base.groupBy("host", "source").agg(F.max("line_no").alias("_file_last"))
    tagged = tag_runs(base).where(F.col("ts").isNotNull())
    per_run = tagged.groupBy("host", "run_no", "run_id").agg(
        F.min("ts").alias("first_ts"),
        F.min(F.struct("ts", "line_no", "source")).alias("_first"),
        F.max(F.struct("ts", "line_no", "source", F.substring_index("message", "\n", 1).alias("text"))).alias("_last"),
        F.count(F.lit(1)).alias("lines"),
    )
    out = per_run.select("host", "run_no", "run_id", "first_ts", F.col("_first.source").alias("first_source"),
                         F.col("_last.ts").alias("last_ts"),
                         F.col("_last.source").alias("last_source"), F.col("_last.line_no").alias("last_line_no"),
                         F.col("_last.text").alias("last_text"), "lines")
    out = out.join(file_end.withColumnRenamed("source", "last_source"), ["host", "last_source"], "left")
    return out.withColumn("last_of_file", F.col("last_line_no") == F.col("_file_last")).drop("_file_last")


_CONFIG_HEADER = r"^(\w+Config) values: ?(?:\n|$)"
_CONFIG_LINE = r"^\t?\s*([A-Za-z0-9_.\-]+) = ?(.*)$"


def extract_config(records: DataFrame) -> DataFrame:
    """Parse ``<Class>Config values:`` dumps into rows, with secrets redacted.

    Output: ``host, source, line_no`` (of the dump), ``ts``, ``config_class`` (``StreamsConfig``,
    ``ConsumerConfig``, ``ProducerConfig``, ``AdminClientConfig``, ...), ``key``, ``value``. The
    ``\\t<key> = <value>`` lines are continuation lines inside ``message``.
    """
    dumps = records.where(F.col("message").rlike(_CONFIG_HEADER)).select(
        "host", "source", "line_no", "ts",
        F.regexp_extract(F.col("message"), _CONFIG_HEADER, 1).alias("config_class"),
        F.posexplode(F.split(F.col("message"), "\n")).alias("_pos", "_line"),
    )
    lines = dumps.where((F.col("_pos") > 0) & F.col("_line").rlike(_CONFIG_LINE))
    key = F.regexp_extract(F.col("_line"), _CONFIG_LINE, 1)
    value = F.regexp_extract(F.col("_line"), _CONFIG_LINE, 2)
    return lines.select(
        "host", "source", "line_no", "ts", "config_class",
        key.alias("key"),
        redact_config_value_col(key, F.rtrim(value)).alias("value"),
    )


def message_shape(message: Column) -> Column:
    """First line of a message with ids, numbers and hex masked (for grouping unknown lines)."""
    first = F.substring(F.substring_index(message, "\n", 1), 1, 300)
    masked = F.regexp_replace(first, _UUID, "<uuid>")
    masked = F.regexp_replace(masked, r"\b0x[0-9a-fA-F]+\b", "<hex>")
    masked = F.regexp_replace(masked, r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b", "<hex>")
    masked = F.regexp_replace(masked, r"\d+(?:[.,:_]\d+)*", "<n>")
    return masked


def unknown_shapes(records: DataFrame, limit: int = 50, templates: Sequence[Template] | None = None) -> DataFrame:
    """The most frequent message shapes no template classifies, per logger.

    Columns: ``logger``, ``shape`` (first line, ids/numbers/hex masked), ``count``, ``example_source``,
    ``example_line_no``, ``example`` (the first line of the example, redacted). At most ``limit`` rows.
    """
    templates = list(load_templates() if templates is None else templates)
    candidates, hopeless = _split_by_gate(records, templates)
    columns = ["logger", "message", "source", "line_no"]
    unknown = _tag_templates(candidates, templates).where(F.col("_tidx").isNull()).select(*columns).unionByName(
        hopeless.where(F.col("message").isNotNull()).select(*columns))
    first = F.substring_index(F.col("message"), "\n", 1)
    # Two steps, so the masking regexes run once per distinct line pattern, not once per line: group by
    # the first line with every digit turned into 0 (masking that text gives the same shape as masking
    # the original), then mask each group key and merge equal shapes.
    digits_zeroed = F.regexp_replace(F.substring(first, 1, 300), "[1-9]", "0")
    example = F.min(F.struct("source", "line_no", first.alias("first"))).alias("_ex")
    grouped = (
        unknown.groupBy("logger", digits_zeroed.alias("_key")).agg(F.count(F.lit(1)).alias("_n"), example)
        .withColumn("shape", message_shape(F.col("_key")))
        .groupBy("logger", "shape")
        .agg(F.sum("_n").alias("count"), F.min("_ex").alias("_ex"))
    )
    return (
        grouped.select(
            "logger", "shape", "count",
            F.col("_ex.source").alias("example_source"),
            F.col("_ex.line_no").alias("example_line_no"),
            redact_text_col(F.col("_ex.first")).alias("example"),
        )
        .orderBy(F.col("count").desc(), F.col("logger").asc_nulls_last(), "shape")
        .limit(limit)
    )


__all__ = [
    "EVENT_COLUMNS",
    "EVENT_FIELDS",
    "catalogue_table",
    "classify",
    "extract_config",
    "message_shape",
    "run_bounds",
    "tag_runs",
    "template_hits",
    "unknown_shapes",
]
