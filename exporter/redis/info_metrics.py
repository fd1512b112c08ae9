"""Turn a parsed INFO reply into samples, written into a :class:`FamilySet`.

Where the set replays (the text encoder within a target's ``rendering``), an input that stands where it stood at the
target's last scrape (a field, a section, a database, a command's stats) has its lines added again, not rendered.
The plans below are kept per section and field name for every target alike: a table of names, bounded.
"""

from __future__ import annotations

import functools
import re
from typing import Any, TypeGuard

from exporter.common.families import COUNTER, GAUGE, FamilySet
from exporter.common.labels import with_label

from .info import (
    _INF,
    _NUMBER_START,
    IDENTIFIER_FIELDS,
    STATUS_VALUES,
    CommandLines,
    CommandNumbers,
    CommandStats,
    InfoReply,
    command_lines,
    command_stats,
    parse_number,
    parse_percent,
    parse_subfields,
    parse_value,
)
from .info_fields import (
    CLUSTER_INFO_FIELDS,
    CONSUMED_FIELDS,
    DB_KEYS_CACHED,
    DB_KEYS_WITH_EXPIRING_ITEMS,
    INSTANCE_INFO_LABELS,
    INSTANCE_INFO_OPTIONAL_LABELS,
    IO_THREAD_ACTIVE_TIME,
    IO_THREAD_ACTIVE_TIME_PREFIX,
    KNOWN_FIELDS,
    LABELLED_FIELDS,
    MASTER_LABELLED_FIELDS,
    PERCENT,
    SCRIPTING_ENGINE_INFO,
    SCRIPTING_ENGINE_MEMORY_OVERHEAD,
    SCRIPTING_ENGINE_MEMORY_USED,
    SCRIPTING_ENGINE_PREFIX,
    SCRIPTING_ENGINES_SECTION,
    SKIPPED_SECTIONS,
    TLS_CERT_SERIALS,
    TLS_CERTIFICATE_INFO,
    TLS_SECTION,
)

KNOWN_METRIC_NAMES = frozenset(
    [spec.name for spec in KNOWN_FIELDS.values()]
    + [spec.name for spec in MASTER_LABELLED_FIELDS.values()]
    + [spec.name for spec in CLUSTER_INFO_FIELDS.values()]
    + [spec.name for spec in LABELLED_FIELDS]
)
# Sections whose lines carry sub-fields and get metrics of their own shape.
STRUCTURED_SECTIONS = frozenset({"keyspace", "commandstats", "errorstats", "latencystats", "modules"})
_NOT_PLAIN = STRUCTURED_SECTIONS | SKIPPED_SECTIONS  # and those not served from INFO at all
_REPLICA_LINE = re.compile(r"slave\d+$")
_THREAD_NUMBER = re.compile(r"[0-9]+$")
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def metric_name_for_unknown(field: str) -> str:
    return "redis_" + _UNSAFE.sub("_", field.lower())


# What to do with a field of a plain section, decided once per section and field name and kept: a scrape of many
# targets meets the same few hundred names again and again. Bounded, as a hostile server can make up names.
# A number (as _KNOWN or _UNKNOWN) is what nearly every field is: those two are the lowest.
_KNOWN, _UNKNOWN, _SKIP, _REPLICA, _IO_THREAD, _CERTIFICATE, _ENGINE = 0, 1, 2, 3, 4, 5, 6
_PLANS: dict[str, dict[str, tuple]] = {}  # section -> field -> plan
_MAX_PLANS = 8192
_planned = [0]


def _plan(section: str, name: str) -> tuple:
    spec = KNOWN_FIELDS.get(name)
    if spec is not None:
        plan: tuple = (_KNOWN, spec.name, spec.kind, spec.help, spec.scale)
    elif name in CONSUMED_FIELDS or name in IDENTIFIER_FIELDS or name in MASTER_LABELLED_FIELDS:
        plan = (_SKIP,)
    elif section == "replication" and _REPLICA_LINE.match(name):
        plan = (_REPLICA,)
    elif name.startswith(IO_THREAD_ACTIVE_TIME_PREFIX) and _THREAD_NUMBER.match(name, len(IO_THREAD_ACTIVE_TIME_PREFIX)):
        plan = (_IO_THREAD, name[len(IO_THREAD_ACTIVE_TIME_PREFIX) :])
    elif name in TLS_CERT_SERIALS:  # a serial (hexadecimal, or "none"): a label, never a number
        plan = (_CERTIFICATE, TLS_CERT_SERIALS[name]) if section == TLS_SECTION else (_SKIP,)
    elif section == SCRIPTING_ENGINES_SECTION and name.startswith(SCRIPTING_ENGINE_PREFIX):
        plan = (_ENGINE,)
    else:
        metric = metric_name_for_unknown(name)
        plan = (_SKIP,) if metric in KNOWN_METRIC_NAMES else (_UNKNOWN, metric, GAUGE, f"INFO field {name} ({section}), exported as found.", 1.0)
    if _planned[0] < _MAX_PLANS:
        _PLANS.setdefault(section, {})[name] = plan
        _planned[0] += 1
    return plan


_WHOLE = None  # a section's memo keeps the lines of all its fields under this key (a field's name is a str)


def add_info_metrics(
    info: InfoReply, base: dict[str, str], out: FamilySet, lines: CommandLines | None = None, stats: CommandStats | None = None
) -> None:
    """Every field of every section of ``info`` as samples labelled ``base`` (the target's ``instance``). ``lines`` and
    ``stats``: INFO commandstats' lines and command stats where the scrape parsed them already."""
    no_plans: dict[str, tuple] = {}
    for section, fields in info.sections.items():
        if section in _NOT_PLAIN:
            continue
        plans = _PLANS.get(section, no_plans)
        memo = out.memo(section)
        if memo is None:  # a target without a memo (most of a fleet): every field rendered, nothing kept
            _add_fields(section, fields, plans, base, out)
            continue
        if out.replay(memo, _WHOLE, fields) is not None:  # not a field of the section changed
            continue
        # each field's line again where it stands still; the section's lines are kept as one only once none moved (one
        # that moves at every scrape, as the server's uptime, would have them joined for nothing)
        if not out.replay_each(memo, fields, functools.partial(_add_planned, section, plans, base, out)):
            out.record_together(memo, _WHOLE, fields, fields)
    _add_instance_info(info, base, out, out.memo("instance"))
    _add_replica_side(info, base, out)
    _add_keyspace(info.sections.get("keyspace", {}), base, out, out.memo("keyspace"))
    lines = command_lines(info.sections.get("commandstats", {})) if lines is None else lines
    _add_commandstats(lines, base, out, out.memo("commandstats"))
    stats = command_stats(lines) if stats is None else stats
    _add_latencystats(info.sections.get("latencystats", {}), stats, base, out, out.memo("latencystats"))
    _add_errorstats(info.sections.get("errorstats", {}), base, out)
    _add_modules(info.sections.get("modules", {}), base, out)


def _add_fields(section: str, fields: dict[str, str], plans: dict[str, tuple], base: dict[str, str], out: FamilySet) -> None:
    """:func:`_add_field` of each field, its commonest case (a number, as the server wrote it or scaled) gathered and
    added in one call: it runs for every field of every target of a fleet."""
    numbers: list[tuple[str, str, str, float | str]] = []
    for name, raw in fields.items():
        plan = plans.get(name) or _plan(section, name)
        action = plan[0]
        if action == _SKIP:
            continue
        if action <= _UNKNOWN and raw:
            scale = plan[4]
            if scale == 1.0 and raw.isdigit() and raw.isascii() and len(raw) < 16 and (raw[0] != "0" or len(raw) == 1):
                numbers.append((plan[1], plan[2], plan[3], raw + ".0"))  # an integer below 10^15, as repr writes its float
                continue
            if scale != PERCENT:
                value = parse_number(raw)
                if value is not None:
                    value *= scale
                    if -_INF < value < _INF:
                        numbers.append((plan[1], plan[2], plan[3], value))
                        continue
                elif action == _UNKNOWN:  # not a number (a size written for people): not served
                    continue
        if numbers:  # in the order of the fields, as a memo replays them
            out.add_numbers(base, numbers)
            numbers = []
        _add_field(section, name, raw, plan, base, out)
    if numbers:
        out.add_numbers(base, numbers)


def _add_planned(section: str, plans: dict[str, tuple], base: dict[str, str], out: FamilySet, name: str, raw: str) -> None:
    _add_field(section, name, raw, plans.get(name) or _plan(section, name), base, out)


def _add_field(section: str, name: str, raw: str, plan: tuple, base: dict[str, str], out: FamilySet) -> None:
    """One field of a plain section, as its plan says."""
    action = plan[0]
    if action in (_KNOWN, _UNKNOWN):
        value: float | None = None
        if raw and raw[0] in _NUMBER_START and len(raw) <= 40:  # parse_number inlined: nearly every field
            try:
                value = float(raw)
            except ValueError:
                pass
            else:
                if not -_INF < value < _INF:
                    value = None
        scale = plan[4]
        if scale == PERCENT:
            value = parse_percent(raw)
        elif value is None:
            if action == _KNOWN:
                value = STATUS_VALUES.get(raw.lower())  # ok/err, up/down and the like
        elif scale != 1.0:
            value *= scale
        if value is not None:
            out.add(plan[1], plan[2], plan[3], base, value)
    elif action == _REPLICA:
        _add_replica_line(raw, base, out)
    else:
        _add_labelled(action, plan, raw, base, out)


def _add_labelled(action: int, plan: tuple, raw: str, base: dict[str, str], out: FamilySet) -> None:
    """A field served with a label of its own (Valkey 9.1's I/O threads, TLS certificates and scripting engines)."""
    if action == _IO_THREAD:
        value = parse_number(raw)
        if value is not None:
            spec = IO_THREAD_ACTIVE_TIME
            out.add(spec.name, spec.kind, spec.help, with_label(base, "thread", plan[1]), value)
    elif action == _CERTIFICATE:
        spec = TLS_CERTIFICATE_INFO
        out.add(spec.name, spec.kind, spec.help, with_label(with_label(base, "certificate", plan[1]), "serial", raw), 1.0)
    elif action == _ENGINE:
        _add_scripting_engine(raw, base, out)


def _add_scripting_engine(raw: str, base: dict[str, str], out: FamilySet) -> None:
    """``engine_<N>:name=LUA,module=built-in,abi_version=1,used_memory=..,memory_overhead=..``: an engine's info and
    memory, labelled engine, module and abi_version; left out, as redis_exporter leaves it, unless every part is
    ``key=value``, the five are there and both memory figures are whole numbers."""
    if not all("=" in part for part in raw.split(",")):
        return
    sub = parse_subfields(raw)
    name, module, abi, used, overhead = (sub.get(key) for key in _ENGINE_PARTS)
    if name is None or module is None or abi is None or not _is_whole(used) or not _is_whole(overhead):
        return
    labels = with_label(with_label(with_label(base, "engine", name), "module", module), "abi_version", abi)
    for spec, value in ((SCRIPTING_ENGINE_INFO, 1.0), (SCRIPTING_ENGINE_MEMORY_USED, used), (SCRIPTING_ENGINE_MEMORY_OVERHEAD, overhead)):
        out.add(spec.name, spec.kind, spec.help, labels, float(value))


_ENGINE_PARTS = ("name", "module", "abi_version", "used_memory", "memory_overhead")


def _is_whole(value: str | None) -> TypeGuard[str]:
    """A whole number of bytes as the server writes one (digits only, as Go's ParseUint takes)."""
    return value is not None and 0 < len(value) <= 20 and value.isdigit() and value.isascii()


def _add_instance_info(info: InfoReply, base: dict[str, str], out: FamilySet, memo: dict[Any, Any] | None) -> None:
    values = tuple(info.get(name, "") or "" for name in INSTANCE_INFO_LABELS)
    optional = tuple(info.get(name) for name in INSTANCE_INFO_OPTIONAL_LABELS)
    role = info.get("role")
    replication = info.sections.get("replication", {}) if role == "slave" else {}
    primary = (replication.get("master_host", ""), replication.get("master_port", ""), replication.get("slave_read_only", ""))
    source = (values, optional, role, primary)  # these change on a restart, an upgrade or a failover: their lines stand
    if out.replay(memo, "info", source) is not None:
        return
    with out.recording(memo, "info", source):
        _add_instance_lines(base, values, optional, role, primary, out)


def _add_instance_lines(
    base: dict[str, str], values: tuple[str, ...], optional: tuple[str | None, ...], role: str | None, primary: tuple[str, str, str], out: FamilySet
) -> None:
    labels = {**base, **dict(zip(INSTANCE_INFO_LABELS, values, strict=True))}
    for name, value in zip(INSTANCE_INFO_OPTIONAL_LABELS, optional, strict=True):
        if value is not None:
            labels[name] = value
    out.add("redis_instance_info", GAUGE, "Facts about the server that change only on restart or upgrade.", labels, 1.0)
    if role:
        out.add("redis_instance_role", GAUGE, "The server's replication role (master or slave) as a label.", {**base, "role": role}, 1.0)
    if role == "slave":
        slave_labels = {**base, "master_host": primary[0], "master_port": primary[1], "read_only": primary[2]}
        out.add("redis_slave_info", GAUGE, "A replica: the address of its primary, and whether it is read-only.", slave_labels, 1.0)


def _add_replica_side(info: InfoReply, base: dict[str, str], out: FamilySet) -> None:
    fields = info.sections.get("replication", {})
    if "master_host" not in fields:
        return
    labels = {**base, "master_host": fields.get("master_host", ""), "master_port": fields.get("master_port", "")}
    for name, spec in MASTER_LABELLED_FIELDS.items():
        raw = fields.get(name)
        if raw is None:
            continue
        value = parse_value(raw)
        if value is not None:
            out.add(spec.name, spec.kind, spec.help, labels, value)


def _add_replica_line(raw: str, base: dict[str, str], out: FamilySet) -> None:
    if "=" in raw:
        sub = parse_subfields(raw)
    else:  # Redis 2.6: slave0:<ip>,<port>,<state>
        sub = dict(zip(("ip", "port", "state"), raw.split(","), strict=False))
    labels = {**base, "slave_ip": sub.get("ip", ""), "slave_port": sub.get("port", ""), "slave_state": sub.get("state", "")}
    offset = parse_number(sub.get("offset", ""))
    if offset is not None:
        out.add("redis_connected_slave_offset_bytes", GAUGE, "Replication offset acknowledged by a connected replica.", labels, offset)
    lag = parse_number(sub.get("lag", ""))
    if lag is not None:
        out.add("redis_connected_slave_lag_seconds", GAUGE, "Seconds since a connected replica last acknowledged.", labels, lag)


def _add_keyspace(fields: dict[str, str], base: dict[str, str], out: FamilySet, memo: dict[str, Any] | None) -> None:
    out.replay_each(memo, fields, lambda db, raw: _add_database(db, raw, base, out))


def _add_database(db: str, raw: str, base: dict[str, str], out: FamilySet) -> None:
    labels = with_label(base, "db", db)
    sub = parse_subfields(raw)
    for key, value_raw in sub.items():
        value = parse_number(value_raw)
        if value is None:
            continue
        if key == "keys":
            out.add("redis_db_keys", GAUGE, "Keys in the database.", labels, value)
        elif key == "expires":
            out.add("redis_db_keys_expiring", GAUGE, "Keys with an expiry in the database.", labels, value)
        elif key == "avg_ttl":
            out.add("redis_db_avg_ttl_seconds", GAUGE, "Average TTL of keys with an expiry.", labels, value / 1000.0)
        elif key in _EXPIRING_ITEMS:  # Redis 7.4+, Valkey 9+: one count, two names
            if key == "subexpiry" or "subexpiry" not in sub:
                spec = DB_KEYS_WITH_EXPIRING_ITEMS
                out.add(spec.name, spec.kind, spec.help, labels, value)
        elif key == "cached_keys":
            out.add(DB_KEYS_CACHED.name, DB_KEYS_CACHED.kind, DB_KEYS_CACHED.help, labels, value)
        else:
            metric = metric_name_for_unknown("db_" + key)
            if metric not in _KEYSPACE_NAMES:
                out.add(metric, GAUGE, f"Keyspace field {key}, exported as found.", labels, value)


_EXPIRING_ITEMS = frozenset({"subexpiry", "keys_with_volatile_items"})
_KEYSPACE_NAMES = frozenset(
    {"redis_db_keys", "redis_db_keys_expiring", "redis_db_avg_ttl_seconds", DB_KEYS_WITH_EXPIRING_ITEMS.name, DB_KEYS_CACHED.name}
)


def _add_commandstats(lines: CommandLines, base: dict[str, str], out: FamilySet, memo: dict[Any, Any] | None) -> None:
    """Per-command counters."""
    for name, (raw, numbers) in lines.items():
        if out.replay(memo, name, raw) is None:
            with out.recording(memo, name, raw):
                _add_command(name[8:], numbers, base, out)


def _add_command(cmd: str, numbers: CommandNumbers, base: dict[str, str], out: FamilySet) -> None:
    labels = with_label(base, "cmd", cmd)
    calls, usec, rejected, failed = numbers
    if calls is not None:
        out.add("redis_commands_total", COUNTER, "Calls per command.", labels, calls)
    if usec is not None:
        out.add("redis_commands_duration_seconds_total", COUNTER, "Time spent per command.", labels, usec / 1e6)
    if rejected is not None:
        out.add("redis_commands_rejected_calls_total", COUNTER, "Calls rejected before execution, per command.", labels, rejected)
    if failed is not None:
        out.add("redis_commands_failed_calls_total", COUNTER, "Calls that failed during execution, per command.", labels, failed)


def _add_latencystats(fields: dict[str, str], calls: CommandStats, base: dict[str, str], out: FamilySet, memo: dict[Any, Any] | None) -> None:
    """redis_exporter's summary: quantile labels are the percentiles as INFO names them (50, 99, 99.9), values,
    sum and count in microseconds and calls; a command without commandstats is left out, as upstream does."""
    for name, raw in fields.items():
        if not name.startswith("latency_percentiles_usec_"):
            continue
        cmd = name[25:]
        count, total = calls.get(cmd, (None, None))
        if count is None or total is None:
            continue
        if memo is None:  # a target without a memo (most of a fleet)
            _add_percentiles(cmd, raw, count, total, base, out)
            continue
        source = (raw, count, total)
        if out.replay(memo, name, source) is None:
            with out.recording(memo, name, source):
                _add_percentiles(cmd, raw, count, total, base, out)


def _add_percentiles(cmd: str, raw: str, count: float, total: float, base: dict[str, str], out: FamilySet) -> None:
    out.add_summary(
        "redis_latency_percentiles_usec",
        "Latency percentiles per command in microseconds (server-side, from INFO latencystats).",
        with_label(base, "cmd", cmd),
        _QUANTILES.get(raw) or _quantiles(raw),
        count,
        total,
    )


# a latencystats value's quantiles, by its text ("p50=1.003,p99=2.007,p99.9=3.007"): a pure memo, bounded in entries
# and in each one's size, shared by every node (the same few texts recur across a fleet and from scrape to scrape)
_QUANTILES: dict[str, list[tuple[str, float]]] = {}
_MAX_QUANTILES_TEXT = 256


def _quantiles(raw: str) -> list[tuple[str, float]]:
    quantiles = []
    for key, value_raw in parse_subfields(raw).items():
        value = parse_number(value_raw)
        percentile = _percentile_label(key)
        if value is not None and percentile is not None:
            quantiles.append((percentile, value))
    if len(raw) <= _MAX_QUANTILES_TEXT:
        if len(_QUANTILES) >= 1024:
            _QUANTILES.clear()
        _QUANTILES[raw] = quantiles
    return quantiles


_PERCENTILE_LABELS: dict[str, str | None] = {}  # the few keys INFO uses (p50, p99, p99.9), each worked out once


def _percentile_label(key: str) -> str | None:
    """``p99.9`` -> ``99.9``, ``p50`` -> ``50``: the percentile as Go's %g prints it, as redis_exporter labels it."""
    label = _PERCENTILE_LABELS.get(key, "")
    if label != "":
        return label
    number = parse_number(key[1:]) if key.startswith("p") else None
    label = None if number is None or not 0 <= number <= 100 else repr(number).removesuffix(".0")
    if len(_PERCENTILE_LABELS) < 256:
        _PERCENTILE_LABELS[key] = label
    return label


def _add_errorstats(fields: dict[str, str], base: dict[str, str], out: FamilySet) -> None:
    for name, raw in fields.items():
        if not name.startswith("errorstat_"):
            continue
        count = parse_number(parse_subfields(raw).get("count", ""))
        if count is not None:
            out.add("redis_errors_total", COUNTER, "Error replies per error prefix.", with_label(base, "err", name[10:]), count)


def _add_modules(fields: dict[str, str], base: dict[str, str], out: FamilySet) -> None:
    for raw in fields.values():
        sub = parse_subfields(raw)
        if "name" in sub:
            labels = {**base, "name": sub["name"], "ver": sub.get("ver", "")}
            out.add("redis_module_info", GAUGE, "A loaded module and its version.", labels, 1.0)
