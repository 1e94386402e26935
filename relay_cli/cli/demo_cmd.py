"""`relay demo`: the main job, narrated, in a throwaway home."""

from __future__ import annotations

from typing import Annotated

import typer

from ..core.command import relay
from ..core.output import Output, inert_line
from .app import HomeOpt, JsonOpt, app, call_context, examples


@app.command(
    epilog=examples(
        "relay demo",
        "relay demo --keep   # keep the throwaway home to look around in it",
    )
)
def demo(
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the throwaway home afterwards (its path is printed)."),
    ] = False,
    json_: JsonOpt = False,
    home: HomeOpt = None,
) -> int:
    """See two peers hand work over, step by step, in a throwaway home.

    Runs real `relay` processes for two peers in a throwaway home (never yours): alice
    sends bob a request with an id it chose; bob, already waiting, claims, acks and
    replies while alice waits; alice's response is lost, so she sends again and relay
    answers duplicate: yes, already sent, nothing new queued. Then `relay list` and
    `relay show ID --events` show it. --home names an empty or missing directory to use.
    """
    from ..operate import demo as demo_lib

    ctx = call_context()
    out = Output.of(ctx, json_)
    path = demo_lib.home_for(home)
    narrate = _Narrator(out)
    if not out.json_mode:
        out.para(f"relay demo: two peers hand each other work in a throwaway home, {path}")
    try:
        d = demo_lib.run(path, narrate, ctx.environ)
        if out.json_mode:
            out.json(d.to_json(kept=keep or home is not None))
        else:
            narrate("step", "Every request, as `relay list` shows it:")
            narrate("cmd", "relay list")
            out.stdout.flush()
            demo_lib.relay_command(path, "list", environ=ctx.environ, stdout=out.stdout)
            narrate("step", "And the request's history:")
            show = relay("show", d.request_id[:8], "--events")  # what it says is what it runs
            narrate("cmd", show.text())
            out.stdout.flush()
            demo_lib.relay_command(path, *show.args, environ=ctx.environ, stdout=out.stdout)
    finally:
        if not keep and home is None:
            demo_lib.remove(path)
    if not out.json_mode:
        # the demo's point, where it is still on an 80x24 screen when the demo ends
        out.line("")
        out.para(
            f"In short: alice sent {d.request_id[:8]} with an id it chose; bob claimed, "
            "acked and replied; alice's resend of the same id and text was answered "
            "duplicate: yes (already sent, nothing new queued): one request, one job."
        )
        if keep or home is not None:
            out.line("The home was kept; to look around in it:")
            out.line(f"  {demo_lib.look_around(path, ctx.database_url_given())}")  # whole, to copy
        else:
            out.para("The throwaway home was removed (relay demo --keep keeps it).")
    return 0


class _Narrator:
    """Each step as a person would read it: what happens, the command and who runs it,
    what relay answered."""

    def __init__(self, out: Output) -> None:
        self.out = out

    def __call__(self, kind: str, text: str, who: str | None = None) -> None:
        out = self.out
        if out.json_mode:
            return
        text = inert_line(text)
        if kind == "step":
            out.line("")
            self._styled("", text, "bold")
        elif kind == "cmd":
            self._styled(f"  {who}$ " if who else "  $ ", text, "cyan")
        else:
            self._styled("    -> ", text, "green")

    def _styled(self, lead: str, text: str, style: str) -> None:
        """``lead`` + ``text``, wrapped between words, continued under the text."""
        out = self.out
        width = out.width
        if width is None:  # not on a terminal
            out.line(lead + text)
            return
        from rich.text import Text

        from ..core.output import wrap

        lines = wrap(text, max(20, width - len(lead)), out.ellipsis)
        out.print_lines(
            [
                Text((lead if i == 0 else " " * len(lead)) + ln, style=style if out.color else "")
                for i, ln in enumerate(lines)
            ]
        )
