"""Lenses, hints, diagnostics and hovers from a placed result (no agent: the result is written
here, shaped like the agent's, including a Neuron one that this machine cannot produce)."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.agent import sources
from trnlens.lsp import diagnostics, hints, hovers, lenses
from trnlens.lsp.documents import ProfiledDocument
from trnlens.results import Result
from trnlens.settings import Settings, resolve

TEXT = """import torch


def f(x):
    y = x.pow(2)
    z = y | 1
    return z.sum()
"""


def _doc(text: str = TEXT) -> ProfiledDocument:
    return ProfiledDocument("file:///p/m.py", Path("/p/m.py"), Path("/p"), text, generation=1)


def _result(time_basis="cpu", backend="cpu", error=None, lines=None) -> Result:
    definition = sources.find_definition(TEXT, "f")
    lines = lines or [
        {"path": "m.py", "line": 5, "device_us": 300.0, "cpu_us": 310.0, "dispatches": 1,
         "ops": {"aten::pow": 1.0}},
        {"path": "m.py", "line": 6, "device_us": 0.0, "cpu_us": 5.0, "dispatches": 0, "ops": {}},
        {"path": "m.py", "line": 7, "device_us": 700.0, "cpu_us": 720.0, "dispatches": 2,
         "ops": {"aten::bitwise_or": 1.0, "aten::sum": 1.0}},
        {"path": "other.py", "line": 7, "device_us": 0.0, "cpu_us": 0.0, "dispatches": 0},
    ]  # fmt: skip
    return Result(
        {
            "run_id": "r1", "created_at": "2026-01-01T00:00:00+00:00", "target": "local",
            "backend": backend, "device": "d0", "time_basis": time_basis, "mode": "inference",
            "device_time_per_step_us": 1000.0, "cpu_time_per_step_us": 1100.0,
            "dispatches_per_step": 3, "error": error, "lines": lines,
            "function": {"path": "m.py", "qualname": "f", "line": 4,
                         "source_hash": sources.source_hash(TEXT, definition)},
            "ops": [
                {"name": "aten::pow", "calls": 1, "self_cpu_us": 310.0, "self_device_us": 300.0,
                 "input_shapes": [[[4, 8]]]},
                {"name": "aten::bitwise_or", "calls": 1, "self_cpu_us": 20.0,
                 "self_device_us": 20.0, "input_shapes": [[[4, 8], []]]},
                {"name": "aten::sum", "calls": 1, "self_cpu_us": 700.0, "self_device_us": 680.0,
                 "input_shapes": [[[4, 8]]]},
            ],
            "artifacts": [{"kind": "chrome_trace", "path": "trace.json"}],
        }
    )  # fmt: skip


def _no_jobs(uri: str, qualname: str) -> None:
    return None


def test_no_lenses_in_files_without_torch():
    assert lenses.code_lenses(_doc("def f():\n    pass\n"), "local", "all") == []


def test_neuron_lens_labels_device_time_by_backend():
    doc = _doc()
    doc.place(_result(time_basis="device", backend="neuron"))
    (wire,) = lenses.code_lenses(doc, "local", "torch")
    assert "command" not in wire  # figures: the title comes from codeLens/resolve
    lens = lenses.resolve(
        doc,
        types.CodeLens(types.Range(types.Position(3, 0), types.Position(3, 0)), data=wire["data"]),
        _no_jobs,
    )
    assert lens.command.title.startswith("▶ Profile · 1.00 ms NEURON, profiled · 3 dispatches")


def test_hints_only_on_measured_lines_of_this_file():
    doc = _doc()
    doc.place(_result())
    everything = types.Range(types.Position(0, 0), types.Position(100, 0))
    found = {h.position.line: h.label for h in hints.inlay_hints(doc, everything)}
    assert found == {4: "  30% · 300 µs · 1 dispatch", 6: "  70% · 700 µs · 2 dispatches"}
    only_first = types.Range(types.Position(0, 0), types.Position(5, 0))
    assert [h.position.line for h in hints.inlay_hints(doc, only_first)] == [4]


def test_a_forward_lines_hint_includes_its_backward_share():
    doc = _doc()
    result = _result()
    line = result.data["lines"][2]
    line["backward"] = {"dispatches": 1, "cpu_us": 430.0, "device_us": 420.0}
    doc.place(result)
    everything = types.Range(types.Position(0, 0), types.Position(100, 0))
    found = {h.position.line: h for h in hints.inlay_hints(doc, everything)}
    # "backward 60%" would make it 44 characters, over VS Code's 43: said "bwd", whole in the
    # tooltip
    assert found[6].label == "  70% · 700 µs · 2 dispatches · bwd 60%"
    assert found[6].tooltip.startswith("70% · 700 µs · 2 dispatches · backward 60%\n")
    assert "of that, backward: 1 dispatch, 420 µs" in found[6].tooltip
    assert found[4].label == "  30% · 300 µs · 1 dispatch"  # no backward part: as before


def test_a_line_two_runs_measured_gets_one_hint_naming_each():
    doc = _doc()
    doc.place(_result())
    other = _result()
    other.data["run_id"] = "r2"
    other.data["function"] = {**other.data["function"], "qualname": "g"}
    doc.place(other)
    everything = types.Range(types.Position(0, 0), types.Position(100, 0))
    found = hints.inlay_hints(doc, everything)
    assert [h.position.line for h in found] == [4, 6]
    # both named, within VS Code's 43 characters; the dispatches in the tooltip
    assert found[0].label == "  f: 30% · 300 µs │ g: 30% · 300 µs · stale"
    assert found[0].tooltip.startswith("f: 30% · 300 µs · 1 dispatch │ g: 30% · 300 µs")
    assert "run r1" in found[0].tooltip and "run r2" in found[0].tooltip


def test_hotspots_follow_the_threshold():
    doc = _doc()
    doc.place(_result())
    low = diagnostics.hotspots(doc, Settings(hotspot_threshold=0.3))
    assert [d.range.start.line for d in low] == [4, 6]
    high = diagnostics.hotspots(doc, Settings(hotspot_threshold=0.5))
    assert [d.range.start.line for d in high] == [6]
    assert "aten::bitwise_or [4, 8]" in high[0].message and high[0].range.start.character == 4


def test_failure_raised_outside_the_file_lands_on_the_def_line():
    error = {"kind": "user_code", "type": "KeyError", "message": "KeyError: 'w'",
             "path": "lib/util.py", "line": 12, "traceback": None}  # fmt: skip
    doc = _doc()
    doc.place(_result(error=error))
    (found,) = diagnostics.failures(doc, resolve([]))
    assert found.range.start.line == 3 and found.severity == types.DiagnosticSeverity.Error
    assert found.message.startswith("KeyError: 'w' (raised in lib/util.py:12)")
    assert diagnostics.hotspots(doc, resolve([])) == []


def test_hub_keeps_other_providers_when_one_fails():
    hub = diagnostics.DiagnosticsHub()
    marker = types.Diagnostic(types.Range(types.Position(0, 0), types.Position(0, 1)), "x")

    def broken(doc, settings):
        raise RuntimeError("boom")

    hub.register("broken", broken)
    hub.register("analysis", lambda doc, settings: [marker])
    assert hub.collect(_doc(), resolve([])) == [marker]


def test_hover_tables_for_a_line_and_a_function_and_the_trace_link():
    doc = _doc()
    doc.place(_result())
    line = hovers.hover(doc, types.Position(6, 5), Path("/p/.trnlens/artifacts")).contents.value
    assert "| `aten::bitwise_or` | 1 |" in line and "`aten::pow`" not in line
    assert "[chrome trace](file:///p/.trnlens/artifacts/r1/trace.json)" in line
    header = hovers.hover(doc, types.Position(3, 0), None).contents.value
    rows = [r for r in header.splitlines() if r.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["aten::sum", "aten::pow", "aten::bitwise_or"]
    assert "chrome trace" not in header  # no store, no link
    assert hovers.hover(doc, types.Position(1, 0), None) is None


def test_hover_tables_fit_the_editor():
    doc = _doc()
    run = _result()
    # a CPU-backend run: op time is CPU time, shown once
    for op in run.data["ops"]:
        op["self_device_us"] = op["self_cpu_us"]
    # a nested op (called inside aten::sum, dispatched by no line): out of the function table
    run.data["ops"].append(
        {"name": "aten::copy_", "calls": 1, "self_cpu_us": 5.0, "self_device_us": 5.0}
    )
    run.data["warnings"] = [
        "the profiled steps took 2.8x the unprofiled ones: more steps (--steps), more timing "
        "calls (--repeats)"
    ]
    run.data["stability"] = {"noisy": True}
    doc.place(run)
    plain = hovers.hover(doc, types.Position(3, 0), None).contents.value
    assert "| op | calls | CPU | shapes |" in plain and "|---|---:|---:|---|" in plain
    rows = [r for r in plain.splitlines() if r.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == ["aten::sum", "aten::pow", "aten::bitwise_or"]
    assert "_and 1 op they called inside (in the report)_" in plain
    assert "(trnlens.steps)" in plain and "(trnlens.repeats)" in plain and "--steps" not in plain
    # a client with a declared Markdown parser (VS Code) gets a gap before each cell
    padded = hovers.hover(doc, types.Position(6, 5), None, pad=True).contents.value
    assert "| `aten::bitwise_or` | &nbsp;&nbsp;1 | &nbsp;&nbsp;20.0 µs |" in padded, padded


def test_hover_on_a_noisy_run_repeats_why_its_figures_are_not_stable():
    doc = _doc()
    run = _result()
    warning = "the profiled steps took 2.8x the unprofiled ones (median 2.8 ms vs 1 ms): ..."
    advice = "to steady these figures, try more steps (--steps)"
    run.data["warnings"] = ["import torch took 2.0 s (cold agent)", warning, advice]
    run.data["stability"] = {"profiler_overhead": 2.8, "noisy": True}
    doc.place(run)
    text = hovers.hover(doc, types.Position(3, 4), None).contents.value
    # one line: the first sentence of the first warning, then the advice (the hover is a glance)
    assert (
        "**not stable**: the profiled steps took 2.8x the unprofiled ones (median 2.8 ms vs 1 ms)."
        " To steady these figures, try more steps (trnlens.steps)" in text
    ), text
    assert "import torch took" not in text and text.count("**not stable**") == 1


def test_a_long_lens_title_fits_by_leaving_out_its_least_telling_parts():
    full = (
        "▶ Profile on trn2 · 1.84 ms unprofiled · 6 dispatches · MFU 31% · "
        "−42% vs previous · 2 min ago · on trn1"
    )
    short = lenses.fit(full)
    assert short == "▶ Profile on trn2 · 1.84 ms unprofiled · 6 dispatches · −42% vs previous"
    assert "vs previous" in lenses.fit(full, limit=20)  # the change is never left out
    assert len(short) <= lenses.LENS_CHARS
    kept = "▶ Profile · 1.84 ms CPU (ops), profiled · 2 min ago"
    assert lenses.fit(kept) == kept
    # figures are never left out: a compiled, stale run keeps them all, past the limit if need be
    compiled = (
        "▶ Profile · stale · 38.6 ms unprofiled · 2 dispatches · noisy · "
        "compiled in 4.56 s · 2 graphs · 1 break · just now"
    )
    assert lenses.fit(compiled) == compiled.removesuffix(" · just now")
    regressed = "▶ Profile · 20.1 µs unprofiled · 1 dispatch · noisy · " + (
        "+102% vs previous (regression) · just now"
    )
    assert lenses.fit(regressed) == regressed.removesuffix(" · just now")
