"""Rule precision on published libraries (diffusers, timm, torchtune, accelerate; optimum-neuron
for the XLA rules), recomputed from the hand-judged labels (see precision.py and docs/rules.md):
every sampled finding labelled, no label stale, every rule at its goal (the XLA rules: at the
precision recorded)."""

from __future__ import annotations

import sys

import pytest

from . import precision
from .precision import Library

LIBRARIES = precision.libraries()
IDS = [f"{lib.name}-{lib.version}" for lib in LIBRARIES]


@pytest.fixture(scope="module", params=LIBRARIES, ids=IDS)
def lib(request: pytest.FixtureRequest) -> Library:
    try:
        precision.sources(request.param)
    except precision.MissingWheel as exc:
        pytest.fail(str(exc))
    return request.param


def test_two_libraries_other_than_transformers_are_pinned() -> None:
    assert len({lib.name for lib in LIBRARIES} - {"transformers"}) >= 2


def test_the_library_is_read_not_imported(lib: Library) -> None:
    assert precision.sources(lib)
    assert lib.name not in sys.modules


def test_no_label_is_stale(lib: Library) -> None:
    texts = precision.sources(lib)
    stale = [
        (path, line)
        for (path, line, *_), label in precision.labels(lib).items()
        if precision.snippet_hash(texts.get(path, ""), line) != label["snippet"]
    ]
    assert not stale, f"labelled lines changed: {stale}"


def test_every_label_has_a_verdict_and_a_reason(lib: Library) -> None:
    for label in precision.labels(lib).values():
        assert label["verdict"] in {"tp", "fp"} and label["reason"].strip(), label


def test_every_sampled_finding_is_labelled(lib: Library) -> None:
    missing = [k for row in precision.precision(lib) for k in row.unlabelled]
    assert not missing, f"judge these findings by hand and add them to {lib.labels_path}: {missing}"


def test_every_rule_meets_its_precision_goal(lib: Library) -> None:
    below = [
        f"{row.code}: {row.true}/{row.sampled} = {row.precision:.0%} < {row.goal:.0%}"
        for row in precision.precision(lib)
        if row.precision < row.goal
    ]
    assert not below, "\n" + precision.table([lib])


PARTLY_JUDGED = [lib for lib in LIBRARIES if lib.name in precision.JUDGED]


@pytest.mark.parametrize(
    "partly", PARTLY_JUDGED, ids=[f"{lib.name}-{lib.version}" for lib in PARTLY_JUDGED]
)
def test_a_library_judged_for_some_rules_is_sampled_for_those_only(partly: Library) -> None:
    lib = partly
    precision.sources(lib)  # a missing wheel fails here, as in the fixture
    prefix = precision.JUDGED[lib.name]
    rows = precision.precision(lib)
    assert rows and all(row.code.startswith(prefix) for row in rows)
    # the library also has findings of other rules: they are left out, not lost
    assert any(not f.code.startswith(prefix) for f in precision.findings(lib))
    print("\n" + precision.table([lib]))  # the XLA rules' figures, as docs/rules.md records them
