"""`relay schema`: the interface described for machines, from the live definitions."""

from __future__ import annotations

from ..core.output import Output
from .app import HomeOpt, JsonOpt, app, call_context, examples


@app.command(
    epilog=examples(
        "relay schema | python3 -m json.tool | less",
    )
)
def schema(json_: JsonOpt = False, home: HomeOpt = None) -> int:
    """Print the interface as JSON: commands, options, errors, states.

    One JSON document.
    Built from the code's own definitions (command tree, error taxonomy, transition
    table, request serializer). The output is always JSON; --json and --home are accepted
    for uniformity, and no state is read.
    """
    import json

    from . import schema as schema_mod

    del json_, home
    out = Output.of(call_context(), json_mode=True)
    out.line(json.dumps(schema_mod.build(), indent=2, ensure_ascii=False))
    return 0
