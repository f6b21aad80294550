"""``memdesigner snapshot show|compare`` and ``memdesigner export snapshot``: the command line
side of PyTorch memory snapshots (memdesigner.cli registers and dispatches them)."""

from __future__ import annotations

import json

from memdesigner.cli.common import CliError, device, load, settings_args, settings_from
from memdesigner.snapshot.phases import PHASES
from memdesigner.units import format_bytes

PHASE_NAMES = {"forward": "forward", "backward": "backward", "optimizer_step": "optimizer step"}


def add_snapshot_parser(sub, settings_args) -> None:
    sp = sub.add_parser("snapshot", help="read a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot)")
    ss = sp.add_subparsers(dest="snapshot_cmd", parser_class=type(sp))
    show = ss.add_parser("show", help="peak allocated/reserved, phases and what is live at the peak")
    show.add_argument("snapshot")
    show.add_argument("--device", type=int, default=None, dest="snapshot_device",
                      help="CUDA device index in the snapshot (default: the one with the most events)")
    show.add_argument("--top", type=int, default=10, help="frames listed at the peak")
    show.add_argument("--format", choices=("table", "json"), default="table")
    cmp_ = ss.add_parser("compare", help="the snapshot's phase peaks beside the estimate of a design")
    cmp_.add_argument("snapshot")
    cmp_.add_argument("design")
    settings_args(cmp_)
    cmp_.add_argument("--snapshot-device", type=int, default=None, dest="snapshot_device")
    cmp_.add_argument("--top", type=int, default=5)
    cmp_.add_argument("--format", choices=("table", "json"), default="table")


def add_export_parser(esub, settings_args) -> None:
    es = esub.add_parser("snapshot", help="the estimate as a PyTorch memory snapshot (opens in memory_viz)")
    es.add_argument("design")
    es.add_argument("-o", "--output", required=True)
    settings_args(es)


def _read(args):
    from memdesigner.snapshot.reader import SnapshotError, load_snapshot
    from memdesigner.snapshot.replay import replay

    try:
        snap = load_snapshot(args.snapshot)
    except SnapshotError as err:
        raise CliError(str(err)) from None
    traces = snap.get("device_traces") or []
    dev = args.snapshot_device
    if dev is not None and not (0 <= dev < max(len(traces), 1)):
        raise CliError(f"{args.snapshot}: no device {dev} in the snapshot ({len(traces)} device traces)")
    try:
        return replay(snap, dev, top=max(args.top, 0))
    except (KeyError, TypeError, ValueError) as err:
        raise CliError(f"{args.snapshot}: malformed snapshot ({type(err).__name__}: {err})") from None


def _b(n) -> str:
    return f"{format_bytes(n, 2)} ({n:,} B)"


def _show_lines(path: str, rp) -> list[str]:
    d = rp.to_dict()
    out = [f"snapshot          {path} (device {rp.device}, {rp.n_events:,} events)"]
    if rp.n_events:
        out.append(f"peak allocated    {_b(rp.peak_allocated)} at event {d['peak_event']} "
                   f"({PHASE_NAMES[d['peak_phase']]})")
    else:
        out.append(f"allocated         {_b(rp.peak_allocated)} (no trace: record with "
                   "torch.cuda.memory._record_memory_history() for a timeline)")
    out.append(f"peak reserved     {_b(rp.peak_reserved)}")
    out.append(f"before recording  allocated {format_bytes(rp.initial_allocated, 2)}, reserved "
               f"{format_bytes(rp.initial_reserved, 2)} (live when the trace starts)")
    out.append(f"at the end        allocated {format_bytes(rp.end_allocated, 2)}, reserved "
               f"{format_bytes(rp.end_reserved, 2)}")
    if rp.spans:
        out.append("phases            " + ", ".join(f"{PHASE_NAMES[s.phase]} {s.start}-{s.end - 1}"
                                                    for s in rp.spans))
        pp = rp.phase_peaks()
        out.append("phase peaks       " + ", ".join(
            f"{PHASE_NAMES[p]} {format_bytes(v['allocated'], 2)} (reserved {format_bytes(v['reserved'], 2)})"
            for p, v in pp.items()))
    if rp.oom_events:
        out.append(f"out of memory     {rp.oom_events} oom event(s) in the trace")
    if rp.top_at_peak:
        out.append("live at the peak:")
        for lbl, b in rp.top_at_peak:
            out.append(f"  {format_bytes(b):>11}  {lbl}")
    if rp.categories_at_peak:
        out.append("by category       " + ", ".join(f"{k} {format_bytes(v)}" for k, v in rp.categories_at_peak.items()))
    return out


def _pct(est: int, meas: int) -> float | None:
    return None if not meas else round((est - meas) / meas * 100, 2)


def compare_rows(rp, report) -> list[dict]:
    """Phase by phase: the snapshot's allocated peak, the estimate's peak with allocator rounding
    (what allocator blocks add up to) and without, and the error in % of the snapshot."""
    rounded = {}
    for e in report.timeline:
        rounded[e.phase] = max(rounded.get(e.phase, 0), e.device_bytes)
    pp = rp.phase_peaks()
    rows = []
    for p in PHASES:
        if p not in pp and p not in report.phase_peaks:
            continue
        if p not in pp and not report.phase_peaks.get(p):
            continue
        snap_b = pp.get(p, {}).get("allocated")
        est = rounded.get(p, report.phase_peaks.get(p, 0))
        rows.append({"phase": p, "snapshot_bytes": snap_b, "estimate_bytes": est,
                     "estimate_tensor_bytes": report.phase_peaks.get(p, 0),
                     "error_pct": _pct(est, snap_b) if snap_b is not None else None})
    est_peak = max(rounded.values()) if rounded else report.peak_bytes
    rows.append({"phase": "peak", "snapshot_bytes": rp.peak_allocated, "estimate_bytes": est_peak,
                 "estimate_tensor_bytes": report.peak_bytes, "error_pct": _pct(est_peak, rp.peak_allocated)})
    return rows


def add_parser(sub) -> None:
    add_snapshot_parser(sub, settings_args)


def run(args) -> int:
    if args.snapshot_cmd == "show":
        rp = _read(args)
        if args.format == "json":
            print(json.dumps({"snapshot": args.snapshot, **rp.to_dict()}, indent=2))
        else:
            print("\n".join(_show_lines(args.snapshot, rp)))
        return 0
    if args.snapshot_cmd == "compare":
        from memdesigner.engine.estimate import estimate

        design = load(args.design)
        settings = settings_from(args, design)
        dev = device(args, design)
        rp = _read(args)
        report = estimate(design, settings, device=dev)
        if report.issues:
            raise CliError(f"{args.design}: {report.issues[0]}")
        rows = compare_rows(rp, report)
        if args.format == "json":
            print(json.dumps({"snapshot": {"path": args.snapshot, **rp.to_dict()},
                              "estimate": {"design": args.design, "settings": report.settings,
                                           "peak_bytes": report.peak_bytes, "phase_peaks": report.phase_peaks},
                              "rows": rows}, indent=2))
            return 0
        print("\n".join(_show_lines(args.snapshot, rp)))
        print()
        print(f"estimate          {args.design} ({report.settings['mode']}, batch {report.settings['batch']}, "
              f"{report.settings['optimizer'] if report.settings['mode'] == 'train' else 'no optimizer'}, "
              f"{report.settings['dtype']}, {report.settings['backend']})")
        print(f"{'':<16}{'snapshot':>16}{'estimate':>16}{'error':>10}")
        for r in rows:
            name = "peak" if r["phase"] == "peak" else PHASE_NAMES[r["phase"]]
            snap_s = format_bytes(r["snapshot_bytes"], 2) if r["snapshot_bytes"] is not None else "-"
            err = f"{r['error_pct']:+.2f} %" if r["error_pct"] is not None else "-"
            print(f"{name:<16}{snap_s:>16}{format_bytes(r['estimate_bytes'], 2):>16}{err:>10}")
        print("(allocated: allocator blocks, as torch.cuda.memory_allocated(); the estimate with the "
              "allocator's 512-byte rounding)")
        return 0
    raise CliError("snapshot needs a command: show or compare")


def cmd_export_snapshot(args) -> int:
    from memdesigner.snapshot.writer import write_estimate_snapshot

    design = load(args.design)
    settings = settings_from(args, design)
    dev = device(args, design)
    try:
        rep = write_estimate_snapshot(args.output, design, settings, device=dev)
    except ValueError as err:
        raise CliError(f"{args.design}: {err}") from None
    except OSError as err:
        from memdesigner.io.atomic_write import cannot_write

        raise CliError(cannot_write(args.output, err)) from None
    print(f"{args.output} (peak {format_bytes(rep.peak_bytes, 2)}; open it at pytorch.org/memory_viz)")
    return 0
