"""The agent's side of a remote run's library texts: digests given to a result's library files,
and the ``files`` answer (checked against the digest, bounded, batched)."""

from __future__ import annotations

import base64
import hashlib
import zlib

from trnlens.agent.libraryfiles import contents
from trnlens.agent.libraryfiles.digests import Digests
from trnlens.agent.protocol import LIBRARY_FILE_MAX_BYTES


def _result(*paths) -> dict:
    return {"library_files": [{"path": str(p), "library": None} for p in paths]}


def test_each_library_file_gets_its_digest_and_size_and_a_big_one_only_its_size(tmp_path):
    small, big = tmp_path / "small.py", tmp_path / "big.py"
    small.write_text("x = 1\n")
    big.write_bytes(b"#" * (LIBRARY_FILE_MAX_BYTES + 1))
    result = {"variants": [_result(small, big, tmp_path / "gone.py")]}
    Digests().annotate(result)
    one, two, three = result["variants"][0]["library_files"]
    assert one["sha256"] == hashlib.sha256(b"x = 1\n").hexdigest() and one["bytes"] == 6
    assert two["sha256"] is None and two["bytes"] == LIBRARY_FILE_MAX_BYTES + 1
    assert three["sha256"] is None and three["bytes"] is None


def test_files_are_sent_by_digest_and_a_changed_one_is_refused(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("def f():\n    return 1\n")
    b.write_text("y = 2\n")
    digests = Digests()
    result = _result(a, b)
    digests.annotate(result)
    sha_a, sha_b = (e["sha256"] for e in result["library_files"])
    b.write_text("y = 3  # upgraded since the run\n")
    sent, changed, unknown = contents.answer(digests, [sha_a, sha_b, "0" * 64])
    assert zlib.decompress(base64.b64decode(sent["data"])) == a.read_bytes()
    assert sent["sha256"] == sha_a
    assert changed == {"sha256": sha_b, "error": f"{b} changed since the run"}
    assert unknown["error"] == "no file of this run has that digest"


def test_one_answer_is_bounded_and_says_what_comes_later(tmp_path, monkeypatch):
    monkeypatch.setattr(contents, "FILES_BATCH_BYTES", 10)
    files = [tmp_path / f"{n}.py" for n in range(3)]
    for path in files:
        path.write_text("z = 12345\n")  # 10 bytes each
    files[2].write_text("w = 1\n")
    digests = Digests()
    result = _result(*files)
    digests.annotate(result)
    shas = [e["sha256"] for e in result["library_files"]]
    first, second = contents.answer(digests, shas[1:])
    assert "data" in first and second == {"sha256": shas[2], "later": True}
