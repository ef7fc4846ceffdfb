"""`--target NAME` and `trnlens targets` with targets defined in pyproject.toml."""

from __future__ import annotations

import json

import pytest
from trnlens.targets import registry
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import SshTarget, TargetError

from tests.cli.conftest import trnlens
from tests.targets.conftest import needs_sshd


def write_project(root, test_host, remote_python, workdir):
    (root / "m.py").write_text(
        "import torch\n\n\ndef f(x=torch.ones(4, 8)):\n    return x.relu()\n"
    )
    args = json.dumps(test_host.ssh_args())
    (root / "pyproject.toml").write_text(
        "[tool.trnlens.targets.trn2-dev]\n"
        f'host = "{test_host.alias}"\nssh_args = {args}\npython = "{remote_python}"\n'
        f'workdir = "{workdir}"\nbackend = "cpu"\nenv = {{ OMP_NUM_THREADS = "1" }}\n'
    )


@needs_sshd
def test_profile_on_a_named_target(test_host, remote_python, tmp_path, ssh_cache):
    write_project(tmp_path, test_host, remote_python, tmp_path / "work")
    listing = trnlens("targets", cwd=tmp_path)
    assert "trn2-dev  ssh" in listing.stdout and "local" in listing.stdout
    done = trnlens("profile", "m.py::f", "--target", "trn2-dev", "--steps", "2", "--warmup", "1",
                   "--repeats", "2", "--format", "json", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["target"] == "trn2-dev" and result["backend"] == "cpu"
    assert result["dispatches_per_step"] == 1
    check = trnlens("targets", "check", "trn2-dev", cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert "torch           2." in check.stdout


def test_unknown_target_is_a_usage_error(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    done = trnlens("profile", "m.py::f", "--target", "nowhere", cwd=tmp_path)
    assert done.returncode == 2
    assert "unknown target 'nowhere' (defined: local)" in done.stderr


def test_fields_are_checked():
    assert isinstance(registry.from_fields("box", {"host": "box"}), SshTarget)
    assert isinstance(registry.from_fields("here", {"python": "/usr/bin/python3"}), LocalTarget)
    with pytest.raises(TargetError, match="unknown fields: hots"):
        registry.from_fields("box", {"hots": "box"})
    with pytest.raises(TargetError, match="not a host ssh accepts"):
        registry.from_fields("box", {"host": "-oProxyCommand=evil"})
    with pytest.raises(TargetError, match="not an environment name"):
        registry.from_fields("box", {"host": "box", "env": {"A;B": "1"}})
    with pytest.raises(TargetError, match="ssh_args must be a list"):
        registry.from_fields("box", {"host": "box", "ssh_args": "-p 22"})


def test_a_multi_host_target_names_its_nodes_and_is_checked():
    from trnlens.targets.nodes import NodesTarget

    defined = {
        "a": {"host": "root@trn-a", "address": "10.0.0.1"},
        "b": {"host": "trn-b"},
        "pair": {"nodes": ["a", "b"], "nproc_per_node": 2},
    }
    pair = registry.from_fields("pair", defined["pair"], defined)
    assert isinstance(pair, NodesTarget) and pair.nproc_per_node == 2
    assert [n.name for n in pair.nodes] == ["a", "b"]
    # where the others reach each host: its address, else its ssh host without the user
    assert [n.reach() for n in pair.nodes] == ["10.0.0.1", "trn-b"]
    with pytest.raises(TargetError, match=r"node 'c' is not a target \(defined: a, b\)"):
        registry.from_fields("pair", {"nodes": ["a", "c"]}, defined)
    with pytest.raises(TargetError, match="nodes must name 2 to 64 targets, got 1"):
        registry.from_fields("pair", {"nodes": ["a"]}, defined)
    with pytest.raises(TargetError, match="names a target twice"):
        registry.from_fields("pair", {"nodes": ["a", "a"]}, defined)
    with pytest.raises(TargetError, match="node 'pair' is not a target"):
        registry.from_fields("pair", {"nodes": ["a", "pair"]}, defined)
    with pytest.raises(TargetError, match="host belong on each node's own target"):
        registry.from_fields("pair", {"nodes": ["a", "b"], "host": "x"}, defined)
    with pytest.raises(TargetError, match="address must be a host name or IP address"):
        registry.from_fields("a", {"host": "a", "address": "-oProxyCommand=x"})
    nested = {**defined, "quad": {"nodes": ["pair", "a"]}}
    with pytest.raises(TargetError, match="node 'pair' is itself a multi-host target"):
        registry.from_fields("quad", nested["quad"], nested)
    local = registry.from_fields("here", {"kind": "local"})
    with pytest.raises(TargetError, match="set its `address`"):
        local.reach()
