"""Two hosts x two ranks: each host a network namespace of its own with a real sshd (the test
sshd), one torchrun per host, the rendezvous on the first; one run comes back, with every rank's
profile and the straggler named. A rank that raises on the second host stops both hosts and
leaves no process and no run directory anywhere."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from trnlens import multihost
from trnlens.jobs import ProfileRequest
from trnlens.store import Store
from trnlens.targets.nodes import NodesTarget
from trnlens.targets.ssh import SshTarget

from tests.agent.conftest import line_of
from tests.components import needs
from tests.ranks.conftest import IMBALANCED, live_processes_naming
from tests.ranks.test_faults import RAISES
from tests.targets import netns, sshd
from tests.targets.conftest import needs_sshd

pytestmark = [
    needs_sshd,
    needs(None if shutil.which("ip") else "needs iproute2 (scripts/setup.sh installs it)"),
]

# the faults test's step, raising on the last rank (the second host's) instead of rank 1
RAISES_ON_THE_SECOND_HOST = RAISES.replace("get_rank() == 1", "get_rank() == 3").replace(
    "rank one gives up", "rank three gives up"
)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    """Two namespaces on a bridge, an sshd in each."""
    network = netns.make(2)
    started = []
    try:
        for index, ns in enumerate(network.namespaces):
            directory = tmp_path_factory.mktemp(f"sshd-{index}")
            started.append(
                sshd.start(
                    directory, alias=f"trn-node-{index}", address=ns.address, netns=ns.name
                )  # fmt: skip
            )
        yield network, started
    finally:
        for host in started:
            host.stop()
        network.remove()


def cluster(hosts, remote_python, tmp_path) -> NodesTarget:
    network, started = hosts
    nodes = [
        SshTarget(
            name=f"node-{'ab'[index]}",
            host=host.alias,
            ssh_args=host.ssh_args(),
            python=str(remote_python),
            workdir=str(tmp_path / f"remote work {index}"),
            backend="cpu",
            env={"GLOO_SOCKET_IFNAME": ns.interface},
            address=ns.address,
        )  # fmt: skip
        for index, (host, ns) in enumerate(zip(started, network.namespaces, strict=True))
    ]
    return NodesTarget(name="pair", nodes=nodes, nproc_per_node=2, backend="cpu")


def profile(root: Path, target: NodesTarget, qualname: str):
    request = ProfileRequest(
        variants=[{"path": str(root / "ranks_step.py"), "qualname": qualname}],
        project_root=root, backend="cpu", warmup=1, steps=3, repeats=3, nproc_per_node=2,
        timeout_s=300,
    )  # fmt: skip
    phases = []
    with Store(root) as store:
        outcome = asyncio.run(
            multihost.run_profile(request, store, target, on_progress=phases.append)
        )
    return outcome.data, phases


def left_behind(tmp_path: Path) -> list[str]:
    """Run directories on either host, and live processes of either host's agent."""
    found = []
    for index in (0, 1):
        work = tmp_path / f"remote work {index}"
        runs = work / "runs"
        found += [str(p) for p in runs.iterdir()] if runs.exists() else []
        found += live_processes_naming(str(work))
    return found


# 4 ranks on 2 cores: the OS parks a rank for 10 ms and more, as long as 48 matmuls take, so the
# last rank's extra work is made to outlast that (as in tests/ranks/test_straggler.py)
STRAGGLER = IMBALANCED.replace("48 if last", "200 if last")
assert STRAGGLER != IMBALANCED


def project(tmp_path: Path, step: str) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "ranks_step.py").write_text(step.lstrip("\n"))
    return root


def test_two_hosts_two_ranks_each_one_run_with_the_straggler_named(
    hosts, remote_python, tmp_path, ssh_cache
):
    root = project(tmp_path, STRAGGLER)  # the last rank (3, on the second host) works 200x
    outcome, phases = profile(root, cluster(hosts, remote_python, tmp_path), "step")

    assert outcome["error"] is None, outcome["error"]
    assert outcome["world_size"] == 4 and outcome["nproc_per_node"] == 2
    assert outcome["nodes"] == {"count": 2, "rank": 0, "hosts": ["node-a", "node-b"]}
    rows = sorted(outcome["ranks"], key=lambda r: r["rank"])
    assert [r["rank"] for r in rows] == [0, 1, 2, 3]
    assert [r["host"] for r in rows] == ["node-a", "node-a", "node-b", "node-b"]
    assert [r["local_rank"] for r in rows] == [0, 1, 0, 1]
    assert outcome["slowest_rank"] == 3
    if outcome["stragglers"]["trusted"]:  # HTA's late start, when the collective ends together
        assert outcome["stragglers"]["ranking"][0] == 3
    else:
        assert any("not to be trusted" in w for w in outcome["warnings"])
    assert sorted(outcome["alignment"]["hosts"]) == ["node-a", "node-b"]
    (collective,) = outcome["collectives"]
    assert (collective["path"], collective["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "dist.all_reduce(y)"),
    )
    assert {p["rank"] for p in collective["per_rank"]} == {0, 1, 2, 3}
    assert any("host 1 of 2" in p.message for p in phases)  # the first host's progress
    # every rank's profile in the one run folder, and the four on one axis
    run_dir = root / ".trnlens" / "artifacts" / outcome["run_id"]
    for rank in range(4):
        assert (run_dir / f"rank-{rank}" / "trace.json").stat().st_size > 0
    merged = json.loads((run_dir / "ranks-trace.json").read_text())
    names = {e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"rank 0", "rank 1", "rank 2", "rank 3"}
    assert outcome["artifacts"][0] == {"kind": "chrome_trace_ranks", "path": "ranks-trace.json"}
    with Store(root) as store:
        assert store.get(outcome["run_id"])["world_size"] == 4
    assert left_behind(tmp_path) == []


def test_a_rank_raising_on_the_second_host_stops_both_and_leaves_nothing(
    hosts, remote_python, tmp_path, ssh_cache
):
    root = project(tmp_path, RAISES_ON_THE_SECOND_HOST)
    outcome, _ = profile(root, cluster(hosts, remote_python, tmp_path), "step")

    error = outcome["error"]
    assert error["rank"] == 3 and error["host"] == "node-b", error
    assert "on node-b: rank 3: ValueError: rank three gives up" in error["message"]
    assert (error["path"], error["line"]) == (
        "ranks_step.py",
        line_of(root, "ranks_step.py", "raise ValueError"),
    )
    assert outcome["world_size"] == 4
    assert left_behind(tmp_path) == []


def test_an_unreachable_second_host_is_named_and_nothing_is_left(
    hosts, remote_python, tmp_path, ssh_cache
):
    from trnlens.jobs import AgentFailure

    target = cluster(hosts, remote_python, tmp_path)
    stranger = target.nodes[1].ssh_args + ["-o", "Port=1"]  # nothing listens there
    target.nodes[1].ssh_args = stranger
    root = project(tmp_path, IMBALANCED)
    with pytest.raises(AgentFailure) as caught:
        profile(root, target, "step")
    assert caught.value.kind == "environment"
    assert "cannot reach trn-node-1" in caught.value.error["message"], caught.value.error
    assert left_behind(tmp_path) == []


def test_the_cli_runs_a_target_of_two_nodes_from_pyproject(
    hosts, remote_python, tmp_path, ssh_cache
):
    from tests.cli.conftest import trnlens

    network, started = hosts
    root = project(tmp_path, IMBALANCED)
    table = ""
    for index, (host, ns) in enumerate(zip(started, network.namespaces, strict=True)):
        table += (
            f'[tool.trnlens.targets.node-{"ab"[index]}]\nhost = "{host.alias}"\n'
            f'ssh_args = {json.dumps(host.ssh_args())}\npython = "{remote_python}"\n'
            f'workdir = "{tmp_path / f"remote work {index}"}"\nbackend = "cpu"\n'
            f'address = "{ns.address}"\nenv = {{ GLOO_SOCKET_IFNAME = "{ns.interface}" }}\n'
        )
    table += '[tool.trnlens.targets.pair]\nnodes = ["node-a", "node-b"]\nnproc_per_node = 2\n'
    (root / "pyproject.toml").write_text(table)
    listing = trnlens("targets", cwd=root)
    assert "pair    nodes  node-a, node-b" in listing.stdout, listing.stdout
    done = trnlens("profile", "ranks_step.py::step", "--target", "pair", "--backend", "cpu",
                   "--steps", "2", "--warmup", "1", "--repeats", "2", "--format", "json",
                   cwd=root)  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["target"] == "pair" and result["world_size"] == 4
    # (which rank is slowest is the first test's; two steps under load do not say it reliably)
    assert [r["host"] for r in sorted(result["ranks"], key=lambda r: r["rank"])] == [
        "node-a", "node-a", "node-b", "node-b",
    ]  # fmt: skip
    assert left_behind(tmp_path) == []


def test_a_cancel_stops_both_hosts_and_leaves_nothing(hosts, remote_python, tmp_path, ssh_cache):
    from trnlens.jobs import AgentFailure

    from tests.ranks.test_faults import SLOW

    root = project(tmp_path, SLOW)
    target = cluster(hosts, remote_python, tmp_path)
    warming = asyncio.Event()

    def on_progress(message):
        if "rank 0" in message.message and message.phase == "warm-up":
            warming.set()  # every rank, on both hosts, is in the user's steps

    async def scenario():
        request = ProfileRequest(
            variants=[{"path": str(root / "ranks_step.py"), "qualname": "step"}],
            project_root=root, backend="cpu", warmup=50, steps=3, repeats=3, nproc_per_node=2,
            timeout_s=300,
        )  # fmt: skip
        with Store(root) as store:
            task = asyncio.create_task(
                multihost.run_profile(request, store, target, on_progress=on_progress)
            )
            waiting = asyncio.create_task(warming.wait())
            await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)
            assert not task.done(), task.result()
            task.cancel()
            with pytest.raises((asyncio.CancelledError, AgentFailure)):
                await task

    asyncio.run(scenario())
    assert left_behind(tmp_path) == []
