"""`memdesigner devices [--format json]`: the device profiles, shipped and the user's."""

from __future__ import annotations

import json

from memdesigner.units import format_gib


def add_parser(sub) -> None:
    sub.add_parser("devices", help="list device profiles").add_argument("--format", choices=("table", "json"),
                                                                        default="table")


def run(args) -> int:
    from memdesigner.engine.devices import all_devices, warn_device_file_problems

    warn_device_file_problems()
    devs = all_devices()
    if args.format == "json":
        print(json.dumps([d.to_dict() for d in devs], indent=2))
        return 0
    print(f"{'id':<24} {'name':<34} {'kind':<5} {'memory':>10} {'runtime':>10}")
    for d in devs:  # one unit for every row, so rows compare at a glance
        print(f"{d.id:<24} {d.name[:34]:<34} {d.kind:<5} {format_gib(d.memory_bytes):>10} "
              f"{format_gib(d.runtime_overhead_bytes, 2):>10}{'  (user)' if d.user else ''}")
    return 0
