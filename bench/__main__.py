"""``python -m bench <crash|oncekill|faults|load|scale|latency|wake|watch|web|perf|driver|pgperf|netfault|e2ewake|e2ehooks|tokens|all> [options]``."""

from __future__ import annotations

import sys

USAGE = """usage: python -m bench SUBCOMMAND [options]   (from the project root)

  crash    SIGKILL each mutating command at random moments     (--trials 200)
  oncekill SIGKILL `relay once` between spawn and pid commit     (--trials 100)
  faults   full disk, read-only dir, long lock, WAL left by a kill
  load     8 x 200 send/claim/ack/reply/wait cycles; 16 x 100 id retries
  scale    send/claim/show/list at 1,000,000 requests vs empty; sweep/prune lock holds
  latency  wake-up latency of wait and claim --wait; CPU while blocked  (--trials 200)
  wake     send -> wake waiter (relay hook claude --wake) exit; its CPU  (--trials 50)
  watch    send -> relay watch (tmux, 80x24) shows it                  (--trials 30)
  web      send -> relay web's page (chromium) shows it; idle CPU vs a blocked wait,
           on SQLite and PostgreSQL                      (--trials 20, --seconds 60)
  netfault PostgreSQL across namespaces: cut connections, loss, delay, partitions
           (--kind cut|loss|delay|partition|all, --workers 4, --cycles 10, --seed S)
  e2ewake  send -> next model request in the real Claude Code / Codex TUI (--wakes 10)
  e2ehooks a headless run of each real runtime with relay's hooks vs without
           (--runs 5, --runtime RT repeatable)
  tokens   what relay's texts cost an agent in tokens, per runtime (--e2e: as they
           reached the model in the real runtimes; --relay PATH: another relay)
  perf     relay vs bare Typer, vs sqlite3, list 100k vs 10, empty vs full
  sametext send's same-text look: per call vs no index; send's CPU, empty vs 20k open
  driver   psycopg2 vs psycopg 3: import and a send-like call, time and memory
  pgperf   PostgreSQL vs SQLite send/claim, wake-up across namespaces, list 1M vs 10
  all      every one of the above with its default (full) sizes (not driver, pgperf)

crash and load take --postgres (load also --netns and --restart).

Each subcommand takes --help for its options.
"""


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    from . import (
        crash,
        driver,
        faults,
        latency,
        load,
        netfault,
        once_kill,
        perf,
        pgperf,
        sametext,
        scale,
        wake,
        watch_refresh,
        web,
    )

    if cmd == "driver":
        return driver.main(rest)
    if cmd == "pgperf":
        return pgperf.main(rest)
    if cmd == "netfault":
        return netfault.main(rest)
    if cmd == "tokens":  # not part of `all`: it measures words, not time
        from . import tokens

        return tokens.main(rest)
    if cmd == "e2ewake":  # needs the pinned runtimes (docs/e2e.md); not part of `all`
        from . import e2ewake

        return e2ewake.main(rest)
    if cmd == "e2ehooks":  # needs the pinned runtimes (docs/e2e.md); not part of `all`
        from . import e2ehooks

        return e2ehooks.main(rest)
    table = {
        "crash": crash.main,
        "oncekill": once_kill.main,
        "faults": faults.main,
        "load": load.main,
        "scale": scale.main,
        "latency": latency.main,
        "wake": wake.main,
        "watch": watch_refresh.main,
        "web": web.main,
        "perf": perf.main,
        "sametext": sametext.main,
    }
    if cmd == "all":
        code = 0
        for name, fn in table.items():
            print(f"\n===== python -m bench {name} =====", flush=True)
            code |= fn([])
        return code
    if cmd not in table:
        print(USAGE, file=sys.stderr)
        return 2
    return table[cmd](rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
