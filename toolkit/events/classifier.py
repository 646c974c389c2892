"""Records -> canonical events: template dispatch and field extraction (:func:`classify`).

Everything here is native Spark (column expressions and higher-order functions):
no Python UDFs, no RDDs, nothing collected per record, so it runs unchanged on Spark Connect.

How :func:`classify` works, in one pass over the records:

1. The leading Kafka/NiFi prefix is parsed once with one anchored regex (``stream-thread [..] ``,
   ``stream-client [..] ``, ``state-updater [..] ``, ``task [..] ``, ``[Consumer clientId=..,
   groupId=..] ``, ``ConsumeKinesis[id=..] ``...). Real logs sometimes lack the space after the
   ``]`` (KAFKA-7672 log), so the space is optional. The rest of the message is the *body*.
2. The gate (:func:`toolkit.catalogue.gate.worth_trying`: logger class, level, a few literals), decided while
   the logs are read (``candidate``), sets aside records no template can match. For the others, the body's first
   characters look up the anchored templates it can open (:mod:`toolkit.catalogue.dispatch`); each candidate is
   checked with ``contains(literal)`` and its prefix kind before its regex, and the lowest matching number
   (priority order) wins, floating templates of higher priority tried after it
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
from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue import FIELD_TYPES, ITEM_FIELDS, Template, load_templates
from toolkit.catalogue.dispatch import KEY_CHARS, dispatch_plan
from toolkit.catalogue.gate import worth_trying
from toolkit.catalogue.prefix import PREFIX_PY
from toolkit.events.schemas import EVENT_RECORD_COLUMNS
from toolkit.layouts.catalogue import FIELD_SEP
from toolkit.layouts.fields import with_head_fields
from toolkit.schemas import CANDIDATE_COLUMN
from toolkit.spark import where_computed
from toolkit.redact import redact_text_guarded_col
from toolkit.regex import to_java_regex
from toolkit.sqltext import sql_str

#: Record columns carried into the events table.
RECORD_KEEP: tuple[str, ...] = EVENT_RECORD_COLUMNS

#: Typed event fields, in output order (see ``toolkit.catalogue.FIELD_TYPES`` for types).
EVENT_FIELDS: tuple[str, ...] = tuple(FIELD_TYPES)

#: All columns of :func:`classify`'s output, in order.
EVENT_COLUMNS: tuple[str, ...] = (
    *RECORD_KEEP, "product", "template_id", "event", "also_events", "prefix_kind",
    *EVENT_FIELDS, "partitions", "task_ids",
)

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"

# One anchored regex for every leading prefix Kafka's LogContext or NiFi's component logger writes.
_PREFIX_PY = PREFIX_PY
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


#: The prefix groups in the order the prefix rewrite writes them.
_PREFIX_NAMES: tuple[str, ...] = tuple(sorted(_PREFIX_GROUPS, key=_PREFIX_GROUPS.get))


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


def _with_body(records: DataFrame) -> DataFrame:
    """Records with their leading prefix's text (``_prefix``), the message after it (``_body``), the body's first
    line (``_first``), the body and stack trace together (``_full``) and what the prefix is (``_prefix_kind``).

    One anchored regex per record finds the prefix; what its groups say is read once per distinct prefix
    (:func:`_prefix_facts`): a bundle's prefixes are its threads, clients and tasks, few next to its records."""
    message = F.col("message")
    lines = records.where(message.isNotNull()).withColumn("_prefix", _prefix_of(message))
    prefix = F.col("_prefix")
    lines = lines.withColumn("_body", F.when(prefix != "", F.substring(message, F.length(prefix) + 1, F.lit(2**31 - 1)))
                             .otherwise(message))
    body = F.col("_body")
    return lines.withColumns({
        # single-line templates read the first line only (see Template.multiline)
        "_first": F.when(body.contains("\n"), F.substring_index(body, "\n", 1)).otherwise(body),
        "_full": F.expr(_FULL_TEXT),
        "_prefix_kind": _prefix_kind(prefix),
    })


def _prefix_of(message: Column) -> Column:
    """The leading Kafka/NiFi prefix of ``message`` (empty when it has none)."""
    return F.regexp_extract(message, _PREFIX_JAVA, 0)


def prefix_facts_of(records: DataFrame) -> DataFrame:
    """What each distinct prefix among ``records``' messages says (:func:`_prefix_facts`), for :func:`_extract`.

    Read off the records themselves, not off the tagged ones: a plan that derived the prefixes from the tagged
    records would run the whole template dispatch a second time to build this small table. Prefixes of records
    no template matches are harmless extra rows of a left join."""
    prefixes = records.where(F.col("message").isNotNull()).select(_prefix_of(F.col("message")).alias("_prefix"))
    return _prefix_facts(prefixes.distinct())


def _prefix_facts(prefixes: DataFrame) -> DataFrame:
    """Per distinct prefix (``_prefix``): its groups (``_p_*``) and what they say about the thread, client, process,
    application, task and NiFi component (``_pf_*``), when the template's own groups do not say it."""
    facts = with_head_fields(prefixes, "_pp", F.col("_prefix"), _PREFIX_PY, _PREFIX_NAMES)
    parts = F.col("_pp_f")
    facts = facts.withColumns({f"_p_{name}": F.nullif(F.get(parts, i + 1), F.lit(""))
                               for i, name in enumerate(_PREFIX_NAMES)}).drop("_pp", "_pp_f")
    client_thread = f"regexp_replace(_p_client_ref, {sql_str(_CLIENT_SUFFIX)}, '')"
    facts = facts.selectExpr("*", f"{client_thread} AS _pf_client_thread")
    facts = facts.selectExpr(
        "*",
        "coalesce(_p_task_kind, _p_old_task_kind) AS _pf_task_kind",
        # thread from the prefix, never from the truncated %t column; the assignor prefix is <thread>-consumer
        "coalesce(CASE WHEN _p_thread_kind IN ('stream-thread', 'state-updater', 'global-stream-thread')"
        "      THEN regexp_replace(_p_thread_ref, '-consumer$', '') END,"
        f" CASE WHEN _pf_client_thread RLIKE {sql_str(_STREAMS_THREAD)} THEN _pf_client_thread END) AS _pf_stream_thread",
        "CASE WHEN _p_group_id NOT IN ('', 'null') THEN _p_group_id END AS _pf_group_id",
        "CASE WHEN _p_thread_kind = 'stream-client' THEN _p_thread_ref END AS _pf_client_of_client",
        f"nullif(regexp_extract(_pf_client_thread, {sql_str(_CLIENT_ID_OF_THREAD)}, 1), '') AS _pf_client_of_consumer",
        "coalesce(_p_task_ref, _p_old_task_ref) AS _pf_task",
    )
    facts = facts.selectExpr(
        "*", f"nullif(regexp_extract(_pf_stream_thread, {sql_str(_CLIENT_ID_OF_THREAD)}, 1), '') AS _pf_client_of_thread")
    facts = facts.selectExpr(
        "*", "coalesce(_pf_client_of_client, _pf_client_of_thread, _pf_client_of_consumer) AS _pf_client")
    return facts.selectExpr(
        "_prefix", "_p_thread_kind", "_p_component_type", "_p_component_id", "_pf_task_kind", "_pf_stream_thread",
        "_pf_group_id", "_pf_client_of_client", "_pf_client_of_thread", "_pf_client_of_consumer", "_pf_task", "_pf_client",
        f"nullif(regexp_extract(_pf_client, {sql_str('(' + _UUID + ')$')}, 1), '') AS _pf_process",
        f"nullif(regexp_extract(_pf_client, {sql_str('^(.+)-' + _UUID + '$')}, 1), '') AS _pf_app",
    )


def _tag_templates(records: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """Records with ``_p_*``, ``_body``, ``_first``, ``_prefix_kind`` and ``_tidx`` (first matching template in
    priority order, or null), rows grouped by the templates they were tried against.

    Candidates come from the body's first characters (:mod:`toolkit.catalogue.dispatch`): the anchored
    templates they can open, each checked with ``contains(literal)`` and its prefix kind before its regex;
    then the floating templates of higher priority than the one that matched (all of them when none did).
    Rows are sorted by their first candidates within each partition, so the regex a row is checked against is
    most often the one the row before it used, which Spark keeps compiled; the checks are a few native
    higher-order functions over constant arrays."""
    plan = dispatch_plan(templates)
    literals = _sql_array([t.literal for t in templates])
    patterns = _sql_array([t.java_pattern for t in templates])
    prefixes = _sql_array(["," + ",".join(t.prefix) + "," if t.prefix else "" for t in templates])
    multiline = _sql_const([t.multiline for t in templates], "array<boolean>")
    key_map = _sql_const(plan.by_key, "map<string,array<int>>")
    floating = _sql_const(plan.floating, "array<int>")
    before = _sql_const(plan.floating_before, "array<array<int>>")

    def text(i: str) -> str:
        return f"CASE WHEN get({multiline}, {i}) THEN _full ELSE _first END"

    def possible(i: str) -> str:
        # The literal is looked for in the whole message, prefix included (a literal may begin before the body).
        return (f"contains(message, get({literals}, {i})) "
                f"AND (get({prefixes}, {i}) = '' OR contains(get({prefixes}, {i}), concat(',', _prefix_kind, ',')))")

    def matches(i: str) -> str:
        return f"regexp_instr({text(i)}, get({patterns}, {i})) > 0"

    # Lambdas written as SQL text: a Python lambda gets a new variable name on every call (x_1, x_2...), which
    # Spark's generated code carries, so a second analysis in one session could not reuse the first one's code.
    opened = f"coalesce(try_element_at({key_map}, substr(_body, 1, {KEY_CHARS})), cast(array() AS array<int>))"
    tagged = _with_body(records).withColumn("_cands", F.expr(f"filter({opened}, i -> {possible('i')})"))
    tagged = tagged.withColumns({f"_c{k}": F.expr(f"try_element_at(_cands, {k})") for k in (1, 2, 3)})
    tagged = tagged.sortWithinPartitions("_c1", "_c2", "_c3")
    # Each candidate slot is an expression of its own: it keeps the regex it compiled last.
    anchored = (f"CASE WHEN _c1 IS NOT NULL AND {matches('_c1')} THEN _c1"
                f" WHEN _c2 IS NOT NULL AND {matches('_c2')} THEN _c2"
                f" WHEN _c3 IS NOT NULL AND {matches('_c3')} THEN _c3"
                f" WHEN size(_cands) > 3 THEN array_min(filter(slice(_cands, 4, size(_cands)), i -> {matches('i')})) END")
    tagged = tagged.withColumn("_anchored", F.expr(anchored))
    floats = (f"filter(CASE WHEN _anchored IS NULL THEN {floating} ELSE get({before}, _anchored) END,"
              f" i -> {possible('i')} AND {matches('i')})")
    tagged = tagged.withColumn("_tidx", F.expr(f"least(_anchored, array_min({floats}))"))
    return tagged.drop("_cands", "_c1", "_c2", "_c3", "_anchored")


def _split_by_gate(records: DataFrame, templates: Sequence[Template]) -> tuple[DataFrame, DataFrame]:
    """(records worth trying against the templates, records no template can match): by ``candidate`` where the
    records carry it (``records.parquet``, partitioned by it), else by the gate itself."""
    if CANDIDATE_COLUMN in records.columns:
        gate = F.col(CANDIDATE_COLUMN)
    else:
        gate = F.coalesce(worth_trying(templates), F.lit(True))
    return records.where(gate), records.where(~gate)


def _sql_const(value: object, sql_type: str) -> str:
    """A constant array/map as SQL: ``from_json('<json>', '<type>')``.

    Spark folds it into a literal once; written as ``array('a', 'b', ...)`` with hundreds of
    elements, the analyzer alone takes seconds per DataFrame step.
    """
    return f"from_json({sql_str(json.dumps(value))}, {sql_str(sql_type)})"


def _sql_array(values: Sequence[object]) -> str:
    sql_type = "array<string>" if values and isinstance(values[0], str) else "array<int>"
    return _sql_const(list(values), sql_type)


def _extract(tagged: DataFrame, templates: Sequence[Template], facts: DataFrame | None = None) -> DataFrame:
    """Typed fields for records whose ``_tidx`` is set.

    One regex per record: the chosen template's pattern, looked up by ``_tidx``, rewrites the text into the
    values of every group the catalogue knows, in a fixed order (``_values``; :func:`_group`). Rows come grouped
    by template (:func:`_tag_templates`), so Spark keeps each pattern compiled across the rows that use it. What
    the prefix says is read once per distinct prefix (``facts``, :func:`prefix_facts_of` the records that were
    tagged; derived from ``tagged`` itself when not given, which runs the dispatch twice) and joined. The expressions are SQL text applied in a handful of ``selectExpr`` calls (one
    analysis each); each step carries only what a later step reads, so the code Spark generates stays small
    enough for the JIT to compile well.
    """
    looked_up = _with_template_lookups(tagged, templates)
    if facts is None:
        facts = _prefix_facts(tagged.select("_prefix").distinct())
    joined = looked_up.join(F.broadcast(facts), "_prefix", "left")
    threads = _with_threads_and_lists(joined)
    identified = _with_partitions_and_ids(threads)
    scalar = _with_process_and_single_partition(identified)
    with_app = _with_app_id(scalar)
    return _events(with_app)


#: Raw group texts extracted per template: the typed fields plus the two lists, in the order of ``_values``.
_GROUP_NAMES: tuple[str, ...] = (*FIELD_TYPES, "partitions", "tasks")
#: What every step carries through: the record's own columns and what classification read off it.
_CARRIED: tuple[str, ...] = ("source", "line_no", "host", "ts", "level", "thread", "logger", "message", "stack",
                             "product", "template_id", "event", "also_events", "_prefix_kind", "_values")


def _group(name: str) -> str:
    """SQL for the text of group ``name`` (null when the template has none, or it matched nothing)."""
    return f"nullif(try_element_at(_values, {_GROUP_NAMES.index(name) + 2}), '')"


def _typed(name: str) -> str:
    """SQL for the group text of field ``name`` cast to its catalogue type."""
    kind = FIELD_TYPES[name]
    return _group(name) if kind == "string" else f"try_cast({_group(name)} AS {kind})"


def _whole_text_pattern(pattern: str) -> str:
    """``pattern`` as a Java regex that matches a whole text at the pattern's first match (leftmost, as a search
    finds it), so replacing the text by the groups leaves nothing else. Group numbers are unchanged."""
    return f"^(?s:.*?)(?:{to_java_regex(pattern)})(?s:.*)$"


def _group_replacement(template: Template) -> str:
    """The replacement that writes ``template``'s groups in the order of :data:`_GROUP_NAMES`, each after a
    separator (empty for a group it does not have)."""
    groups = template.groups
    return "".join(FIELD_SEP + (f"${groups[n]}" if n in groups else "") for n in _GROUP_NAMES)


def _with_template_lookups(tagged: DataFrame, templates: Sequence[Template]) -> DataFrame:
    """The chosen template's facts per row: product, id, events, the values of its groups (``_values``), its
    item regex and item group numbers (``_ii_*``)."""
    items = [t.item_groups for t in templates]
    text = (f"CASE WHEN get({_sql_const([t.multiline for t in templates], 'array<boolean>')}, _tidx) THEN _full"
            " ELSE _first END")
    return tagged.selectExpr(
        "source", "line_no", "host", "ts", "level", "thread", "logger", "message", "stack", "_prefix", "_prefix_kind",
        f"get({_sql_array([t.product for t in templates])}, _tidx) AS product",
        f"get({_sql_array([t.id for t in templates])}, _tidx) AS template_id",
        f"get({_sql_array([t.event for t in templates])}, _tidx) AS event",
        f"get({_sql_const([list(t.also) for t in templates], 'array<array<string>>')}, _tidx) AS also_events",
        f"split(regexp_replace({text}, get({_sql_array([_whole_text_pattern(t.pattern) for t in templates])}, _tidx),"
        f" get({_sql_array([_group_replacement(t) for t in templates])}, _tidx)), {sql_str(FIELD_SEP)},"
        f" {len(_GROUP_NAMES) + 1}) AS _values",
        f"get({_sql_array([t.java_item for t in templates])}, _tidx) AS _item",
        *[f"get({_sql_array([g.get(f, 0) for g in items])}, _tidx) AS _ii_{f}" for f in ITEM_FIELDS],
    )


def _with_threads_and_lists(joined: DataFrame) -> DataFrame:
    """The partition list items (``_i_*``), task ids, the stream thread, the client id and the NiFi component: the
    template's own groups, else what the prefix says."""
    stream_thread = _group("stream_thread")
    return joined.selectExpr(
        *_CARRIED, "_pf_client", "_pf_process", "_pf_app", "_pf_group_id", "_pf_task", "_pf_task_kind",
        *[f"CASE WHEN {_group('partitions')} IS NOT NULL AND _ii_{f} > 0"
          f" THEN regexp_extract_all({_group('partitions')}, _item, _ii_{f}) END AS _i_{f}" for f in ITEM_FIELDS],
        f"CASE WHEN {_group('tasks')} IS NOT NULL THEN regexp_extract_all({_group('tasks')}, {sql_str(_TASK_ITEM)}, 0)"
        " END AS task_ids",
        f"coalesce({stream_thread}, _pf_stream_thread) AS stream_thread",
        # the client: the template's, the stream client's, the one its thread belongs to, the consumer's
        f"coalesce({_group('client_id')}, _pf_client_of_client,"
        f" CASE WHEN {stream_thread} IS NOT NULL"
        f" THEN nullif(regexp_extract({stream_thread}, {sql_str(_CLIENT_ID_OF_THREAD)}, 1), '')"
        " ELSE _pf_client_of_thread END, _pf_client_of_consumer) AS client_id",
        f"coalesce({_group('component_type')}, _p_component_type) AS component_type",
        f"coalesce({_group('component_id')}, _p_component_id) AS component_id",
    )


def _with_partitions_and_ids(threads: DataFrame) -> DataFrame:
    """The ``partitions`` struct array, and ``task_id``, ``task_role`` from the template's groups, else from the
    prefix or the single task of the list."""
    partitions = (
        "CASE WHEN _i_topic IS NOT NULL THEN transform(_i_topic, (t, i) -> named_struct("
        "'topic', t, 'partition', try_cast(get(_i_partition, i) AS int), 'offset', try_cast(get(_i_offset, i) AS bigint),"
        " 'end_offset', try_cast(get(_i_end_offset, i) AS bigint), 'records', try_cast(get(_i_records, i) AS bigint))) END"
    )
    role = f"lower(coalesce({_group('task_role')}, _pf_task_kind))"
    return threads.selectExpr(
        *_CARRIED, "task_ids", "stream_thread", "client_id", "component_type", "component_id", "_pf_client",
        "_pf_process", "_pf_app", "_pf_group_id",
        f"{partitions} AS partitions",
        f"coalesce({_group('task_id')}, _pf_task, CASE WHEN size(task_ids) = 1 THEN task_ids[0] END) AS task_id",
        f"CASE WHEN {role} IN ('standby', 'standby-task') THEN 'standby'"
        f" WHEN {role} IN ('active', 'stream', 'stream-task', 'task') THEN 'active' END AS task_role",
    )


def _with_process_and_single_partition(identified: DataFrame) -> DataFrame:
    """``process_id`` (the template's, else the UUID that ends the client id) and the scalar partition
    fields ``_s_*``: the template's own group, else the single list element."""
    # A client id the prefix gave was read once for its prefix.
    uuid = f"CASE WHEN client_id = _pf_client THEN _pf_process ELSE nullif(regexp_extract(client_id, '({_UUID})$', 1), '') END"
    return identified.selectExpr(
        *_CARRIED, "task_ids", "stream_thread", "client_id", "component_type", "component_id", "partitions",
        "task_id", "task_role", "_pf_client", "_pf_app", "_pf_group_id",
        f"coalesce({_group('process_id')}, {uuid}) AS process_id",
        *[
            f"coalesce({_typed(f)}, CASE WHEN size(partitions) = 1 THEN partitions[0].{f} END) AS _s_{f}"
            for f in ITEM_FIELDS
        ],
    )


def _with_app_id(scalar: DataFrame) -> DataFrame:
    """``app_id``: the template's, else the consumer group, the client id before its process UUID, or the
    changelog topic's name before ``-<store>-changelog``."""
    store = _group("store")
    changelog_app = (
        f"CASE WHEN {store} IS NOT NULL AND endswith(_s_topic, concat('-', {store}, '-changelog'))"
        f" THEN substr(_s_topic, 1, length(_s_topic) - length({store}) - 11) END"
    )
    of_client = f"CASE WHEN client_id = _pf_client THEN _pf_app ELSE nullif(regexp_extract(client_id, '^(.+)-{_UUID}$', 1), '') END"
    return scalar.selectExpr(
        "*", f"coalesce({_group('app_id')}, _pf_group_id, {of_client}, nullif({changelog_app}, '')) AS app_id",
    )


def _events(with_app: DataFrame) -> DataFrame:
    """The events table's columns (:data:`EVENT_COLUMNS`): ``store`` (the template's, else read off
    ``<app_id>-<store>-changelog``), the typed fields read directly off the groups, ``error_class`` (the
    template's, else the stack trace's first exception), the scalar partition fields under their own names and
    the message, redacted."""
    store_from_topic = (
        "CASE WHEN startswith(_s_topic, concat(app_id, '-')) AND endswith(_s_topic, '-changelog')"
        " THEN substr(_s_topic, length(app_id) + 2, length(_s_topic) - length(app_id) - 11) END"
    )
    computed = {
        "store": f"coalesce({_group('store')}, nullif({store_from_topic}, ''))",
        "prefix_kind": "_prefix_kind",
        "error_class": f"coalesce({_group('error_class')}, nullif(regexp_extract(stack, {sql_str(_EXCEPTION_CLASS)}, 1), ''))",
        **{f: f"_s_{f}" for f in ITEM_FIELDS},
        **{n: _typed(n) for n in FIELD_TYPES if n not in _DERIVED},
    }
    out = with_app.selectExpr(*[f"{computed[c]} AS {c}" if c in computed else c for c in EVENT_COLUMNS])
    return out.withColumn("message", redact_text_guarded_col(F.col("message")))


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
    tagged = where_computed(_tag_templates(candidates, templates), F.col("_tidx").isNotNull())
    return _extract(tagged, templates, prefix_facts_of(candidates))
