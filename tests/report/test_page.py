"""Reports of real runs, checked for structure; a malicious result injects no markup."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from trnlens import speedup
from trnlens.report import build
from trnlens.store import Store

# What a page may not contain: anything that would load from somewhere.
LOADS = re.compile(r"src\s*=|url\(|@import|fetch\s*\(|https?://(?!ui\.perfetto)", re.I)


class Page(HTMLParser):
    """Elements with their attributes, the JSON data, and the text, as a browser would parse."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if tag == "script":
            self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)

    def all(self, tag: str, cls: str | None = None) -> list[dict]:
        return [
            a
            for t, a in self.elements
            if t == tag and (cls is None or cls in a.get("class", "").split())
        ]

    @property
    def events(self) -> list[dict]:
        data = next(s for s in self.scripts if s.lstrip().startswith("{"))
        return json.loads(data)["events"]


def report(runs, what: str | None) -> tuple[str, Page]:
    with Store(runs.root) as store:
        built = build.write(store, build.select(store, what, runs.root), runs.root)
    text = built.path.read_text("utf-8")
    return text, Page(text)


def assert_self_contained(text: str, page: Page) -> None:
    assert not LOADS.search(text.replace("ui.perfetto.dev", "")), LOADS.search(text)
    for link in page.all("a"):
        href = link.get("href", "")
        assert ":" not in href and not href.startswith("/"), href
    csp = next(a["content"] for a in page.all("meta") if a.get("http-equiv"))
    assert csp.startswith("default-src 'none'")
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)
    executable = [a for a in page.all("script") if a.get("type") != "application/json"]
    assert executable and all(a.get("nonce") == nonce for a in executable)


def test_a_profile_report_shows_lanes_dispatches_and_source_lines(runs):
    text, page = report(runs, runs.profile["run_id"])
    assert_self_contained(text, page)
    lanes = {a["data-lane"] for a in page.all("g", "lane")}
    assert lanes == {"python", "dispatch", "runtime", "device", "memory"}
    # the memory lane: the memory pass's curve in spans, its peak's at the peak's line
    dispatches = [e for e in page.events if e["kind"] == "dispatch"]
    slices = [e for e in page.events if e["lane"] == "memory"]
    memory = runs.profile["memory"]
    # both passes ran the same 6 dispatches: a span from each to the next, in the timed step
    assert len(slices) == len(memory["curve"]["dispatch_bytes"]) == 6
    assert [e["start_us"] for e in slices[1:]] == [e["start_us"] for e in dispatches[1:]]
    (peak,) = [e for e in slices if e["kind"] == "memory peak"]
    # The peak is `x * rsqrt(...)`'s temporaries: an operator, for which the agent's tracer
    # records no call from the sample's line; the lines pass's line of the same dispatch
    # places it (memorypass.Sites). Before, the peak had no line here.
    assert memory["peak_line"] == {"path": "samples/rmsnorm.py", "line": 17}
    assert (peak.get("path"), peak.get("line")) == ("samples/rmsnorm.py", 17)
    assert peak["name"].startswith("peak ") and "this step's own dispatches" in peak["note"]
    names = [e["name"] for e in dispatches]
    assert names == [
        "aten::pow",
        "aten::mean",
        "aten::add",
        "aten::rsqrt",
        "aten::mul",
        "aten::mul",
    ]
    # each dispatch knows its line (recorded by the agent), its shapes and its duration
    assert {(e["path"], e["line"]) for e in dispatches} == {("samples/rmsnorm.py", 17)}
    assert dispatches[0]["shapes"][0] == [4, 512, 2048]
    assert all(e["dur_us"] > 0 for e in dispatches)
    gaps = [e for e in page.events if e["kind"] == "gap"]
    assert len(gaps) == 5
    body = " ".join(page.text)
    assert "idle between dispatches" in body and "5 gaps between 6 dispatches" in body
    # the per-line breakdown beside the source, with the measured line's bar
    rows = page.all("tr", "measured")
    assert [(r["data-path"], r["data-line"]) for r in rows] == [("samples/rmsnorm.py", "17")]
    assert "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight" in body
    # the op table (sortable), the facts, the chrome trace next to the report
    assert page.all("table", "sortable")
    assert "aten::pow" in [c.get("data-v") for c in page.all("td")]
    assert "CPU (the cpu backend runs ops on the host" in body
    assert [a["href"] for a in page.all("a", "file")] == ["trace.json"]


def test_a_three_way_comparison_report_shows_the_variants_side_by_side(runs):
    baseline = runs.comparison["variants"][0]["run_id"]
    text, page = report(runs, baseline)
    assert_self_contained(text, page)
    labels = [v["variant"]["label"] for v in runs.comparison["variants"]]
    rows = page.all("table", "variants")
    assert rows
    body = " ".join(page.text)
    for label in labels:
        assert label in body
    speedups = runs.comparison["speedups"]
    ranges = runs.comparison["speedup_ranges"]
    assert "baseline" in body
    for factor, span in zip(speedups[1:], ranges[1:], strict=True):
        # a range that contains 1.00× reads "no measurable difference", not a factor
        assert speedup.verdict(factor, span, "×") in body
    assert speedup.METHOD in body
    # their timelines on one axis: one group per variant, each with its dispatch count
    variants = {e["variant"] for e in page.events}
    assert variants == set(labels)
    dispatches = {
        label: sum(1 for e in page.events if e["variant"] == label and e["kind"] == "dispatch")
        for label in labels
    }
    assert dispatches == {
        v["variant"]["label"]: v["dispatches_per_step"] for v in runs.comparison["variants"]
    }
    # the same comparison whichever of its runs is asked for
    _, again = report(runs, runs.comparison["variants"][2]["run_id"])
    assert {e["variant"] for e in again.events} == set(labels)
    assert len(page.all("a", "file")) == 3  # each variant's chrome trace, relative


MALICIOUS = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'</style>"


def test_a_malicious_result_injects_no_markup(runs, tmp_path):
    result = json.loads(json.dumps(runs.profile))
    result["run_id"] = "20990101T000000-0badc0de"  # not in the store: this file is what is shown
    result["function"]["qualname"] = "f" + MALICIOUS
    result["variant"]["label"] = MALICIOUS
    result["device"] = MALICIOUS
    result["warnings"] = [MALICIOUS, "</script><script>alert(3)</script>"]
    result["ops"][0]["name"] = MALICIOUS
    result["ops"][0]["input_shapes"] = [[MALICIOUS]]
    result["lines"][0]["path"] = MALICIOUS
    result["lines"][0]["ops"] = {MALICIOUS: 1}
    result["dispatch_sites"] = [[MALICIOUS, 17]] * 6
    result["artifacts"] = [
        {"kind": "chrome_trace", "path": "trace.json"},
        {"kind": "chrome_trace", "path": "javascript:alert(4)"},
    ]
    # its trace (real, with one op renamed) stored under its own run id, so the timeline shows
    trace = runs.root / ".trnlens" / "artifacts" / runs.profile["run_id"] / "trace.json"
    run_dir = runs.root / ".trnlens" / "artifacts" / result["run_id"]
    run_dir.mkdir(exist_ok=True)
    events = json.loads(trace.read_text())
    for event in events["traceEvents"]:
        if event.get("name") == "aten::pow":
            event["name"] = "aten::" + MALICIOUS
    (run_dir / "trace.json").write_text(json.dumps(events))
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    out = tmp_path / "evil.html"
    with Store(runs.root) as store:
        built = build.write(store, build.select(store, str(path), runs.root), runs.root, out)
    text = built.path.read_text("utf-8")
    page = Page(text)
    assert not page.all("img") and not page.all("style")[1:]
    assert [a.get("type") for a in page.all("script")] == ["application/json", None]
    assert "alert(" not in "".join(page.scripts[1:])
    assert "<script>alert" not in text and "<img" not in text
    assert MALICIOUS in " ".join(page.text)  # shown as text, whole
    assert "aten::" + MALICIOUS in [e["name"] for e in page.events]  # data, parsed back whole
    assert {e.get("path") for e in page.events if e["kind"] == "dispatch"} == {MALICIOUS}
    assert_self_contained(text.replace("src=x", ""), page)


def test_variants_stored_before_they_carried_speedups_get_them_from_timing(runs, tmp_path):
    comparison = json.loads(json.dumps(runs.comparison))
    for variant in comparison["variants"]:
        variant.pop("comparison")
        variant["run_id"] = variant["run_id"][:-8] + "0ld0ld00"  # not the stored ones
    path = tmp_path / "old.json"
    path.write_text(json.dumps(comparison))
    with Store(runs.root) as store:
        selected = build.select(store, str(path), runs.root)
        built = build.write(store, selected, runs.root, tmp_path / "old.html")
    body = " ".join(Page(built.path.read_text("utf-8")).text)
    assert "baseline" in body
    for variant in comparison["variants"][1:]:
        base, own = comparison["variants"][0]["timing"], variant["timing"]
        extremes = [base["min_us"] / own["max_us"], base["max_us"] / own["min_us"]]
        factor = base["median_us"] / own["median_us"]
        assert speedup.verdict(factor, extremes, "×") in body
    assert "overstates the spread" in body


def test_neff_ntff_pairs_are_linked_beside_the_run(runs, tmp_path):
    """Files named as a Neuron run leaves them (stand-ins: not real NEFF/NTFF content)."""
    result = json.loads(json.dumps(runs.profile))
    result["run_id"] = "20990101T000000-0000aeff"
    run_dir = runs.root / ".trnlens" / "artifacts" / result["run_id"]
    nested = run_dir / "neuron" / "i-0_pid_1"
    nested.mkdir(parents=True)
    (nested / "neff_395760075800974.neff").write_bytes(b"n" * 2000)
    (nested / "395760075800974_instid_0_vnc_0.ntff").write_bytes(b"t" * 3000)
    (nested / "profile_nc_1_session_0.ntff").write_bytes(b"")
    path = tmp_path / "result.json"
    path.write_text(json.dumps(result))
    with Store(runs.root) as store:
        built = build.write(store, build.select(store, str(path), runs.root), runs.root)
    page = Page(built.path.read_text("utf-8"))
    hrefs = [a["href"] for a in page.all("a", "file")]
    assert "neuron/i-0_pid_1/neff_395760075800974.neff" in hrefs
    assert "neuron/i-0_pid_1/395760075800974_instid_0_vnc_0.ntff" in hrefs
    body = " ".join(page.text)
    assert "NEFF" in body and "↔ NTFF" in body and "trnlens explorer RUN" in body
