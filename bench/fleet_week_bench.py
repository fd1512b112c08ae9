"""The simulated fleet-week: what the rendered rules and Alertmanager configuration page on, judged per incident class
(tests/fleetsim; CI runs one day of it in tests/test_fleet_day.py).

    python bench/fleet_week_bench.py [--days 7] [--shards 25] [--polled 6] [--seed 11]

Starts two redis-servers and the exporter to capture the states, runs moto in this process for CloudWatch (fake
credentials, no AWS endpoint), and promtool from PATH or ~/go/bin. Prints the table docs/alerts.md quotes, the precision,
the recall and the time each part took.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fleetsim import simulate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--shards", type=int, default=25, help="shards of two Redis nodes each")
    parser.add_argument("--polled", type=int, default=6, help="nodes polled from CloudWatch")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "eu-west-1"}.items():
        os.environ[name] = value
    os.environ.pop("AWS_ENDPOINT_URL", None)
    with tempfile.TemporaryDirectory(prefix="fleet-week-") as workdir:
        report = simulate(Path(workdir), days=args.days, shards=args.shards, polled=args.polled, seed=args.seed)
    print(f"{args.days} days, {2 * args.shards} Redis nodes, {args.polled} CloudWatch nodes, seed {args.seed}")
    print(report.table())
    print("\n" + ", ".join(f"{part} {seconds:.0f} s" for part, seconds in report.timings.items()))
    return 0 if report.precision == 1.0 and report.recall == 1.0 and not report.late() else 1


if __name__ == "__main__":
    sys.exit(main())
