"""Security of what reaches a shell or a message (issue 13): every remote command survives the
remote shell's parsing unchanged, whatever the names; secrets never appear in messages."""

from __future__ import annotations

import asyncio
import shlex
import stat
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from trnlens.jobs import AgentFailure, AgentProcess
from trnlens.targets.local import LocalTarget
from trnlens.targets.ssh import KILL, LAUNCH, PREPARE, SshTarget, quote_command

# Any text a file, function, target or path name could hold (no NUL: argv cannot carry one).
NAMES = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(NAMES, min_size=1, max_size=6))
def test_quoted_commands_reach_the_remote_shell_unchanged(argv):
    assert shlex.split(quote_command(argv)) == argv


@settings(max_examples=200, deadline=None)
@given(NAMES.filter(lambda s: s.strip() != ""), NAMES)
def test_user_values_stay_positional_parameters(workdir, python):
    """The compound scripts are constants: user values only ever follow them as arguments."""
    target = SshTarget("t", "host", workdir=workdir, python=python)
    argv = shlex.split(target.ssh(["sh", "-c", PREPARE, "sh", workdir, python, "agent.pyz"])[-1])
    assert argv == ["sh", "-c", PREPARE, "sh", workdir, python, "agent.pyz"]
    for script in (LAUNCH, KILL, PREPARE):
        assert "{" not in script.replace("{ ", "").replace(" }", "")  # no formatting slots


def test_hostile_names_run_nothing_in_a_real_shell(tmp_path):
    """The launch script run by a real sh with hostile values: nothing but the agent runs."""
    hostile = tmp_path / "we ird 'q' \"dq\" $(touch PWNED) ;& `touch PWNED2` *"
    hostile.mkdir()
    pidfile = hostile / "agent.pid"
    command = quote_command(["sh", "-c", LAUNCH, "sh", str(hostile), str(pidfile),
                             "printf", "%s", "$(touch PWNED3)"])  # fmt: skip
    done = subprocess.run(["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "$(touch PWNED3)"
    assert not list(tmp_path.glob("PWNED*")) and not list(hostile.glob("PWNED*"))
    assert pidfile.read_text().strip().isdigit()


def test_secrets_in_ssh_options_and_env_are_redacted_from_messages():
    target = SshTarget(
        "t", "host",
        ssh_args=["-F", "/home/me/ssh_config", "-o", "ProxyCommand=aws-proxy --token=tok-12345678",
                  "-oSetEnv=API_KEY=key-abcdefgh"],
        env={"HF_TOKEN": "hf_secret_value"},
    )  # fmt: skip
    stderr = (
        "proxy failed: aws-proxy --token=tok-12345678: refused (HF_TOKEN=hf_secret_value)\n"
        "token tok-12345678 rejected; key-abcdefgh"
    )
    message = target.explain(1, stderr, "the agent")
    for secret in ("tok-12345678", "hf_secret_value", "key-abcdefgh"):
        assert secret not in message
    assert "***" in message
    assert "hf_secret_value" not in repr(target) and "tok-12345678" not in repr(target)


def test_agent_stderr_with_a_secret_is_redacted(tmp_path):
    """An interpreter that prints its environment and dies: the error quotes it, redacted."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "starting with $HF_TOKEN" >&2\nexit 1\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    target = LocalTarget(python=str(fake), env={"HF_TOKEN": "hf_secret_value"})

    async def start():
        agent = AgentProcess(target)
        with pytest.raises(AgentFailure) as caught:
            await agent.start()
        await agent.close()
        return caught.value.error["message"]

    message = asyncio.run(start())
    assert "starting with ***" in message and "hf_secret_value" not in message
