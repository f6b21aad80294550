"""`memdesigner report`: the seed Keras audio CNN's numbers, the per-layer rows the CSV export
writes, the verdict on every device, escaping of hostile names, and bad input (exit 2)."""

import csv
import re
from html.parser import HTMLParser

import pytest
from helpers import EXAMPLES, sequential

from memdesigner.cli import main
from memdesigner.engine.devices import get_device, shipped_devices
from memdesigner.engine.estimate import estimate
from memdesigner.engine.report import CSV_COLUMNS, write_layers_csv
from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import load_design
from memdesigner.reports import collect, write_report
from memdesigner.reports import content as content_mod
from memdesigner.reports.markdown import md, render_markdown
from memdesigner.reports.svg_timeline import timeline_svg

SEED = EXAMPLES / "seed_keras_audio.json"
TRAIN_ADAM = Settings(mode="train", optimizer="adam", batch=1)
GiB, MiB = 1024**3, 1024**2


@pytest.fixture(scope="module")
def seed_content():
    return collect(load_design(SEED), TRAIN_ADAM, get_device("rtx3080-10gb"))


class _Cells(HTMLParser):
    """Rows of the table with id=layer-table: [(data-id, [(text, title)...])]."""

    def __init__(self):
        super().__init__()
        self.rows, self._in, self._row, self._cell = [], False, None, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self._in = a.get("id") == "layer-table"
        elif self._in and tag == "tr" and "data-id" in a:
            self._row = (a["data-id"], [])
        elif self._row is not None and tag == "td":
            self._cell = ["", a.get("title")]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[0] += data

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None and self._row is not None:
            self._row[1].append(tuple(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None
        elif tag == "table":
            self._in = False


def test_seed_report_numbers(seed_content, tmp_path):
    """The README's worked example: 770,482,865 parameters, a 15,411,190,056 B peak (CUDA), no fit."""
    c = seed_content
    assert c.params == 770_482_865
    assert c.estimate.peak_bytes == 15_411_190_056
    assert c.layer_count == 10
    d = c.device
    assert d.id == "rtx3080-10gb" and d.chosen and not d.fits and d.max_batch == 0
    # the device adds its runtime (400 MiB) and the allocator's 512-byte rounding of each block
    assert d.device_peak_bytes - d.peak_bytes - 400 * MiB in range(0, 512 * 20)
    assert d.headroom_bytes == 10 * GiB - d.device_peak_bytes < 0
    # at the peak: weights, gradients, Adam's two moments and the foreach sqrt temporary
    w = c.at_peak["weights"]
    assert w == c.estimate.param_bytes == 770_482_865 * 4
    assert c.at_peak["optimizer_state"] == 2 * w and c.at_peak["workspace"] == w
    assert c.peak_tensors[0].tensor == "adam state (all parameters)" and c.peak_tensors[0].bytes == 2 * w
    assert "steady state" in c.peak_tensors[0].rule
    html = tmp_path / "r.html"
    md_path = tmp_path / "r.md"
    write_report(c, html)
    write_report(c, md_path)
    for text in (html.read_text(), md_path.read_text()):
        assert "770,482,865" in text
        assert "15,411,190,056 B" in text
        assert "DOES NOT FIT" in text
        assert "NVIDIA GeForce RTX 3080" in text
        assert "adam state (all parameters)" in text
        # the engine's fit advisor: plain SGD fits (weights + gradients, 6.22 GiB with runtime)
        assert "Suggestions to make it fit" in text
        assert "optimizer SGD: needs 6.22 GiB, fits" in text
    h = html.read_text()
    assert "<script" not in h  # self-contained: no scripts, no external resources
    assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:|//)|url\(|@import", h)
    assert h.count("<svg") == 1 and "capacity 10.0 GiB" in h


def test_every_shipped_device_with_its_own_verdict(seed_content):
    c = seed_content
    assert [v.id for v in c.devices] == [d.id for d in shipped_devices()]
    by_id = {v.id: v for v in c.devices}
    assert by_id["rtx3080-10gb"] is c.device
    h200 = by_id["h200"]
    ref = estimate(load_design(SEED), TRAIN_ADAM, device="h200", max_batch=True)
    assert h200.fits and h200.device_peak_bytes == ref.device_peak_bytes and h200.max_batch == ref.max_batch > 1
    # CPU profiles follow PyTorch's CPU Adam (per-parameter loop): the README's 18,493,099,716 B
    assert by_id["cpu-32gb"].peak_bytes == 18_493_099_716
    from memdesigner.reports.html import device_rows

    assert device_rows(c)[0].id == "rtx3080-10gb"  # the chosen device leads the table


def test_layer_rows_equal_the_csv_export(seed_content, tmp_path):
    """The report's per-layer table, the CSV export and the JSON carry the same rows."""
    c = seed_content
    path = tmp_path / "layers.csv"
    write_layers_csv(c.layers, path)
    with open(path, encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    html = tmp_path / "r.html"
    write_report(c, html)
    p = _Cells()
    p.feed(html.read_text())
    assert len(p.rows) == len(rows) - 1 == 10
    for (nid, cells), want in zip(p.rows, rows[1:]):
        rid, name, typ, shape, params, wbytes, abytes, kbytes, flops = want
        texts = [t for t, _ in cells]
        titles = [t for _, t in cells]
        assert (nid, texts[1], texts[2], texts[3]) == (rid, name, typ, shape)
        assert titles[4:9] == [params, wbytes, abytes, kbytes, flops]
    dense = next(r for r in rows if r[0] == "dense1")
    assert dense[4] == "770480256" and dense[3] == "1×128"  # 6,019,376 × 128 + 128, by hand
    json_rows = estimate(load_design(SEED), TRAIN_ADAM, device="rtx3080-10gb").to_dict()["layers"]
    assert [[str(r[k]) for k in ("id", "params", "param_bytes", "activation_bytes", "kept_bytes", "flops")]
            for r in json_rows] == [[r[0], *r[4:]] for r in rows[1:]]
    text, _ = render_markdown(c)
    for r in rows[1:]:
        assert f"| {md(r[1])} | {r[2]} | {r[3]} | {int(r[4]):,} |" in text


HOSTILE = '<script>alert("x")</script>'
HOSTILE_NODE = '"><img src=x onerror=alert(1)>| [click](javascript:alert(1)) *b*'


def _hostile_design():
    d = sequential((8,), [("Linear", {"out_features": 4}), ("ReLU", {})], name=HOSTILE)
    d.nodes["n0"].name = HOSTILE_NODE
    return d


def test_hostile_names_are_escaped(tmp_path):
    c = collect(_hostile_design(), Settings(), get_device("t4"), graph_png=b"\x89PNG fake", max_batch=False)
    html = tmp_path / "r.html"
    write_report(c, html)
    h = html.read_text()
    assert "<script" not in h and "<img src=x" not in h
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in h
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in h
    m = tmp_path / "r.md"
    write_report(c, m)
    t = m.read_text()
    assert "<script" not in t and "<img" not in t and not re.search(r"(?<!\\)\]\(javascript", t)
    assert "&lt;script&gt;" in t and r"\[click\]" in t and r"\*b\*" in t
    # a pipe in a name does not split the table row: every row has as many cell breaks as its header
    table = [ln for ln in t.splitlines() if ln.startswith("| ") and "Linear" in ln]
    assert table and all(len(re.findall(r"(?<!\\)\|", ln)) == 10 for ln in table)


def test_timeline_svg_escapes_the_peak_layer_and_marks_capacity():
    d = _hostile_design()
    d.nodes["n1"].name = HOSTILE_NODE
    rep = estimate(d, Settings(batch=4096), device="t4")
    assert rep.peak_layer == "n1"  # the ReLU's output beside the Linear's: the label names n1
    svg = timeline_svg(rep, d)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "<img" not in svg and "<script" not in svg and "&quot;&gt;&lt;img src=x" in svg
    assert "capacity" not in svg  # a tiny net on a 16 GB card: capacity would flatten the plot
    seed = load_design(SEED)
    rep = estimate(seed, TRAIN_ADAM, device="rtx3080-10gb")
    svg = timeline_svg(rep, seed)
    assert "peak 14.35 GiB" in svg and "optimizer step" in svg and "capacity 10.0 GiB" in svg
    assert "usable after the runtime 9.6 GiB" in svg


def test_suggestions_hook_shows_what_an_advisor_returns(monkeypatch, tmp_path):
    monkeypatch.setattr(content_mod, "suggestions_for", lambda *a: ["use batch 1 <b>"])
    c = collect(_hostile_design(), Settings(), get_device("t4"), max_batch=False)
    write_report(c, tmp_path / "r.html")
    h = (tmp_path / "r.html").read_text()
    assert "Suggestions to make it fit" in h and "use batch 1 &lt;b&gt;" in h


def test_cli_report_html_and_markdown_files(tmp_path, capsys):
    out = tmp_path / "seed.md"
    assert main(["report", str(SEED), "--mode", "train", "--optimizer", "adam", "--batch", "1", "--device",
                 "rtx3080-10gb", "--no-graph", "--no-max-batch", "--images", "files", "-o", str(out)]) == 0
    svg = tmp_path / "seed.timeline.svg"
    assert svg.read_text().startswith("<svg")
    text = out.read_text()
    assert "](seed.timeline.svg)" in text and "15,411,190,056 B" in text
    assert capsys.readouterr().out.split() == [str(out), str(svg)]


@pytest.mark.parametrize("argv, msg", [
    (["report", str(SEED), "-o", "x.pdf"], "must end in .html or .md"),
    (["report", "nope.json", "-o", "x.html"], "nope.json"),
    (["report", str(SEED), "--device", "gtx9999", "-o", "x.html"], "unknown device"),
    (["report", str(SEED), "--no-graph", "-o", "/nonexistent-dir/x.html"], "cannot write"),
])
def test_cli_report_bad_input_one_line_exit_2(argv, msg, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err


def test_cli_report_invalid_design_one_line(tmp_path, capsys):
    d = sequential((8,), [("Linear", {"out_features": 0})], name="bad")
    from memdesigner.io.design_file import save_design

    save_design(d, tmp_path / "bad.json")
    assert main(["report", str(tmp_path / "bad.json"), "--no-graph", "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "n0" in err
    assert not (tmp_path / "r.html").exists()


def test_largest_batch_beyond_the_old_search_limit_is_exact(tmp_path):
    c = collect(_hostile_design(), Settings(), get_device("h200"), devices=[])
    assert c.device.max_batch > 1 << 24  # 36 parameters: the batch curve has no search limit
    write_report(c, tmp_path / "r.html")
    text = (tmp_path / "r.html").read_text()
    assert f"{c.device.max_batch:,}" in text and "≥" not in text


def test_largest_batch_at_the_search_limit_reads_at_least():
    from memdesigner.reports.html import max_batch_text

    assert max_batch_text(1 << 24) == "≥ 16,777,216"  # what a capped search returns
    assert max_batch_text((1 << 24) + 1) == "16,777,217"
