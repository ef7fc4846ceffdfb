"""NEFF/NTFF pairing over every documented layout (docs/neuron.md), on files made here."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types
from trnlens.explorer import artifacts
from trnlens.lsp import hovers

from tests.lsp.test_features import _doc, _result

H1, H2 = "395760075800974", "112233445566"


def _touch(path: Path, size: int = 10) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def _names(files) -> list[str]:
    return [f.path.name for f in files]


def test_documented_layout_with_timestamp_and_profile_nc_ntffs(tmp_path):
    ts = tmp_path / "neuron" / "i-0abc_pid_4242" / "20260101T000000"
    _touch(ts / f"neff_{H1}_vnc_0.neff", 2000)
    _touch(ts / "profile_nc_0_session_0.ntff", 3000)
    _touch(ts / "profile_nc_1_session_0.ntff", 0)  # an unused NeuronCore
    for name in ("ntrace.pb", "trace_info.pb", "cpu_util.pb", "host_mem.pb"):
        _touch(ts / name)
    _touch(ts / "trace.json")
    found = artifacts.find(tmp_path)
    assert len(found.pairs) == 1 and found.pairs[0].hash == H1
    assert _names(found.pairs[0].ntffs) == ["profile_nc_0_session_0.ntff",
                                            "profile_nc_1_session_0.ntff"]  # fmt: skip
    assert _names(found.empty_ntffs) == ["profile_nc_1_session_0.ntff"]
    assert not found.orphan_neffs and not found.orphan_ntffs
    assert sorted(_names(found.runtime)) == ["cpu_util.pb", "host_mem.pb", "ntrace.pb",
                                             "trace_info.pb"]  # fmt: skip
    assert found.system_dirs == [ts]
    assert found.downloads() == [ts / f"neff_{H1}_vnc_0.neff", ts / "profile_nc_0_session_0.ntff"]


def test_no_timestamp_level_hashed_names_several_ntffs_and_orphans(tmp_path):
    pid = tmp_path / "i-0abc_pid_1"
    _touch(pid / f"neff_{H1}.neff")
    _touch(pid / f"{H1}_instid_0_vnc_0.ntff")
    _touch(pid / f"{H1}_instid_0_vnc_1.ntff", 0)
    _touch(pid / f"neff_{H2}.neff")  # no NTFF
    _touch(pid / "999_instid_0_vnc_0.ntff")  # no NEFF
    _touch(pid / "trace_info.pb")  # ntrace.pb missing: not a system profile
    found = artifacts.find(tmp_path)
    assert [(p.hash, len(p.ntffs)) for p in found.pairs] == [(H1, 2)]
    assert _names(found.orphan_neffs) == [f"neff_{H2}.neff"]
    assert _names(found.orphan_ntffs) == ["999_instid_0_vnc_0.ntff"]
    assert found.system_dirs == []
    text = "\n".join(artifacts.summary_lines(found))
    assert "no NTFF (orphan)" in text and "no NEFF with its hash (orphan)" in text
    assert "1 empty NTFF:" in text


def test_neff_in_a_separate_cache_still_pairs_by_hash(tmp_path):
    _touch(tmp_path / "neff_cache" / f"neff_{H2}.neff")
    _touch(tmp_path / "out" / "i_pid_2" / "t" / f"{H2}_instid_3_vnc_7.ntff")
    found = artifacts.find(tmp_path)
    assert [(p.hash, _names(p.ntffs)) for p in found.pairs] == [(H2, [f"{H2}_instid_3_vnc_7.ntff"])]


def test_unhashed_ntff_beside_two_neffs_is_an_orphan_not_a_guess(tmp_path):
    _touch(tmp_path / f"neff_{H1}.neff")
    _touch(tmp_path / f"neff_{H2}.neff")
    _touch(tmp_path / "profile_nc_0_session_0.ntff")
    found = artifacts.find(tmp_path)
    assert found.pairs == [] and _names(found.orphan_ntffs) == ["profile_nc_0_session_0.ntff"]
    assert len(found.orphan_neffs) == 2


def test_hostile_names_links_and_missing_directory(tmp_path):
    odd = tmp_path / "we|ird `dir` $(rm -rf ~)"
    _touch(odd / f"neff_{H1}.neff")
    _touch(odd / f"{H1}_instid_0_vnc_0.ntff")
    _touch(odd / "neff_123.neff.txt")
    _touch(odd / "neff_abc.neff")  # no numeric hash: an orphan of its own
    (odd / f"{H1}_instid_0_vnc_9.ntff").symlink_to("/etc/passwd")  # never followed
    (tmp_path / "loop").symlink_to(tmp_path)
    found = artifacts.find(tmp_path)
    assert [(p.hash, _names(p.ntffs)) for p in found.pairs] == [(H1, [f"{H1}_instid_0_vnc_0.ntff"])]
    assert _names(found.orphan_neffs) == ["neff_abc.neff"]
    text = "\n".join(artifacts.summary_lines(found))
    assert "we\\|ird 'dir'" in text  # neither breaks the table nor the code span
    assert not artifacts.find(tmp_path / "absent").found


def test_run_hover_lists_pairs_with_sizes(tmp_path):
    store = tmp_path / ".trnlens" / "artifacts"
    run = store / "r1" / "neuron" / "i_pid_1"
    _touch(run / f"neff_{H1}.neff", 2_500_000)
    _touch(run / f"{H1}_instid_0_vnc_0.ntff", 1500)
    _touch(run / "ntrace.pb", 10)
    doc = _doc()
    doc.place(_result())
    text = hovers.hover(doc, types.Position(3, 0), store).contents.value
    assert "**Neuron profile**" in text
    assert f"NEFF `neuron/i_pid_1/neff_{H1}.neff` (2.5 MB) ↔ NTFF" in text
    assert "(1.5 kB)" in text and "runtime trace: `neuron/i_pid_1/ntrace.pb` (10 B)" in text
    without = hovers.hover(doc, types.Position(3, 0), tmp_path / "nothing").contents.value
    assert "Neuron profile" not in without
