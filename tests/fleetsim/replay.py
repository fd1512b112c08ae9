"""The composed series through the rendered rules: promtool evaluates them a minute at a time, and ``ALERTS`` is read
back at every minute (a check that expects no alert, whose failure lists the alerts that fired)."""

from __future__ import annotations

import math
import re
import subprocess
from pathlib import Path

import yaml
from tools import promtool

from .capture import Sample
from .compose import RULES, Series, read_by_rules

Firing = dict[int, list[dict[str, str]]]  # minute → the alerts firing then, each its labels


def expanded(values: list[float | None]) -> str:
    """promtool's expanding notation: a run of a constant step as ``a+bxn``, a minute without a sample as ``_``, and the
    minute after a series ends as ``stale`` (Prometheus marks a series gone from a scrape so)."""
    tokens: list[str] = []
    m = 0
    while m < len(values):
        value = values[m]
        if value is None:
            tokens.append("stale" if m > 0 and values[m - 1] is not None else "_")
            m += 1
            continue
        run, step = _run(values, m)
        if run:
            tokens.append(f"{value!r}{'+' if step >= 0 else '-'}{abs(step)!r}x{run}")
        else:
            tokens.append(repr(value))
        m += run + 1
    return " ".join(tokens)


def _run(values: list[float | None], m: int) -> tuple[int, float]:
    """How many values after ``m`` go on by the same step as the first of them, and that step."""
    first, second = values[m], values[m + 1] if m + 1 < len(values) else None
    if first is None or second is None:
        return 0, 0.0
    step, run = second - first, 0
    while m + run + 1 < len(values):
        before, after = values[m + run], values[m + run + 1]
        if before is None or after is None or not math.isclose(after - before, step, rel_tol=1e-9, abs_tol=1e-9):
            break
        run += 1
    return run, step


def series_name(sample: Sample) -> str:
    name, labels = sample
    quoted = ",".join('{}="{}"'.format(k, v.replace("\\", "\\\\").replace('"', '\\"')) for k, v in labels)
    return name + "{" + quoted + "}"


def firing_alerts(series: Series, minutes: int, start: float, workdir: Path, rules: Path = RULES) -> Firing:
    """``start``: the Unix time of minute 0 (promtool's ``start_timestamp``: the rules' ``time()`` is the range's)."""
    rules_text = rules.read_text()
    read = read_by_rules(rules_text)
    document = yaml.safe_load(rules_text)
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)  # their templates query nothing promtool can answer here
    (workdir / "rules.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    inputs = [{"series": series_name(s), "values": expanded(v)} for s, v in sorted(series.items()) if s[0] in read]
    checks = [{"expr": 'ALERTS{alertstate="firing"}', "eval_time": f"{m}m", "exp_samples": []} for m in range(minutes)]
    test = {"interval": "1m", "start_timestamp": int(start), "input_series": inputs, "promql_expr_test": checks}
    test_file = workdir / "fleet.test.yml"
    test_file.write_text(yaml.safe_dump({"rule_files": [str(workdir / "rules.yml")], "evaluation_interval": "1m", "tests": [test]}, width=1_000_000))
    result = subprocess.run([promtool(), "test", "rules", str(test_file)], capture_output=True, text=True, timeout=1800, check=False)
    firing = parse_promtool(result.stdout + result.stderr)
    if result.returncode != 0 and not firing:  # promtool failed for another reason than alerts firing
        raise AssertionError(f"promtool exited with {result.returncode}:\n" + (result.stdout + result.stderr)[-3000:])
    return firing


_FAILURE = re.compile(r'expr: "ALERTS\{alertstate=\\"firing\\"\}", time: ([0-9ywdhms]+),')  # a Prometheus duration
_SAMPLE = re.compile(r'\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\} 1E\+00')  # how promtool prints each sample it got
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unquoted(text: str) -> str:
    return re.sub(r'\\(["\\])', r"\1", text)


UNIT_MINUTES = {"y": 525_600, "w": 10_080, "d": 1440, "h": 60, "m": 1, "s": 0, "ms": 0}


def _minutes(duration: str) -> int:
    """A Prometheus duration as promtool prints it (``1d1h``, ``1w``, ``59m``) in whole minutes."""
    return sum(int(amount) * UNIT_MINUTES[unit] for amount, unit in re.findall(r"(\d+)(ms|[ywdhms])", duration))


def parse_promtool(output: str) -> Firing:
    """The alerts promtool says it got where none were expected, minute by minute; a failure of anything else (a rule
    that does not parse, an input it refuses) is an error, never a quiet day."""
    blocks = _FAILURE.split(output)
    if len(blocks) == 1 and "FAILED" in output:
        raise AssertionError("promtool failed without an ALERTS check failing:\n" + output[-3000:])
    firing: Firing = {}
    for index in range(1, len(blocks), 2):
        got = blocks[index + 1].split("got:", 1)[1] if "got:" in blocks[index + 1] else ""
        alerts = []
        for labels in _SAMPLE.findall(got):
            parsed = {k: unquoted(v) for k, v in _LABEL.findall(labels)}
            parsed.pop("__name__", None)
            parsed.pop("alertstate", None)
            alerts.append(parsed)
        firing[_minutes(blocks[index])] = alerts
    return firing
