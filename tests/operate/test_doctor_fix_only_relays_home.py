"""`relay doctor --fix` sets the modes of a home relay made (a directory of yours holding
its relay.db), never of another directory a --home or RELAY_HOME names by mistake: a
project directory, ~, /etc (design.md §11). There it explains, and points relay
elsewhere."""

from __future__ import annotations

import os
import stat

import pytest


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.sqlite_only
def test_doctor_fix_leaves_a_directory_without_relay_db_alone(relay, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("a project, not a relay home\n")
    os.chmod(project, 0o755)
    os.chmod(project / "README.md", 0o644)
    r = relay("doctor", "--fix", "--home", project, "--json")
    assert _mode(project) == 0o755 and _mode(project / "README.md") == 0o644
    assert not (project / "relay.db").exists()
    assert any(line.startswith("not changed: ") for line in r.json["fixed"]), r.json["fixed"]
    state = next(c for c in r.json["checks"] if c["name"] == "state_dir")
    assert state["status"] == "fail" and "holds no relay.db" in state["detail"]
    assert "--fix" not in (state["fix"] or "")  # it points elsewhere instead
    # the refusal every other command gives names no --fix for it either
    err = relay("list", "--home", project, "--json").error
    assert err["code"] == "unsafe_state_dir"
    assert "relay did not make" in err["hint"] and "doctor --fix --home" not in err["hint"]
    # the code's fixed hint names doctor, which explains; the detail does not say it again
    assert err["hint"].count("`relay doctor --home") == 1, err["hint"]


@pytest.mark.sqlite_only
def test_doctor_fix_still_tightens_the_home_relay_made(relay):
    relay.join("alice")
    os.chmod(relay.home, 0o755)
    err = relay("list", "--json").error
    assert err["code"] == "unsafe_state_dir" and "`relay doctor --fix`" in err["hint"]
    assert err["hint"].count("`relay doctor`") == 1, err["hint"]
    r = relay("doctor", "--fix", "--json")
    assert _mode(relay.home) == 0o700
    assert any(line.startswith("fixed") or "0700" in line for line in r.json["fixed"])
