"""Design files: versioned JSON (``"format": "memdesigner-design"``), validated on load with an
error that names the field path; saved atomically (temporary file, then rename)."""

from __future__ import annotations

import json
import os
import tempfile
from importlib import resources
from pathlib import Path

from memdesigner.model import registry
from memdesigner.model.design import Design
from memdesigner.model.registry import LayerError

FORMAT = "memdesigner-design"
VERSION = 1


class DesignFileError(ValueError):
    """A design file that cannot be loaded; the message names the field path and the problem."""


_SCHEMA = None


def schema() -> dict:
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = json.loads(resources.files("memdesigner.resources").joinpath("design.schema.json").read_text())
    return _SCHEMA


def _path_str(path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _upgrade(data: dict) -> dict:
    """Bring an older version up to the current one (version 1 is the first; later versions add
    migrations here so old files stay loadable)."""
    return data


def design_from_dict(data, source: str = "design") -> Design:
    import jsonschema

    if not isinstance(data, dict):
        raise DesignFileError(f"{source}: (top level): expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise DesignFileError(f"{source}: format: expected {FORMAT!r}, got {data.get('format')!r}")
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise DesignFileError(f"{source}: version: {version} is newer than this memdesigner reads ({VERSION})")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        e = errors[0]
        raise DesignFileError(f"{source}: {_path_str(e.absolute_path)}: {e.message}")
    data = _upgrade(data)
    d = Design(name=data.get("name", "untitled"), channels_last=bool(data.get("channels_last", False)))
    d.settings = dict(data.get("settings", {}))
    d.description = data.get("description", "")
    for i, nd in enumerate(data["nodes"]):
        where = f"nodes[{i}]"
        if nd["id"] in d.nodes:
            raise DesignFileError(f"{source}: {where}.id: duplicate node id {nd['id']!r}")
        if not registry.has(nd["type"]):
            raise DesignFileError(f"{source}: {where}.type: unknown layer type {nd['type']!r}")
        lt = registry.get(nd["type"])
        props = nd.get("props", {})
        for k, v in props.items():
            try:
                lt.prop(k)
            except KeyError:
                raise DesignFileError(f"{source}: {where}.props.{k}: {lt.name} has no property {k!r}") from None
            try:
                lt.prop(k).coerce(v)
            except LayerError as err:
                raise DesignFileError(f"{source}: {where}.props.{k}: {err.message}") from None
        d.add_node(lt.name, props, id=nd["id"], name=nd.get("name"), pos=tuple(nd.get("pos", (0, 0))),
                   bits=nd.get("bits"), scope=nd.get("scope", ""), keep_until=nd.get("keep_until", ""),
                   tied=nd.get("tied"), fused=nd.get("fused", ""), output=bool(nd.get("output", False)))
    for i, ed in enumerate(data["edges"]):
        where = f"edges[{i}]"
        for end in ("from", "to"):
            if ed[end] not in d.nodes:
                raise DesignFileError(f"{source}: {where}.{end}: no node with id {ed[end]!r}")
        try:
            d.add_edge(ed["from"], ed["to"], ed.get("from_port", 0), ed.get("to_port", 0))
        except ValueError as err:
            raise DesignFileError(f"{source}: {where}: {err}") from None
    return d


def design_to_dict(d: Design) -> dict:
    out = {"format": FORMAT, "version": VERSION, "name": d.name}
    if getattr(d, "description", ""):
        out["description"] = d.description
    if d.channels_last:
        out["channels_last"] = True
    if d.settings:
        out["settings"] = dict(d.settings)
    nodes = []
    for n in d.nodes.values():
        lt = n.layer
        props = {}
        for p in lt.props:
            v = n.props.get(p.name, p.default)
            if v != p.default:
                props[p.name] = list(v) if isinstance(v, tuple) else v
        nd = {"id": n.id, "type": n.type}
        if n.name != n.id:
            nd["name"] = n.name
        if props:
            nd["props"] = props
        nd["pos"] = [round(float(n.pos[0]), 1), round(float(n.pos[1]), 1)]
        if n.bits is not None:
            nd["bits"] = n.bits
        if n.scope:
            nd["scope"] = n.scope
        if n.keep_until:
            nd["keep_until"] = n.keep_until
        if n.tied:
            nd["tied"] = dict(n.tied)
        if n.fused:
            nd["fused"] = n.fused
        if n.output:
            nd["output"] = True
        nodes.append(nd)
    out["nodes"] = nodes
    out["edges"] = [
        {"from": e.src, "to": e.dst, **({"from_port": e.src_port} if e.src_port else {}),
         **({"to_port": e.dst_port} if e.dst_port else {})}
        for e in d.edges
    ]
    return out


def load_design(path) -> Design:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise DesignFileError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise DesignFileError(f"{path}: line {err.lineno} column {err.colno}: invalid JSON: {err.msg}") from None
    return design_from_dict(data, str(path))


def save_design(d: Design, path) -> None:
    """Write to a temporary file in the same folder, then rename over the target."""
    path = Path(path)
    text = json.dumps(design_to_dict(d), indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=str(path.parent or "."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
