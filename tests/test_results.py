"""The result schema: what the agent writes validates against the documented JSON Schema."""

from __future__ import annotations

import jsonschema
import pytest
from trnlens.agent.protocol import READABLE_SCHEMA_VERSIONS, SCHEMA_VERSION
from trnlens.results import Result, SchemaMismatch, check, schema

from tests.agent.conftest import run

CODE = """
import torch


def f(x=torch.ones(4, 8)):
    return x.relu() + 1


def g(x=torch.ones(4, 8)):
    raise ValueError("no")
"""


def test_results_and_comparisons_validate(make_project):
    root = make_project({"m.py": CODE})
    validator = jsonschema.Draft202012Validator(schema())
    single = run(root, [{"path": "m.py", "qualname": "f"}])
    validator.validate(single)
    failed = run(root, [{"path": "m.py", "qualname": "g"}])
    validator.validate(failed)
    comparison = run(root, [{"path": "m.py", "qualname": "f"}, {"path": "m.py", "qualname": "g"}])
    validator.validate(comparison)
    assert comparison["speedups"][1] is None  # a failed variant has no speed-up
    assert check(single) is single


def test_schema_version_is_the_agents():
    versions = schema()["$defs"]["result"]["properties"]["schema_version"]["enum"]
    assert versions == list(READABLE_SCHEMA_VERSIONS)
    assert SCHEMA_VERSION == max(versions)


def test_results_stored_by_an_older_version_stay_readable(make_project):
    root = make_project({"m.py": CODE})
    current = run(root, [{"path": "m.py", "qualname": "f"}])
    older = {**current, "schema_version": 1}
    jsonschema.Draft202012Validator(schema()).validate(older)
    assert check(older) is older


def test_mismatched_versions_are_refused():
    with pytest.raises(SchemaMismatch, match="upgrade the older side"):
        check({"schema_version": SCHEMA_VERSION + 1})


def test_device_label_never_claims_a_device_for_cpu_runs(make_project):
    root = make_project({"m.py": CODE})
    result = Result.parse(run(root, [{"path": "m.py", "qualname": "f"}]))
    assert result.device_label == "CPU (ops)"
    assert Result({**result.data, "time_basis": "device", "backend": "neuron"}).device_label == (
        "NEURON"
    )
    assert result.identity == "m.py::f"


def test_parts_say_when_they_are_shares_of_the_unprofiled_median(make_project):
    root = make_project({"m.py": CODE})
    result = Result.parse(run(root, [{"path": "m.py", "qualname": "f"}]))
    scale = {"basis": "profiled", "total_us": 10.0, "factor": 1.0}
    assert Result({**result.data, "time_scale": scale}).part_label == "CPU (ops)"
    inflated = {**scale, "basis": "unprofiled"}
    assert Result({**result.data, "time_scale": inflated}).part_label == "unprofiled share"
