"""A host's part of a multi-host run: the request's ``nodes`` checked, torchrun's static
rendezvous on the first host, and which global ranks each host holds."""

from __future__ import annotations

import pytest
from trnlens.agent import errors
from trnlens.agent.ranks import launch as ranks

NODES = {"count": 2, "rank": 1, "master_addr": "10.0.0.1", "master_port": 29555,
         "run_id": "20261205T080000-abcdef12", "host": "trn-b"}  # fmt: skip


def test_the_second_host_joins_the_first_hosts_rendezvous():
    command = ranks._command(2, "/w", ranks.nodes_of({"nodes": NODES}))
    at = command.index("--nnodes")
    assert command[at : at + 8] == [
        "--nnodes", "2", "--node-rank", "1", "--master-addr", "10.0.0.1", "--master-port", "29555",
    ]  # fmt: skip
    assert "--rdzv-backend" not in command  # static: node ranks, so global ranks, in host order
    assert command[command.index("--nproc-per-node") + 1] == "2"


def test_one_host_keeps_its_own_rendezvous_on_loopback():
    command = ranks._command(2, "/w")
    assert command[command.index("--nnodes") + 1] == "1"
    assert command[command.index("--master-addr") + 1] == "127.0.0.1"


@pytest.mark.parametrize(
    "bad",
    [
        {"count": 2, "rank": 2},
        {"rank": -1},
        {"count": True},
        {"master_port": 70000},
        {"master_addr": "-oProxyCommand=x"},
        {"master_addr": "a b"},
        {"run_id": "../../etc"},
        {"run_id": None},
    ],
)
def test_bad_nodes_are_refused_with_what_is_wrong(bad):
    with pytest.raises(errors.AgentError) as caught:
        ranks.nodes_of({"nodes": {**NODES, **bad}})
    assert caught.value.kind == "usage" and "nodes" in str(caught.value)


def test_no_nodes_is_one_host():
    assert ranks.nodes_of({}) is None
