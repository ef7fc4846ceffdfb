"""Settings layers: defaults < pyproject < initializationOptions < workspace/configuration."""

from __future__ import annotations

import pytest
from trnlens.settings import (
    Layer,
    SettingsError,
    client_layer,
    pyproject_layer,
    resolve,
)


def _pyproject(tmp_path, body: str) -> Layer:
    (tmp_path / "pyproject.toml").write_text(body, "utf-8")
    return pyproject_layer(tmp_path)


def test_defaults():
    settings = resolve([])
    assert settings.target == "local" and set(settings.targets) == {"local"}
    assert (settings.warmup, settings.steps, settings.repeats) == (3, 5, 20)
    assert settings.hotspot_threshold == 0.2 and settings.hints_enabled is True


def test_pyproject_snake_case_keys_and_nested_tables(tmp_path):
    layer = _pyproject(
        tmp_path,
        "[tool.trnlens]\nhotspot_threshold = 0.5\ntimeout_seconds = 30\nsteps = 2\n"
        "[tool.trnlens.hints]\nenabled = false\n[tool.trnlens.rules]\nignore = ['TRN001']\n",
    )
    settings = resolve([layer])
    assert settings.hotspot_threshold == 0.5 and settings.timeout_seconds == 30
    assert settings.steps == 2 and settings.hints_enabled is False
    assert settings.rules_ignore == ("TRN001",)
    assert settings.origins["steps"] == "pyproject.toml"


def test_missing_or_broken_pyproject_is_an_empty_layer(tmp_path):
    assert pyproject_layer(tmp_path).values == {}
    assert _pyproject(tmp_path, "[tool.trnlens\n").values == {}


@pytest.mark.parametrize(
    "options",
    [
        {"steps": 7, "hints": {"enabled": False}},
        {"trnlens": {"steps": 7, "hints": {"enabled": False}}},
        {"trnlens.steps": 7, "trnlens.hints.enabled": False},
    ],
)
def test_client_layer_accepts_the_shapes_clients_send(options):
    settings = resolve([client_layer(options, "initializationOptions")])
    assert settings.steps == 7 and settings.hints_enabled is False


def test_later_layers_win(tmp_path):
    repo = _pyproject(tmp_path, "[tool.trnlens]\nsteps = 2\nwarmup = 4\nmode = 'training'\n")
    init = client_layer({"steps": 3, "warmup": 5}, "initializationOptions")
    config = client_layer({"steps": 9}, "workspace/configuration")
    settings = resolve([repo, init, config])
    assert (settings.steps, settings.warmup, settings.mode) == (9, 5, "training")
    assert settings.origins["steps"] == "workspace/configuration"


def test_a_target_defined_twice_is_taken_whole_from_the_winner(tmp_path):
    repo = _pyproject(
        tmp_path,
        "[tool.trnlens.targets.box]\nhost = 'repo.example'\nuser = 'ci'\npython = '/opt/py'\n",
    )
    client = client_layer({"targets": {"box": {"host": "mine.example"}}}, "workspace/configuration")
    box = resolve([repo, client]).targets["box"]
    assert box.kind == "ssh" and box.fields == {"host": "mine.example"} and box.python is None
    assert box.origin == "workspace/configuration"


def test_untrusted_workspace_drops_repository_targets_and_says_why(tmp_path):
    repo = _pyproject(
        tmp_path,
        "[tool.trnlens]\ntarget = 'box'\nsteps = 2\n"
        "[tool.trnlens.targets.box]\npython = 'bin/python'\n",
    )
    settings = resolve([repo], trusted=False)
    assert settings.target == "local" and "box" not in settings.targets
    assert settings.steps == 2  # figures-only settings still apply
    with pytest.raises(KeyError, match="not trusted"):
        settings.target_named("box")
    # The user's own settings may still name a target the repository also defines.
    own = {"targets": {"box": {"python": "/usr/bin/python3"}}}
    mine = client_layer(own, "initializationOptions")
    trusted_by_user = resolve([repo, mine], trusted=False)
    assert trusted_by_user.target_named("box").python == "/usr/bin/python3"
    assert resolve([repo], trusted=True).target_named().python == "bin/python"


def test_unknown_target_names_the_known_ones():
    with pytest.raises(KeyError, match="unknown target 'gpu'.*local"):
        resolve([]).target_named("gpu")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"steps": 0}, "steps .*at least 1"),
        ({"warmup": "3"}, "warmup .*wrong type"),
        ({"hotspotThreshold": 2}, "share between 0 and 1"),
        ({"backend": "tpu"}, "backend .*one of"),
        ({"hints": {"enabled": 1}}, "hints.enabled"),
        ({"rules": {"select": "TRN001"}}, "rules.select"),
        ({"timeoutSeconds": True}, "timeoutSeconds .*number"),
        ({"targets": {"x": {"kind": "ftp"}}}, "kind must be one of"),
    ],
)
def test_malformed_values_name_the_key_and_its_source(values, message):
    with pytest.raises(SettingsError, match=message) as caught:
        resolve([client_layer(values, "workspace/configuration")])
    assert "workspace/configuration" in str(caught.value) or "targets" in str(caught.value)


def test_a_target_of_several_hosts_builds_from_the_settings_targets(tmp_path):
    from trnlens.lsp.runs import build_target
    from trnlens.targets.nodes import NodesTarget

    layer = _pyproject(
        tmp_path,
        '[tool.trnlens.targets.a]\nhost = "trn-a"\naddress = "10.0.0.1"\n'
        '[tool.trnlens.targets.b]\nhost = "trn-b"\nenv = { GLOO_SOCKET_IFNAME = "ens5" }\n'
        '[tool.trnlens.targets.pair]\nnodes = ["a", "b"]\nnproc_per_node = 4\n',
    )
    settings = resolve([layer])
    assert settings.targets["pair"].kind == "nodes"
    built = build_target(settings.targets["pair"], tmp_path, settings.targets)
    assert isinstance(built, NodesTarget) and built.nproc_per_node == 4
    assert [(n.name, n.reach(), n.env) for n in built.nodes] == [
        ("a", "10.0.0.1", {}), ("b", "trn-b", {"GLOO_SOCKET_IFNAME": "ens5"}),
    ]  # fmt: skip
