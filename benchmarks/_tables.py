"""Formatting shared by the accuracy benchmarks (zoo and holdout)."""

MiB = 1024.0 * 1024.0
PHASES = ("forward", "backward", "optimizer_step")


def mib(b) -> str:
    return "-" if b is None else f"{b / MiB:.2f}"


def phase_cells(r: dict) -> list:
    """'estimated / measured' MiB per phase, '-' where the run has no such phase."""
    out = []
    for k in PHASES:
        if k in r["phase_measured"]:
            out.append(f"{mib(r['phase_estimated'].get(k))} / {mib(r['phase_measured'].get(k))}")
        else:
            out.append("-")
    return out
