"""``trnlens check``: discovery, formats, exit codes, --fix writing files atomically."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from trnlens.analysis import batch
from trnlens.cli import main

NAIVE = (
    "import torch\n\n\ndef f(x):\n"
    "    v = x.pow(2).mean(-1, keepdim=True)\n"
    "    return x * torch.rsqrt(v + 1e-6)\n"
)
CLEAN = "import torch\n\n\ndef g(x):\n    return torch.rms_norm(x, x.shape[-1:], eps=1e-6)\n"

LOCATION = {
    "type": "object",
    "required": ["row", "column"],
    "properties": {"row": {"type": "integer", "minimum": 1}, "column": {"type": "integer"}},
}
RUFF_JSON = {  # the shape of ruff's --output-format json
    "type": "array",
    "items": {
        "type": "object",
        "required": ["filename", "code", "message", "location", "end_location", "fix"],
        "properties": {
            "location": LOCATION,
            "end_location": LOCATION,
            "fix": {
                "type": ["object", "null"],
                "required": ["message", "applicability", "edits"],
                "properties": {
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["content", "location", "end_location"],
                            "properties": {"location": LOCATION, "end_location": LOCATION},
                        },
                    }
                },
            },
        },
    },
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "naive.py").write_text(NAIVE)
    (tmp_path / "pkg" / "clean.py").write_text(CLEAN)
    for skipped in (".git", "node_modules", ".trnlens", "env"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "naive.py").write_text(NAIVE)
    (tmp_path / "env" / "pyvenv.cfg").write_text("home = /usr\n")
    return tmp_path


def test_exit_codes(project: Path, capsys) -> None:
    assert main(["check", str(project)]) == 1
    out = capsys.readouterr().out
    assert out.count("TRN001") == 1 and "naive.py:6:12: TRN001 [*]" in out
    assert main(["check", str(project / "pkg" / "clean.py")]) == 0
    assert main(["check", str(project / "nope")]) == 2
    assert main(["check", str(project), "--ignore", "TRN0"]) == 0
    assert main(["check", str(project), "--select", "TRN1"]) == 0
    assert main(["check", str(project), "--select", "TRN1,TRN001"]) == 1


def test_json_has_ruffs_shape(project: Path, capsys) -> None:
    assert main(["check", str(project), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    jsonschema.validate(data, RUFF_JSON)
    (item,) = data
    assert item["code"] == "TRN001" and item["location"] == {"row": 6, "column": 12}
    assert item["fix"]["applicability"] == "safe"
    assert item["qualname"] == "f" and item["naive_dispatches"] == 5


def test_github_and_sarif(project: Path, capsys) -> None:
    main(["check", str(project), "--format", "github"])
    line = capsys.readouterr().out.strip()
    assert line.startswith("::warning file=") and ",line=6,col=12," in line
    assert "title=trnlens (TRN001)::TRN001 naive RMSNorm" in line
    main(["check", str(project), "--format", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    result = sarif["runs"][0]["results"][0]
    assert sarif["version"] == "2.1.0" and result["ruleId"] == "TRN001"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 6


def test_fix_rewrites_the_file_and_reports_what_remains(project: Path, capsys) -> None:
    target = project / "pkg" / "naive.py"
    os.chmod(target, 0o640)
    assert main(["check", str(project / "pkg"), "--fix"]) == 0
    fixed = target.read_text()
    assert fixed == (
        "import torch\n\n\ndef f(x):\n    return torch.rms_norm(x, x.shape[-1:], eps=1e-6)\n"
    )
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert "0 findings remaining, 1 fixed" in capsys.readouterr().err
    assert not list((project / "pkg").glob(".trnlens-*"))  # no temporary file left behind


def test_fix_never_writes_a_file_that_did_not_decode(tmp_path: Path) -> None:
    path = tmp_path / "bad.py"
    data = b"# caf\xe9\n" + NAIVE.encode()
    path.write_bytes(data)
    assert main(["check", str(path), "--fix"]) == 1
    assert path.read_bytes() == data


def test_failed_write_leaves_the_original(project: Path, monkeypatch) -> None:
    target = project / "pkg" / "naive.py"

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(batch.os, "replace", refuse)
    (result,) = batch.check_files([str(target)], fix=True)
    assert result.error and "disk full" in result.error
    assert target.read_text() == NAIVE
    assert [f.code for f in result.findings] == ["TRN001"]


def test_many_files_run_in_parallel_with_the_same_results(tmp_path: Path) -> None:
    paths = []
    for i in range(batch.PARALLEL_THRESHOLD + 2):
        p = tmp_path / f"m{i}.py"
        p.write_text(NAIVE if i % 2 else CLEAN)
        paths.append(str(p))
    parallel = batch.check_files(paths, workers=2)
    serial = [batch.check_file(p) for p in paths]
    assert [[f.to_json() for f in r.findings] for r in parallel] == [
        [f.to_json() for f in r.findings] for r in serial
    ]
    assert sum(len(r.findings) for r in parallel) == (batch.PARALLEL_THRESHOLD + 2) // 2


def test_module_entry_point(project: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trnlens", "check", str(project / "pkg"), "--format", "json"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and json.loads(out.stdout)[0]["code"] == "TRN001"


def test_the_command_exits_without_a_last_collection_over_the_caches(project: Path) -> None:
    """The entry point freezes what is alive before exiting (cli.entry): the interpreter's final
    collection then skips the engine's caches. Seen from an exit handler, which runs after."""
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr))\n"
        "sys.argv = ['trnlens', 'check', sys.argv[1], '--no-cache']\n"
        "import runpy; runpy.run_module('trnlens', run_name='__main__')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(project / "pkg")], capture_output=True, text=True
    )
    assert out.returncode == 1 and "TRN001" in out.stdout
    assert "frozen True" in out.stderr


SYNCS = (
    "import torch\n\n\n"
    "def f(xs):\n    for x in xs:\n        g(x.sum().item())\n        g(x.cpu())\n"
)


def test_statistics_count_findings_per_rule(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.py").write_text(NAIVE + SYNCS.replace("import torch\n", ""))
    (tmp_path / "b.py").write_text(NAIVE)
    assert main(["check", str(tmp_path), "--statistics"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "2\tTRN001\t[*] naive-rmsnorm",
        "1\tTRN101\t[ ] item-in-loop",
        "1\tTRN102\t[ ] host-copy-in-loop",
    ]
    selected = ["--statistics", "--select", "TRN1", "--ignore", "TRN102"]
    assert main(["check", str(tmp_path), *selected]) == 0  # information only: shown, not failed
    assert capsys.readouterr().out.splitlines() == ["1\tTRN101\t[ ] item-in-loop"]
    main(["check", str(tmp_path), "--statistics", "--format", "json"])
    rows = json.loads(capsys.readouterr().out)
    assert rows[0] == {"code": "TRN001", "name": "naive-rmsnorm", "count": 2, "fixable": True}
    assert main(["check", str(tmp_path / "b.py"), "--statistics", "--ignore", "TRN0"]) == 0
    assert capsys.readouterr().out == ""


def test_information_is_a_notice_in_github_and_a_note_in_sarif(tmp_path: Path, capsys) -> None:
    (tmp_path / "s.py").write_text(SYNCS)
    main(["check", str(tmp_path), "--format", "github"])
    assert all(line.startswith("::notice ") for line in capsys.readouterr().out.splitlines())
    main(["check", str(tmp_path), "--format", "sarif"])
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    assert {r["level"] for r in results} == {"note"}


HINT_ONLY = (
    "import torch\n\n\n"
    "def f(xs, n):\n    for i, x in enumerate(xs):\n"
    "        if i % n == 0:\n            g(x.cpu())\n"
)


@pytest.mark.parametrize(
    ("fail_on", "exits"),
    [
        (None, {"naive": 1, "info": 0, "hint": 0}),
        ("warning", {"naive": 1, "info": 0, "hint": 0}),
        ("info", {"naive": 1, "info": 1, "hint": 0}),
        ("hint", {"naive": 1, "info": 1, "hint": 1}),
        ("error", {"naive": 0, "info": 0, "hint": 0}),
        ("never", {"naive": 0, "info": 0, "hint": 0}),
    ],
)
def test_fail_on_sets_the_severity_that_exits_1(tmp_path: Path, capsys, fail_on, exits) -> None:
    """Warnings and above fail by default; information (a sync hazard) and hints (a sync the
    code needs, or one that runs every N steps) are shown without failing, unless asked."""
    files = {"naive": NAIVE, "info": SYNCS, "hint": HINT_ONLY}
    for name, text in files.items():
        (tmp_path / f"{name}.py").write_text(text)
    option = [] if fail_on is None else ["--fail-on", fail_on]
    got = {name: main(["check", str(tmp_path / f"{name}.py"), *option]) for name in files}
    assert got == exits
    out = capsys.readouterr().out
    assert "TRN102" in out and "every N iterations" in out  # shown even when not failing


def test_fail_on_rejects_an_unknown_level(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.py").write_text(NAIVE)
    assert main(["check", str(tmp_path), "--fail-on", "loud"]) == 2
    assert "--fail-on" in capsys.readouterr().err
