"""``trnlens check``'s cache and parallel runs: the findings never depend on either."""

from __future__ import annotations

import gc
import importlib.metadata
import pickle
from pathlib import Path

import pytest
from trnlens.analysis import batch, cache

NAIVE = (
    "import torch\n\n\ndef f(x):\n"
    "    v = x.pow(2).mean(-1, keepdim=True)\n"
    "    return x * torch.rsqrt(v + 1e-6)\n"
)
MODELS = ("llama", "gemma", "t5", "bert", "mixtral", "whisper")


@pytest.fixture
def tree(tmp_path: Path) -> list[str]:
    """Real modeling files (read as text from the transformers wheel), a naive RMSNorm, a file
    that does not parse and one that does not decode, copied into a temporary project (the cache
    goes to a temporary directory too: see conftest.py)."""
    root = tmp_path / "project"
    root.mkdir()
    dist = importlib.metadata.distribution("transformers")
    for f in dist.files or []:
        parts = str(f).split("/")
        if len(parts) == 4 and parts[2] in MODELS and parts[3].startswith("modeling_"):
            (root / parts[3]).write_text(dist.locate_file(f).read_text("utf-8"), "utf-8")
    (root / "naive.py").write_text(NAIVE)
    (root / "broken.py").write_text("import torch\ndef f(:\n")
    (root / "latin.py").write_bytes(b"# caf\xe9\nimport torch\n")
    return sorted(str(p) for p in root.iterdir())


def as_json(results: list[batch.FileResult]) -> list[tuple[str, list[dict], str | None]]:
    return [(r.path, [f.to_json() for f in r.findings], r.error) for r in results]


def test_findings_are_the_same_with_and_without_cache_and_in_parallel(tree, monkeypatch):
    plain = as_json(batch.check_files(tree, workers=1))
    assert any(f for _, f, _ in plain) and len(plain) >= 8
    assert gc.isenabled()  # a batch turns the cyclic collector off for its own run only
    cold = batch.check_files(tree, workers=1, cache=cache.CheckCache(tree, None, None))
    warm_cache = cache.CheckCache(tree, None, None)
    assert all(warm_cache.get(p, batch._digest(p)) is not None for p in tree)
    warm = batch.check_files(tree, workers=1, cache=warm_cache)
    monkeypatch.setattr(batch, "PARALLEL_THRESHOLD", 2)
    parallel = batch.check_files(tree, workers=2)
    parallel_warm = batch.check_files(tree, workers=2, cache=cache.CheckCache(tree, None, None))
    for other in (cold, warm, parallel, parallel_warm):
        assert as_json(other) == plain


def test_a_changed_file_is_analysed_again(tree):
    naive = next(p for p in tree if p.endswith("naive.py"))
    batch.check_files(tree, workers=1, cache=cache.CheckCache(tree, None, None))
    Path(naive).write_text(NAIVE.replace("def f(x):", "def g(x):"))
    found = batch.check_files(tree, workers=1, cache=cache.CheckCache(tree, None, None))
    assert as_json(found) == as_json(batch.check_files(tree, workers=1))
    (entry,) = [r for r in found if r.path == naive]
    assert [f.qualname for f in entry.findings] == ["g"]


def test_a_changed_rule_set_or_rule_code_uses_another_cache(tree, monkeypatch):
    every = cache.CheckCache(tree, None, None)
    batch.check_files(tree, workers=1, cache=every)
    only = cache.CheckCache(tree, ["TRN1"], None)
    assert only.path != every.path and only.get(tree[0], batch._digest(tree[0])) is None
    selected = batch.check_files(tree, ["TRN1"], workers=1, cache=only)
    assert as_json(selected) == as_json(batch.check_files(tree, ["TRN1"], workers=1))
    assert cache.CheckCache(tree, None, ["TRN001"]).path != every.path
    monkeypatch.setattr(cache, "code_fingerprint", lambda: "an edited rule")
    assert cache.CheckCache(tree, None, None).path != every.path


def test_concurrent_runs_merge_and_a_torn_file_counts_as_empty(tree):
    first, second = cache.CheckCache(tree, None, None), cache.CheckCache(tree, None, None)
    first.put(tree[0], "a", [])
    second.put(tree[1], "b", [])
    first.save()
    second.save()  # does not drop what the first run stored meanwhile
    merged = cache.CheckCache(tree, None, None)
    assert merged.get(tree[0], "a") == [] and merged.get(tree[1], "b") == []
    merged.path.write_bytes(pickle.dumps({"x": 1})[:5])
    assert cache.CheckCache(tree, None, None).get(tree[0], "a") is None
    assert [p.name for p in merged.path.parent.iterdir()] == [merged.path.name]  # no temp files


def test_cli_jobs_and_cache_give_the_same_output(tree, capsys):
    from trnlens.cli import main

    folder = str(Path(tree[0]).parent)
    outputs = []
    for extra in (["--no-cache"], [], [], ["--jobs", "2"], ["-j", "1", "--no-cache"]):
        assert main(["check", folder, "--format", "json", *extra]) == 1
        outputs.append(capsys.readouterr().out)
    assert all(out == outputs[0] for out in outputs) and '"TRN001"' in outputs[0]
    assert cache.CheckCache(tree, None, None).path.exists()
    assert main(["check", folder, "--jobs", "0"]) == 2
    assert "--jobs/-j: must be a whole number of at least 1, got '0'" in capsys.readouterr().err
