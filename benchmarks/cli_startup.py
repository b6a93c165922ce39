"""CPU cost of starting the CLI, as a ratio against starting the interpreter, measured in the same run.

Goal: ``agent-fleet --help`` costs at most 0.3 s of CPU (user + system). The CLI installs its signal
handlers first and imports an engine only inside the command that runs one, so ``--help`` pays for the
interpreter, typer and the command definitions, nothing else.

Baseline: ``python -c pass`` with the same interpreter. Also shown: one command's ``--help``
(``deploy --help``) and ``import typer`` (the CLI framework on its own). Each figure is the median of
``--repeat`` runs, the commands interleaved so that they share whatever else the machine is doing.

Run: ``python benchmarks/cli_startup.py [--repeat N]``
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

GOAL_S = 0.3


def _agent_fleet() -> str:
    beside = Path(sys.executable).with_name("agent-fleet")
    found = str(beside) if beside.exists() else shutil.which("agent-fleet")
    if found is None:
        sys.exit("agent-fleet is not installed next to this interpreter (pip install -e .)")
    return found


def cpu_of(argv: list[str]) -> float:
    """User + system CPU seconds of one run of ``argv`` (the child's own, from the kernel)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    cli = _agent_fleet()
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import typer'": [sys.executable, "-c", "import typer"],
        "agent-fleet --help": [cli, "--help"],
        "agent-fleet deploy --help": [cli, "deploy", "--help"],
    }
    for argv in cases.values():  # warm the page cache and the bytecode caches for every case alike
        cpu_of(argv)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, argv in cases.items():
            samples[name].append(cpu_of(argv))
    median = {name: statistics.median(values) for name, values in samples.items()}
    base = median["python -c pass"]
    print(f"CPU per start (user + system), median of {args.repeat} runs:")
    for name, seconds in median.items():
        print(f"  {name:<28} {seconds:6.3f} s = {seconds / base:5.1f}x python -c pass  (+{seconds - base:.3f} s)")
    helps = median["agent-fleet --help"]
    verdict = "meets" if helps <= GOAL_S else "misses"
    ratio = helps / base
    print(f"agent-fleet --help: {helps:.3f} s of CPU, {ratio:.1f}x python -c pass; goal <= {GOAL_S} s: {verdict}")


if __name__ == "__main__":
    main()
