"""Design files: versioned JSON (``"format": "memdesigner-design"``), validated on load with an
error that names the field path; saved atomically (temporary file, then rename)."""

from __future__ import annotations

import copy
import json
import math
from importlib import resources
from pathlib import Path

from memdesigner.io.atomic_write import write_atomic
from memdesigner.io.bounded_read import BoundedReadError, depth_message, path_text, read_bytes, too_deep
from memdesigner.limits import DEFAULTS
from memdesigner.model import registry
from memdesigner.model.design import Design
from memdesigner.model.registry import LayerError

FORMAT = "memdesigner-design"
VERSION = 2  # 2: block definitions ("blocks", io/design_blocks.py); version-1 files load unchanged


class DesignFileError(ValueError):
    """A design file that cannot be loaded; the message is one line naming the file, the field
    path and the problem. The only exception ``load_design`` and ``design_from_dict`` raise for
    bad content (unreadable, not UTF-8/UTF-16 text, invalid JSON, too deeply nested, failing the
    schema or a layer's rules)."""


MAX_PORT = 4096  # inputs of one node (a Concat of thousands is already far beyond any model)
MAX_DEPTH = DEFAULTS["JSON_DEPTH"]  # a design nests about 6 deep; MEMDESIGNER_MAX_JSON_DEPTH changes it


def _too_deep(data) -> list | None:
    """The path to a value nested deeper than the depth limit, or None (io/bounded_read.py)."""
    return too_deep(data)


def _reject_constant(name):
    raise DesignFileError(f"{name} is not a number JSON allows")


def parse_design_text(data: bytes | str, source: str) -> object:
    """JSON from a file's bytes: UTF-8 (with or without BOM) or UTF-16/32 as JSON detects it;
    NaN/Infinity, integers of thousands of digits and absurd nesting are refused in one line."""
    if isinstance(data, bytes):
        enc = json.detect_encoding(data)
        try:
            text = data.decode(enc)
        except UnicodeDecodeError as err:
            raise DesignFileError(f"{source}: byte 0x{data[err.start]:02x} at offset {err.start} is not "
                                  f"{enc.upper()} text (save the file as UTF-8)") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise DesignFileError(f"{source}: line {err.lineno} column {err.colno}: invalid JSON: {err.msg}") from None
    except DesignFileError as err:
        raise DesignFileError(f"{source}: invalid JSON: {err}") from None
    except RecursionError:
        raise DesignFileError(f"{source}: invalid design: {depth_message()}") from None
    except ValueError as err:  # e.g. an integer literal over Python's 4,300-digit limit
        raise DesignFileError(f"{source}: invalid JSON: {str(err).splitlines()[0]}") from None


_SCHEMA = None


def schema() -> dict:
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = json.loads(resources.files("memdesigner.resources").joinpath("design.schema.json").read_text())
    return _SCHEMA


_path_str = path_text


def _upgrade(data: dict) -> dict:
    """Bring an older version up to the current one (version 1 is the first; later versions add
    migrations here so old files stay loadable)."""
    return data


_FAST = None


def schema_error(data) -> tuple[list, str] | None:
    """The first schema violation as (field path, message), or None. A compiled validator
    (fastjsonschema) passes valid files quickly and stops at the first error, so a 10^6-edge file
    is not walked in full before ``edges[9]`` is reported; jsonschema then words the message
    from the one item (or the top level without the node and edge lists) that holds the error."""
    global _FAST
    import fastjsonschema
    import jsonschema

    if _FAST is None:
        _FAST = fastjsonschema.compile(schema())
    try:
        _FAST(data)
        return None
    except fastjsonschema.JsonSchemaValueException as err:
        path = _fast_path(data, err.path[1:])
        fallback = (path, err.message)
    if len(path) >= 2 and path[0] in ("nodes", "edges") and isinstance(path[1], int):
        part, part_schema, prefix = data[path[0]][path[1]], schema()["properties"][path[0]]["items"], path[:2]
    else:
        part = {k: ([] if k in ("nodes", "edges") and isinstance(v, list) else v) for k, v in data.items()}
        part_schema, prefix = schema(), []
    errors = sorted(jsonschema.Draft202012Validator(part_schema).iter_errors(part),
                    key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if not errors:
        return fallback
    return prefix + list(errors[0].absolute_path), errors[0].message


def _fast_path(data, names) -> list:
    """fastjsonschema names list indices as strings: turn them back into ints."""
    out, node = [], data
    for name in names:
        if isinstance(node, list) and name.isdigit():
            name = int(name)
            node = node[name] if name < len(node) else None
        elif isinstance(node, dict):
            node = node.get(name)
        else:
            node = None
        out.append(name)
    return out


MAX_POS = 1e9  # canvas coordinates beyond this overflow Qt's scene (and mean nothing)


def _canvas_coordinate(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, int):
        return abs(v) <= MAX_POS
    return math.isfinite(v) and abs(v) <= MAX_POS


def _short(value) -> str:
    try:
        text = repr(value)
    except ValueError:  # an int too long to print
        return "a huge number"
    return text if len(text) <= 60 else text[:57] + "..."


def design_from_dict(data, source: str = "design") -> Design:
    if not isinstance(data, dict):
        raise DesignFileError(f"{source}: (top level): expected a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        raise DesignFileError(f"{source}: format: expected {FORMAT!r}, got {data.get('format')!r}")
    deep = _too_deep(data)
    if deep is not None:
        raise DesignFileError(f"{source}: {_path_str(deep[:3])}: {depth_message()}")
    version = data.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise DesignFileError(f"{source}: version: {version} is newer than this memdesigner reads ({VERSION})")
    problem = schema_error(data)
    if problem:
        msg = problem[1] if len(problem[1]) <= 160 else problem[1][:150] + " ..."
        raise DesignFileError(f"{source}: {_path_str(problem[0])}: {msg}")
    data = _upgrade(data)
    d = Design(name=data.get("name", "untitled"), channels_last=bool(data.get("channels_last", False)))
    d.settings = dict(data.get("settings", {}))
    d.description = data.get("description", "")
    d.param_order = list(data.get("param_order", ()))
    d.library_versions = dict(data.get("library_versions", {}))
    d.verified = copy.deepcopy(data.get("verified", {}))
    for i, nd in enumerate(data["nodes"]):
        where = f"nodes[{i}]"
        if nd["id"] in d.nodes:
            raise DesignFileError(f"{source}: {where}.id: duplicate node id {nd['id']!r}")
        if registry.canonical(nd["type"]) is None:
            hint = ""
            if registry.has(nd["type"]):
                hint = f" (an alias of {registry.get(nd['type']).name}, which a design file must name with its props)"
            raise DesignFileError(f"{source}: {where}.type: unknown layer type {nd['type']!r}{hint}")
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
        pos = tuple(nd.get("pos", (0, 0)))
        if not all(_canvas_coordinate(v) for v in pos):
            raise DesignFileError(f"{source}: {where}.pos: {_short(pos)} is not a canvas position "
                                  f"(finite numbers within ±{MAX_POS:.0e})")
        d.add_node(lt.name, props, id=nd["id"], name=nd.get("name"), pos=pos, bits=nd.get("bits"),
                   **node_fields(nd))
    problem = None
    for i, ed in enumerate(data["edges"]):
        where = f"edges[{i}]"
        missing = next((end for end in ("from", "to") if ed[end] not in d.nodes), None)
        if missing:
            problem = f"{where}.{missing}: no node with id {ed[missing]!r}"
            break
        ports = []
        for key in ("from_port", "to_port"):
            port = ed.get(key, 0)
            if not isinstance(port, int) or port >= MAX_PORT:
                problem = f"{where}.{key}: {port!r} is not a port number below {MAX_PORT}"
                break
            ports.append(port)
        if problem:
            break
        try:
            d.add_edge(ed["from"], ed["to"], *ports, check_cycle=False)
        except ValueError as err:
            problem = f"{where}: {err}"
            break
    # cycles: one search over the edges before the first other problem (one per edge is quadratic)
    bad = d.find_cycle_edge()
    if bad is not None:
        problem = f"edges[{bad}]: this connection would make a cycle"
    if problem:
        raise DesignFileError(f"{source}: {problem}")
    load_blocks(d, data.get("blocks", ()), source)
    return d


def node_fields(nd: dict) -> dict:
    """A node dict's fields beyond id, type, name, props, pos and bits, as Design.add_node's
    keywords: what design_to_dict writes, read back by load, autosave recovery and paste alike."""
    return {"scope": nd.get("scope", ""), "keep_until": nd.get("keep_until", ""), "tied": nd.get("tied"),
            "fused": nd.get("fused", ""), "layout": nd.get("layout", ""), "output": bool(nd.get("output", False)),
            "trainable": nd.get("trainable") is not False}


def node_to_dict(n) -> dict:
    """One node as the design file writes it (save, autosave, its journal and the clipboard)."""
    props = {}
    for p in n.layer.props:
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
    if n.layout:
        nd["layout"] = n.layout
    if n.output:
        nd["output"] = True
    if not n.trainable:
        nd["trainable"] = False
    return nd


def edge_to_dict(e) -> dict:
    return {"from": e.src, "to": e.dst, **({"from_port": e.src_port} if e.src_port else {}),
            **({"to_port": e.dst_port} if e.dst_port else {})}


def copy_design(d: Design) -> Design:
    """A deep, checked copy: the design written and read back as its file would be (the engine and
    the window use Design.detached_copy, which skips the check)."""
    return design_from_dict(design_to_dict(d))


def design_to_dict(d: Design) -> dict:
    out = {"format": FORMAT, "version": VERSION, "name": d.name}
    if getattr(d, "description", ""):
        out["description"] = d.description
    if d.channels_last:
        out["channels_last"] = True
    if d.settings:
        out["settings"] = dict(d.settings)
    if getattr(d, "param_order", None):
        out["param_order"] = list(d.param_order)
    if getattr(d, "library_versions", None):
        out["library_versions"] = dict(d.library_versions)
    if getattr(d, "verified", None):
        out["verified"] = copy.deepcopy(d.verified)  # (the file's dict must not be the design's own)
    nodes = [node_to_dict(n) for n in d.nodes.values()]
    out["nodes"] = nodes
    out["edges"] = [edge_to_dict(e) for e in d.edges]
    if getattr(d, "blocks", None):
        out["blocks"] = blocks_to_list(d)
    else:  # nothing a version-1 reader would miss: older memdesigners keep reading it
        out["version"] = 1
    return out


def load_blocks(d: Design, blocks, source: str) -> None:
    """Version 2: each block definition is a graph saved once, read with the same rules as the
    design's own nodes and edges."""
    from memdesigner.model.blocks import BlockDef

    for i, bd in enumerate(blocks):
        if bd["name"] in d.blocks:
            raise DesignFileError(f"{source}: blocks[{i}].name: duplicate block definition {bd['name']!r}")
        g = design_from_dict({"format": FORMAT, "version": VERSION, "name": bd["name"], "nodes": bd["nodes"],
                              "edges": bd["edges"]}, f"{source}: blocks[{i}]")
        g.blocks = d.blocks  # nested instances resolve in the design's library
        d.blocks[bd["name"]] = BlockDef(bd["name"], g, bool(bd.get("stack", False)))


def blocks_to_list(d: Design) -> list:
    out = []
    for name, bd in d.blocks.items():
        g = design_to_dict(bd.graph) if not bd.graph.blocks else _graph_only(bd.graph)
        out.append({"name": name, **({"stack": True} if bd.stack else {}), "nodes": g["nodes"], "edges": g["edges"]})
    return out


def _graph_only(g: Design) -> dict:
    """A definition's graph shares the design's library; write its nodes and edges only."""
    lib, g.blocks = g.blocks, {}
    try:
        return design_to_dict(g)
    finally:
        g.blocks = lib


def load_design(path) -> Design:
    """Read and validate a design file. Raises DesignFileError (one line naming the file and the
    field) and nothing else for a missing, unreadable or malformed file."""
    path = Path(path)
    try:
        data = read_bytes(path, "design file")
    except BoundedReadError as err:
        raise DesignFileError(str(err)) from None
    return design_from_dict(parse_design_text(data, str(path)), str(path))


def design_text(d: Design) -> str:
    """The design file's text: the one serializer of save, autosave and (for a selection) the
    clipboard."""
    return json.dumps(design_to_dict(d), indent=2) + "\n"


def save_design(d: Design, path) -> None:
    """Write the design file atomically (io/atomic_write.py): a full disk or a kill leaves the
    old file whole."""
    write_atomic(path, design_text(d))
