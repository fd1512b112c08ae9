"""Which baseline table the exporter compares nodes with (built by exporter.config)."""

from __future__ import annotations

from exporter.common.records import record

# formats of `baseline derive` (read by the command line without loading the derivation)
INPUT_FORMATS = ("athena-csv", "jsonl", "redis-benchmark-csv", "redis-benchmark-report", "memtier-json")
# no CloudFormation here: the alarm template takes its thresholds from a table (`render cloudformation --baselines`), in
# its own units (bytes per minute) and with the basis chosen there
OUTPUT_FORMATS = ("table", "mapping")


@record(frozen=True)
class BaselineConfig:
    file: str | None = None  # the shipped table when None
    basis: str | None = None  # the table's own basis when None
    window: float = 300.0  # seconds of INFO counters a rate is taken over
