"""relay reaches the Click that Typer carries (private to Typer since 0.26) in one module,
relay_cli/cli/click_seam.py, and nowhere else; each name it takes there still has the
shape relay uses. A Typer release that moves, renames or reshapes one of them fails here,
before a person's command breaks (the lowest declared Typer runs this file too: .ci/run).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import typer
import typer.completion
from typer.core import TyperOption

from relay_cli.cli import click_seam
from relay_cli.cli.click_seam import Choice

ROOT = Path(__file__).resolve().parents[2]
SEAM = ROOT / "relay_cli" / "cli" / "click_seam.py"


def _private_uses(path: Path) -> list[str]:
    """What ``path`` takes from a private part of Typer or Click: an import of a module
    (or a name) starting with an underscore, a ``click`` import, an underscored attribute
    of an object that is not the module's own (``self``/``cls``), or Typer's copy of Click
    reached by its name."""
    found = []
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] in ("typer", "click") and (
                parts[0] == "click"
                or any(p.startswith("_") for p in parts)
                or any(a.name.startswith("_") for a in node.names)
            ):
                found.append(f"{path.name}:{node.lineno} from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "click" or (
                    parts[0] == "typer" and any(p.startswith("_") for p in parts)
                ):
                    found.append(f"{path.name}:{node.lineno} import {a.name}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            and node.attr in _CLICK_PRIVATE
        ):
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "typer._" in node.value or node.value.endswith("._click"):
                found.append(f"{path.name}:{node.lineno} {node.value!r}")
    return found


# Underscored names of Typer's and Click's objects (commands, contexts, parameters, types).
_CLICK_PRIVATE = {
    name
    for cls in (
        click_seam.ParamType,
        TyperOption,
        typer.core.TyperGroup,
        typer.core.TyperCommand,
        typer.Context,
    )
    for klass in cls.__mro__
    if klass.__module__.startswith("typer")
    for name in vars(klass)
    if name.startswith("_") and not name.startswith("__")
}


def test_no_module_but_the_seam_uses_a_private_part_of_typer_or_click():
    assert "_main_shell_completion" in _CLICK_PRIVATE  # (the scan knows Click's names)
    found = [
        use
        for path in sorted((ROOT / "relay_cli").rglob("*.py"))
        if path != SEAM
        for use in _private_uses(path)
    ]
    assert found == []


def test_the_seam_names_typer_s_click_openly():
    # its imports are plain (no name computed at run time), so a reader sees them
    assert _private_uses(SEAM)
    source = SEAM.read_text()
    assert "importlib" not in source and "__module__" not in source


def test_the_exceptions_parsing_raises_are_the_seam_s():
    assert issubclass(typer.BadParameter, click_seam.ClickException)
    assert issubclass(click_seam.MissingParameter, typer.BadParameter)
    assert issubclass(click_seam.NoArgsIsHelpError, click_seam.ClickException)
    for cls in (click_seam.ClickException, click_seam.MissingParameter):
        assert callable(cls.format_message)
    e = click_seam.MissingParameter(param_hint="'--to'")
    assert hasattr(e, "param")


def test_a_parameter_type_has_the_methods_relay_overrides():
    for name, params in {
        "convert": ["self", "value", "param", "ctx"],
        "get_metavar": ["self", "param", "ctx"],
        "shell_complete": ["self", "ctx", "param", "incomplete"],
    }.items():
        method = getattr(click_seam.ParamType, name)
        assert list(inspect.signature(method).parameters) == params, name


def test_typer_s_completion_entry_point_takes_what_the_seam_gives():
    assert list(inspect.signature(typer.completion.shell_complete).parameters) == [
        "cli",
        "ctx_args",
        "prog_name",
        "complete_var",
        "instruction",
    ]


def _tiny_app(seen: list):
    app = typer.Typer()

    @app.command()
    def pick(
        color: str = typer.Option(
            "red",
            "--color",
            click_type=Choice(("red", "green", "grey"), lambda v: None),
        ),
    ) -> None:
        seen.append((color, click_seam.current_obj()))

    return typer.main.get_command(app)


def test_a_choice_is_the_option_s_type_and_the_call_s_obj_is_current():
    seen: list = []
    command = _tiny_app(seen)
    option = next(p for p in command.params if p.name == "color")
    assert isinstance(option.type, Choice) and option.type.choices == ("red", "green", "grey")
    assert option.type.get_metavar(option, None) == "<red|green|grey>"
    marker = object()
    with command.make_context("pick", ["--color", "green"], obj=marker) as ctx:
        command.invoke(ctx)
    assert seen == [("green", marker)]
    assert click_seam.current_obj() is None  # outside a call


def test_completion_through_the_seam_offers_a_choice_s_values(capsys):
    """The request's words come from the call's environment (design.md §8); the process's
    environment is as it was afterwards."""
    import os

    command = _tiny_app([])
    before = dict(os.environ)
    environ = {"COMP_WORDS": "pick --color gr", "COMP_CWORD": "2"}
    assert click_seam.complete(command, None, "complete_bash", environ) == 0
    assert capsys.readouterr().out.split() == ["green", "grey"]
    assert dict(os.environ) == before
