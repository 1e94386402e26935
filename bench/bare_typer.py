"""The baseline of the perf comparison: a bare Typer command that only prints."""

import typer

app = typer.Typer()


@app.command()
def hello(name: str = "world") -> None:
    print(f"hello {name}")


if __name__ == "__main__":
    app()
