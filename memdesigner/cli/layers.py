"""`memdesigner layers`: the layer types, by family, with their properties."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("layers", help="list layer types")


def run(args) -> int:
    from memdesigner.model import registry

    for fam, types in registry.by_family().items():
        print(f"{fam}:")
        for t in types:
            props = ", ".join(f"{p.name}={p.default!r}" for p in t.props)
            print(f"  {t.name:<26} {props}")
            print(f"  {'':<26} keeps for backward: {t.keeps_for_backward or '-'}")
    return 0
