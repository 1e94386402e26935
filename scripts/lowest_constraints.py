"""Print pip constraints that pin every runtime dependency to its declared floor.

    python scripts/lowest_constraints.py > lowest.txt
    pip install -c lowest.txt '.[test]'

.ci/run installs relay this way into a second fresh venv and runs the smoke tests, so
every floor in pyproject.toml is a version relay has really run on (design.md §15).
Only relay's own dependencies are pinned; what they need in turn resolves as usual (what
`uv pip install --resolution lowest-direct` does). A dependency without a `>=` floor is
an error: a floor nobody states is a floor nobody tests.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)(;.*)?$")


def dependencies(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            sys.exit("lowest_constraints.py needs Python 3.11+ (tomllib) or the tomli package")
    with open(pyproject, "rb") as f:
        return list(tomllib.load(f)["project"]["dependencies"])


def floors(requirements: list[str]) -> dict[str, str]:
    """{name: lowest allowed version} for every requirement; SystemExit when one has none."""
    out = {}
    for requirement in requirements:
        m = _REQUIREMENT.match(requirement)
        if not m:
            sys.exit(f"cannot read the requirement {requirement!r}")
        name, specifiers = m.group(1), m.group(3)
        low = [s.strip()[2:].strip() for s in specifiers.split(",") if s.strip().startswith(">=")]
        if len(low) != 1:
            sys.exit(
                f"{name}: declare exactly one floor (>=X) in pyproject.toml, "
                f"not {specifiers.strip()!r}"
            )
        out[name] = low[0]
    return out


def main() -> None:
    for name, version in floors(dependencies()).items():
        print(f"{name}=={version}")


if __name__ == "__main__":
    main()
