"""Whether an estimate was checked by PyTorch itself, in one line and as the JSON ``verified``
field: a PyTorch import keeps what one measured step of the user's own code used
(``design.verified``, importers/_torch_check.py); at those settings the estimate is compared with
it, at any other settings it is the rules' alone, and a sketch (no code) has nothing to check.

    v = verdict(design, settings, report.peak_bytes)
    v["line"]  # "checked against PyTorch 2.14.1 on CPU: exact"
"""

from __future__ import annotations

from dataclasses import asdict, fields

from memdesigner.engine.settings import Settings
from memdesigner.units import format_bytes

EXACT_PCT = 0.01  # within this the check reads "exact"
RULES = "estimated from rules"


def _same(now: dict, checked: dict) -> bool:
    """Whether the settings ``now`` (as a dict) are the ones a check ran at (fields it did not
    store are defaults; the optimizer counts in training only)."""
    base = Settings()
    for f in fields(Settings):
        if f.name == "optimizer" and now.get("mode") != "train":
            continue
        want = checked.get(f.name, getattr(base, f.name))
        have = now.get(f.name, getattr(base, f.name))
        if _plain(have) != _plain(want):
            return False
    return True


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


def _describe(checked: dict) -> str:
    mode = "training" if checked.get("mode") == "train" else checked.get("mode", "inference")
    opt = f" ({checked['optimizer']})" if checked.get("mode") == "train" and checked.get("optimizer") else ""
    return f"batch {checked.get('batch', 1)} {mode}{opt}"


def _pct(diff: float) -> str:
    return f"{diff:+.2f} %"


def verdict(design, settings, estimate_peak: int | None = None) -> dict:
    """The ``verified`` field for an estimate of ``design`` at ``settings`` (Settings, or a
    report's settings dict); ``estimate_peak``:
    the estimate's peak now (the design may have been edited since the check), else the one the
    check stored. Keys: checked, line, and when checked: against, settings, measured_peak,
    estimate_peak, diff_pct, same_settings, differs."""
    v = getattr(design, "verified", None) or {}
    if not v:
        return {"checked": False, "line": RULES, "reason": "no code was run (a sketch or a non-PyTorch import)"}
    checks = v.get("checks") or []
    if not checks:
        return {"checked": False, "line": f"{RULES} ({v.get('skipped') or 'not checked'})",
                "reason": v.get("skipped") or "not checked"}
    now = settings if isinstance(settings, dict) else asdict(settings)
    hit = next((c for c in checks if _same(now, c["settings"])), None)
    against = v.get("against", "PyTorch")
    if hit is None:
        at = " and ".join(_describe(c["settings"]) for c in checks)
        first = checks[0]
        return {"checked": True, "against": against, "settings": first["settings"],
                "measured_peak": first["measured_peak"], "estimate_peak": first["estimate_peak"],
                "diff_pct": first["diff_pct"], "same_settings": False, "differs": first.get("differs", []),
                "line": f"checked against {against} at {at}; these settings are {RULES}"}
    measured = int(hit["measured_peak"])
    est = int(hit["estimate_peak"] if estimate_peak is None else estimate_peak)
    diff = round(100.0 * (est - measured) / measured, 3) if measured else 0.0
    out = {"checked": True, "against": against, "settings": hit["settings"], "measured_peak": measured,
           "estimate_peak": est, "diff_pct": diff, "same_settings": True,
           "differs": hit.get("differs", []) if est == int(hit["estimate_peak"]) else []}
    if abs(diff) <= EXACT_PCT:
        out["line"] = f"checked against {against}: exact"
        return out
    where = "; ".join(_differ_text(r) for r in out["differs"])
    out["line"] = (f"checked against {against}: differs by {_pct(diff)} (measured {format_bytes(measured, 2)})"
                   + (f": {where}" if where else ""))
    return out


def _differ_text(r: dict) -> str:
    ops = f" ({', '.join(r['ops'])})" if r.get("ops") else ""
    sign = "+" if r["bytes"] > 0 else "-"
    return f"{r['layer']}{ops} {sign}{format_bytes(abs(int(r['bytes'])))} in {r.get('phase', 'the step')}"


__all__ = ["EXACT_PCT", "RULES", "verdict"]
