"""Python's references in the model's own code: which values local names hold until they are
rebound or ``forward`` returns, read from the source lines of each op's stack trace
(Node.keep_until)."""

from __future__ import annotations

import re

from memdesigner.importers._torch_values import Val, _State

_FRAME = re.compile(r'\s*File "([^"]+)", line (\d+), in (\w+)')


def _forward_frames(fxn) -> list:
    """The ``forward`` frames an op ran in, outermost first: [(owner module key, file, line,
    code)]. The i-th forward frame belongs to the root module (i = 0) or to the i-th entry of the
    op's nn_module_stack; a leaf module called by the op has no frame of its own."""
    trace = fxn.meta.get("stack_trace") or ""
    lines = str(trace).splitlines()
    nms = fxn.meta.get("nn_module_stack") or {}
    stack = list(nms.keys())
    vals = list(nms.values())
    if vals and isinstance(vals[0], tuple) and vals[0][0] == "":
        stack = stack[1:]  # torch.export lists the root module itself first
    owners = [""] + stack
    out = []
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if not m or m.group(3) != "forward" or i + 1 >= len(lines) or "/torch/fx/" in m.group(1):
            continue
        k = len(out)
        if k >= len(owners):
            break
        line, code = _statement(m.group(1), int(m.group(2)), lines[i + 1].strip())
        out.append((owners[k], m.group(1), line, code))
    return out


_STATEMENTS: dict = {}


def _statement(file: str, line: int, code: str) -> tuple:
    """The whole simple statement a source line belongs to: (its first line, its source).

    A stack trace shows one line, but ``x = f(\n  a,\n)`` spans several, and each op of it may
    name another line; keying on the statement keeps them one binding."""
    table = _STATEMENTS.get(file)
    if table is None:
        import ast
        import linecache

        table = {}
        src = "".join(linecache.getlines(file))
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            simple = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)
            for node in ast.walk(tree):
                if isinstance(node, simple) and node.end_lineno and node.end_lineno > node.lineno:
                    seg = ast.get_source_segment(src, node)
                    if seg:
                        # one line, without comments (a "# ..." inside the call's parentheses
                        # would swallow the rest of the joined line)
                        seg = " ".join(part.strip() for part in _without_comments(seg).splitlines())
                        for ln in range(node.lineno, node.end_lineno + 1):
                            table[ln] = (node.lineno, seg)
        _STATEMENTS[file] = table
    return table.get(line, (line, code))


def _without_comments(src: str) -> str:
    import io
    import tokenize

    try:
        toks = [t for t in tokenize.generate_tokens(io.StringIO(src).readline) if t.type != tokenize.COMMENT]
        return tokenize.untokenize(toks)
    except (tokenize.TokenError, IndentationError, SyntaxError, ValueError):
        return src


_LOOP_LINES: dict = {}


def _in_loop(file: str, line: int) -> bool:
    """Whether a source line sits inside a for/while loop (each pass binds anew)."""
    lines = _LOOP_LINES.get(file)
    if lines is None:
        import ast
        import linecache

        lines = set()
        try:
            tree = ast.parse("".join(linecache.getlines(file)))
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            for node in ast.walk(tree):
                if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                    for sub in node.body:
                        for inner in ast.walk(sub):
                            if hasattr(inner, "lineno"):
                                lines.add(inner.lineno)
        _LOOP_LINES[file] = lines
    return line in lines


def _assigned_names(code: str) -> list:
    """Names that a single-line ``a = <tensor expression>`` binds (not tuples, lists, sizes)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.Assign, ast.AnnAssign)):
        return []
    stmt = tree.body[0]
    value = stmt.value
    if isinstance(value, ast.IfExp):
        # ``y = self.ln(h) if self.pre else h``: the branch that ran made the line's ops (a bare
        # name makes none, so no value is bound by this line then)
        value = value.orelse if isinstance(value.body, ast.Name) else value.body
    if not isinstance(value, (ast.Call, ast.BinOp, ast.UnaryOp, ast.Subscript)):
        return []
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in (
            "pop", "size", "dim", "numel", "item", "tolist"):
        return []
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if not names and len(targets) == 1 and isinstance(targets[0], ast.Tuple) and targets[0].elts \
            and isinstance(targets[0].elts[0], ast.Name) and _is_module_call(value):
        # ``out, h = self.gru(x)``: the first name holds the module's first output (the one a
        # design node's keep_until keeps), even when it is ``_`` and never read again
        names = [targets[0].elts[0].id]
    return names


def _unpacked_views(code: str) -> list:
    """``q, k, v = self.qkv(h).view(...).permute(...)``, ``a, b = x.chunk(2, -1)``: unpacking
    one tensor expression (not a module call: its elements are its outputs) binds each name to a
    view of the expression's last result, whose storage they keep alive together."""
    import ast

    target, value = _one_assignment(code)
    if target is None or not isinstance(target, (ast.Tuple, ast.List)) or _is_module_call(value):
        return []
    if not all(isinstance(e, ast.Name) for e in target.elts) or not isinstance(value, (ast.Call, ast.Subscript)):
        return []
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):  # zip(...), map(...), a function
        return []
    return [e.id for e in target.elts]


def _one_assignment(code: str) -> tuple:
    """The (target, value) of a statement that is one plain ``target = value`` assignment,
    else (None, None)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None, None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign) or len(tree.body[0].targets) != 1:
        return None, None
    return tree.body[0].targets[0], tree.body[0].value


def _unpacked_names(code: str) -> list:
    """``a, _ = self.attn(...)``: the name each element of a module call's tuple is bound to
    (None where the target is no plain name); empty for any other statement."""
    import ast

    target, value = _one_assignment(code)
    if target is None:
        return []
    if not isinstance(target, (ast.Tuple, ast.List)) or not _is_module_call(value):
        return []
    return [e.id if isinstance(e, ast.Name) else None for e in target.elts]


def _is_module_call(value) -> bool:
    """``self.child(...)``: one call of a submodule, nothing chained after it (a chain such as
    ``self.qkv(x).unbind(0)`` binds views made by its last op instead)."""
    import ast

    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "self")


def _unpacked_per_item(code: str) -> list:
    """``a, b = (f(t) for t in (x, y))``, ``[... for t in ...]`` or ``map(fn, (x, y))``: the names
    that each take one item's result, in order (empty for any other statement)."""
    import ast

    target, value = _one_assignment(code)
    if target is None:
        return []
    if not isinstance(target, (ast.Tuple, ast.List)) or not all(isinstance(e, ast.Name) for e in target.elts):
        return []
    if isinstance(value, (ast.GeneratorExp, ast.ListComp)):
        items = value.generators[0].iter if len(value.generators) == 1 else None
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "map" \
            and len(value.args) == 2:
        items = value.args[1]
    else:
        return []
    if not isinstance(items, (ast.Tuple, ast.List)) or len(items.elts) != len(target.elts):
        return []
    return [e.id for e in target.elts]


def _python_locals(st: _State, gm) -> None:
    """Eager PyTorch frees a tensor when its last Python reference goes, not after its last op:
    ``q = q * self.scale`` keeps q until q is rebound or ``forward`` returns. From the source
    lines in each op's stack trace, find the values bound to local names in every forward frame
    and set ``keep_until`` on their design nodes: the end of the statement that rebinds the
    name, or the frame's last op."""
    frames: dict = {}  # (owner, file) -> list of [line, code, last design node of the run]
    frame_end: dict = {}
    for fxn in gm.graph.nodes:
        if fxn.op not in ("call_module", "call_function", "call_method"):
            continue
        v = st.vals.get(fxn)
        nid = v.nid if isinstance(v, Val) else None
        chain = _forward_frames(fxn)
        if nid in st.held:  # bound by its tuple position below, not the statement's last op
            if chain:
                key = chain[-1][:2]
                runs = frames.get(key)
                if runs and runs[-1][0] == chain[-1][2]:
                    runs[-1][6][st.held[nid]] = nid
            continue
        leaf = str(fxn.target) if fxn.op == "call_module" else None
        for k, (owner, file, line, code) in enumerate(chain):
            key = (owner, file)
            # the module this statement called: a loop (for b in blocks: x = b(x)) runs the same
            # line once per child, and each execution binds its own value
            child = chain[k + 1][0] if k + 1 < len(chain) else leaf
            # what this op is to the statement: the module it went through (indices folded, so
            # blocks.0 and blocks.1 look alike) or the function it called
            sig = re.sub(r"\.\d+", ".#", child) if child else f"fn:{fxn.target}"
            runs = frames.setdefault(key, [])
            last = runs[-1] if runs else None
            # a loop line (for b in blocks: x = b(x)) executes once per pass: a pass starts again
            # when the statement's first call recurs on another module than the previous op's
            new_pass = (last is not None and last[0] == line and child != last[4] and sig == last[3]
                        and _in_loop(file, line))
            if last is not None and last[0] == line and not new_pass:
                if nid:
                    last[2] = nid
                    last[5].append(nid)
                last[4] = child
            else:
                runs.append([line, code, nid, sig, child, [nid] if nid else [], {}])
            if nid:
                frame_end[key] = nid
    for key, runs in frames.items():
        end = frame_end.get(key)
        bound: dict = {}  # name -> design node holding its value
        for _line, code, last, _sig, _child, nids, held in runs:
            names = _assigned_names(code)
            values = [last] * len(names)
            if held:  # a, _ = self.attn(x, x, x): the later names hold their own elements
                elts = _unpacked_names(code)
                extra = [(elts[i], h) for i, h in held.items() if i < len(elts) and elts[i]]
                names, values = names + [n for n, _ in extra], values + [h for _, h in extra]
            per_item = _unpacked_per_item(code)
            if per_item and nids and len(nids) % len(per_item) == 0:
                # q, k, v = (f(t) for t in (q, k, v)): each name gets the last op of its own item
                step = len(nids) // len(per_item)
                names, values = per_item, [nids[(i + 1) * step - 1] for i in range(len(per_item))]
            if not names:
                names = _unpacked_views(code)
                values = [last] * len(names)
            if not names or not last:
                continue
            for name, value in zip(names, values):
                old = bound.pop(name, None)
                if old is not None and old != last:
                    _keep(st, old, last)
                bound[name] = value
        for nid in set(bound.values()):
            if end and nid != end:
                _keep(st, nid, end)


def _keep(st: _State, nid: str, until: str) -> None:
    node = st.design.nodes.get(nid)
    if node is None or until not in st.design.nodes:
        return
    order = list(st.design.nodes)
    if order.index(until) > order.index(nid) and (
            not node.keep_until or order.index(until) > order.index(node.keep_until)):
        node.keep_until = until
