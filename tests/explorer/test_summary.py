"""Neuron Explorer's device profile summary, read from STAND-IN files built here to the documented
schema (docs/neuron.md: summary-json ``summary[]`` with the documented metric names; the parquet
``Summary`` table), including a missing file, a newer schema and an unreadable parquet."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest
from trnlens.explorer import summary

# A stand-in summary-json as `neuron-explorer view -n F.neff -s P.ntff --output-format
# summary-json` documents it: one entry per NeuronCore, times in seconds.
STANDIN_SUMMARY = {
    "summary": [
        {
            "total_time": 0.0123,
            "mfu_estimated_percent": 31.0,
            "hfu_estimated_percent": 44.0,
            "mbu_estimated_percent": 22.0,
            "average_dma_size": 2048,
            "mm_arithmetic_intensity": 96.0,
            "model_flops": 4.0e9,
            "hardware_flops": 1.0e10,  # model FLOPs 40% of the hardware's: under 50%
            "transpose_flops": 1.5e9,  # 15% of the FLOPs: over 10%
        },
        {
            "total_time": 0.0119,
            "mfu_estimated_percent": 29.0,
            "hfu_estimated_percent": 42.0,
            "mbu_estimated_percent": 20.0,
            "average_dma_size": 2048,
        },
    ]
}


def _write(path: Path, document) -> Path:
    path.write_text(json.dumps(document), "utf-8")
    return path


def test_standin_summary_json_gives_figures_and_explorers_recommendations(tmp_path):
    got = summary.read(_write(tmp_path / "explorer-summary.json", STANDIN_SUMMARY))
    assert got["source"] == "summary-json" and got["cores"] == 2
    assert got["total_time_s"] == 0.0123  # the longest NeuronCore
    assert (got["mfu_percent"], got["hfu_percent"], got["mbu_percent"]) == (30.0, 43.0, 21.0)
    assert got["average_dma_size_bytes"] == 2048
    assert [r["id"] for r in got["recommendations"]] == ["model-flops-ratio", "transposes"]
    assert "40%" in got["recommendations"][0]["message"]
    assert "15%" in got["recommendations"][1]["message"]
    assert got["warnings"] == []


def test_below_the_thresholds_no_recommendation(tmp_path):
    row = {"total_time": 0.01, "model_flops": 6.0, "hardware_flops": 10.0, "transpose_flops": 0.5}
    doc = {"summary": [{**row, "spill_reload_bytes": 20, "hbm_read_bytes": 100}]}
    assert summary.read(_write(tmp_path / "s.json", doc))["recommendations"] == []
    doc["summary"][0]["spill_reload_bytes"] = 30  # 30% of HBM reads: over 25%
    got = summary.read(_write(tmp_path / "s.json", doc))
    assert [r["id"] for r in got["recommendations"]] == ["spill-reload"]


def test_a_newer_schema_is_read_with_a_warning(tmp_path):
    doc = {"version": "2.0", **STANDIN_SUMMARY}
    got = summary.read(_write(tmp_path / "explorer-summary.json", doc))
    assert got["format_version"] == "2.0" and got["mfu_percent"] == 30.0
    assert "newer than the version 1" in got["warnings"][0]


@pytest.mark.parametrize(
    "document, why",
    [
        ({"instruction": []}, "no 'summary' list"),
        ({"summary": [{"opcode": "MATMUL"}]}, "names none of"),
        ({"version": "next", "summary": []}, "unknown summary-json version"),
        ([1, 2], "is an object"),
    ],
)
def test_documents_that_are_no_summary_say_why(tmp_path, document, why):
    with pytest.raises(summary.Unreadable, match=why):
        summary.read(_write(tmp_path / "x.json", document))


def test_parquet_without_pyarrow_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as on a machine without it
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "Summary.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 16 + b"PAR1")  # a stand-in: parquet magic only
    with pytest.raises(summary.Unreadable, match="pyarrow is not installed.*summary-json"):
        summary.read(path)


def test_parquet_summary_table_when_pyarrow_is_there(tmp_path):
    import pyarrow as pa  # a test dependency (the dev extra): never skipped for want of it
    import pyarrow.parquet as pq

    path = tmp_path / "Summary.parquet"
    pq.write_table(pa.Table.from_pylist(STANDIN_SUMMARY["summary"][:1]), path)
    got = summary.read(path)
    assert got["source"] == "parquet" and got["mfu_percent"] == 31.0


def _neuron_result() -> dict:
    return {"backend": "neuron", "error": None, "warnings": []}


def test_attach_reads_a_summary_already_in_the_run(tmp_path):
    _write(tmp_path / "explorer-summary.json", STANDIN_SUMMARY)
    result = _neuron_result()
    summary.attach(result, tmp_path, binary=None)
    assert result["device_summary"]["mfu_percent"] == 30.0


def test_attach_without_explorer_or_summary_warns_and_adds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(summary, "explorer_binary", lambda: None)
    result = _neuron_result()
    summary.attach(result, tmp_path)
    assert "device_summary" not in result
    assert result["warnings"] == [
        "no device profile summary: neuron-explorer is not installed here"
    ]
    cpu = {"backend": "cpu", "error": None, "warnings": []}
    summary.attach(cpu, tmp_path)
    assert cpu == {"backend": "cpu", "error": None, "warnings": []}


def test_attach_has_explorer_write_the_summary_of_the_profiled_pair(tmp_path):
    """A STAND-IN neuron-explorer that writes STANDIN_SUMMARY for `view -n -s --output-format
    summary-json --output-file F`, and fails on anything else."""
    standin = tmp_path / "neuron-explorer"
    standin.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "a = sys.argv[1:]\n"
        "o = dict(zip(a[1::2], a[2::2]))\n"
        "assert a[0] == 'view' and o['--output-format'] == 'summary-json', a\n"
        "open(o['-n']).close(); open(o['-s']).close()\n"
        f"json.dump({STANDIN_SUMMARY!r}, open(o['--output-file'], 'w'))\n"
    )
    standin.chmod(standin.stat().st_mode | stat.S_IXUSR)
    run_dir = tmp_path / "run"
    (run_dir / "neuron").mkdir(parents=True)
    (run_dir / "neuron" / "neff_123.neff").write_bytes(b"x" * 10)
    (run_dir / "neuron" / "123_instid_0_vnc_0.ntff").write_bytes(b"x" * 10)
    result = _neuron_result()
    summary.attach(result, run_dir, binary=str(standin))
    assert result["device_summary"]["file"] == "explorer-summary.json"
    assert (run_dir / "explorer-summary.json").is_file()
    # A failing explorer is a warning, not a failed run.
    standin.write_text("#!/bin/sh\necho 'NTFF version not supported' >&2\nexit 3\n")
    (run_dir / "explorer-summary.json").unlink()
    result = _neuron_result()
    summary.attach(result, run_dir, binary=str(standin))
    assert result["warnings"] == [
        "device profile summary unreadable: neuron-explorer could not summarise the profile: "
        "NTFF version not supported"
    ]
