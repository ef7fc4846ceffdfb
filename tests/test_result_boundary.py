"""Results come from other processes and other hosts: a result is checked against the schema
where it enters (the job, the store) before its run id names any folder."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from trnlens import results
from trnlens.agent.protocol import SCHEMA_VERSION
from trnlens.jobs import ProfileRequest, run_profile
from trnlens.results import SchemaMismatch
from trnlens.store import RunExists, Store
from trnlens.targets.local import LocalTarget

from tests.test_store import fake_result

PLANTED = "../../../outside"

# A stand-in agent (not the real one, which never writes such an id): it says hello, then answers
# the first request with a result whose run id climbs out of the store.
STANDIN_AGENT = """\
import json
import sys

result = json.loads(sys.argv[1])
print(json.dumps({"type": "hello", "schema_version": VERSION}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if request.get("type") == "profile":
        print(json.dumps({"type": "result", "id": request["id"], "result": result}), flush=True)
    elif request.get("type") == "shutdown":
        break
""".replace("VERSION", str(SCHEMA_VERSION))


@dataclass
class PlantingTarget(LocalTarget):
    """A local target whose 'agent' is the stand-in above."""

    result: dict | None = None

    def command(self) -> list[str]:
        return [sys.executable, "-c", STANDIN_AGENT, json.dumps(self.result)]


def _outside(tmp_path: Path) -> list[Path]:
    """Everything under tmp_path but outside the project's .trnlens/."""
    project = tmp_path / "deep" / "er" / "project"
    return [
        p
        for p in tmp_path.rglob("*")
        if not p.is_relative_to(project / ".trnlens") and p != project and p.is_file()
    ]


def test_a_planted_run_id_is_refused_by_the_check():
    with pytest.raises(SchemaMismatch, match="is not a run id"):
        results.check(fake_result(1, run_id=PLANTED))
    with pytest.raises(SchemaMismatch, match="is not a run id"):
        results.check({"schema_version": 1, "variants": [fake_result(1, run_id="a/b")]})


def test_a_planted_run_id_writes_nothing_outside_the_store(tmp_path):
    project = tmp_path / "deep" / "er" / "project"
    project.mkdir(parents=True)
    with Store(project) as store:
        with pytest.raises(SchemaMismatch, match=r"'\.\./\.\./\.\./outside' is not a run id"):
            store.add(fake_result(1, run_id=PLANTED))
        assert store.runs() == []
    assert _outside(tmp_path) == []
    assert not any((project / ".trnlens" / "staging").iterdir())


def test_a_planted_run_id_from_an_agent_fails_the_job_and_writes_nothing(tmp_path):
    project = tmp_path / "deep" / "er" / "project"
    project.mkdir(parents=True)
    (project / "m.py").write_text("def f():\n    return 1\n")
    target = PlantingTarget(result=fake_result(1, path="m.py", run_id=PLANTED))
    request = ProfileRequest(variants=[{"path": "m.py", "qualname": "f"}], project_root=project)
    with Store(project) as store:
        with pytest.raises(SchemaMismatch, match="is not a run id"):
            asyncio.run(run_profile(request, store, target))
        assert store.runs() == []
    assert [p for p in _outside(tmp_path) if p.name != "m.py"] == []


def test_every_key_the_schema_requires_is_checked_with_its_type():
    # keys the hand-written list of 15 left out
    assert {"host", "versions", "inputs", "timing", "artifacts"} <= set(results.required())
    for key in results.required():
        if key == "schema_version":
            continue  # its own message: test_results.py
        partial = fake_result(1)
        del partial[key]
        with pytest.raises(SchemaMismatch, match=f"lacks {key}"):
            results.check(partial)
    with pytest.raises(SchemaMismatch, match="result.ops is dict, expected array"):
        results.check(fake_result(1, ops={}))
    with pytest.raises(SchemaMismatch, match="result.dispatches_per_step is str"):
        results.check(fake_result(1, dispatches_per_step="6"))
    with pytest.raises(SchemaMismatch, match="result.backend is 'tpu', expected one of"):
        results.check(fake_result(1, backend="tpu"))
    with pytest.raises(SchemaMismatch, match="result.error is str"):
        results.check(fake_result(1, error="boom"))
    bad_function = fake_result(1)
    bad_function["function"] = {**bad_function["function"], "qualname": 3}
    with pytest.raises(SchemaMismatch, match="function.qualname is int, expected string"):
        results.check(bad_function)
    assert results.check(fake_result(1, peak_memory_bytes=123, error=None))


def test_a_run_stored_twice_is_a_clear_store_error(tmp_path):
    with Store(tmp_path) as store:
        store.add(fake_result(1))
        with pytest.raises(RunExists, match="is already stored"):
            store.add(fake_result(1))
        assert len(store.runs()) == 1
