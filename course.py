"""The course's setup and runs in one command, on Windows, macOS and Linux, without make:

    python course.py notebooks   # .venv with what the notebooks need, the shipped world, every notebook run
    python course.py test        # the same .venv plus the developer tools: the linter, then every test
    python course.py lab         # JupyterLab on the notebooks (installs it into .venv once)

Each command creates .venv (with the Python that runs this file) or reuses it, and installs the exact
versions of requirements.lock; it reinstalls when pyproject.toml or requirements.lock is newer than its
stamp in .venv. The Makefile's `make notebooks`, `make test` and `make lab` call these commands, so there
is one code path. Extra words after `test` go to pytest (`python course.py test -k metrics`).

Settings from the environment: PIP_ARGS (more pip arguments, for example PyTorch's CPU wheel index,
docs/platforms.md). Standard library only, and no syntax newer than Python 3.6 before the version check,
so that an old Python gets the sentence of tools/check_python.py instead of a SyntaxError.
"""
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
TOOLS = ROOT / "tools"
TORCH = "torch==2.13.0"  # named in the same pip call as everything else: one resolution
# What each install imports once after pip (which compiles no bytecode): the modules every kernel and test uses.
WARM = {"": "helpers.build.notebook, helpers.figures.explorers, nbclient, ipykernel.ipkernel, sklearn.calibration",
        "dev": "hypothesis, xdist, pytest, sphinx", "lab": "jupyterlab", "bench": "netcal, torchmetrics"}


def venv_python():
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def environment(**extra):
    """This process's environment for the commands it runs: bytecode written (one import compiles what the
    series uses; a machine that sets PYTHONDONTWRITEBYTECODE would recompile on every import), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def run(*args, **extra_env):
    print("+ " + " ".join(str(a) for a in args), flush=True)
    done = subprocess.run([str(a) for a in args], cwd=str(ROOT), env=environment(**extra_env))
    if done.returncode:
        sys.exit(done.returncode)


def check_python():
    sys.path.insert(0, str(TOOLS))
    import check_python
    said = check_python.problem(sys.version_info, sys.executable)
    if said:
        sys.exit("course.py: " + said)


def install(extra=""):
    """.venv with the package (and its `extra`: "dev", "lab" or "bench") at requirements.lock's versions, once: a stamp
    in .venv records it, and is stale when pyproject.toml or requirements.lock is newer."""
    stamp = VENV / (".installed" + ("-" + extra if extra else ""))
    sources = [ROOT / "pyproject.toml", ROOT / "requirements.lock"]
    if stamp.exists() and all(stamp.stat().st_mtime >= s.stat().st_mtime for s in sources):
        return
    if not venv_python().exists():
        check_python()
        print("+ creating .venv with " + sys.executable, flush=True)
        venv.create(str(VENV), with_pip=True)
    target = "." + ("[%s]" % extra if extra else "")
    pip_args = os.environ.get("PIP_ARGS", "").split()
    run(venv_python(), "-m", "pip", "install", "--quiet", "--no-compile", *pip_args,
        "-c", "requirements.lock", "-e", target, TORCH)
    run(venv_python(), "-c", "import " + WARM[""] + (", " + WARM[extra] if extra else ""))
    stamp.touch()


def notebooks():
    install()
    run(venv_python(), "-m", "helpers", "build")  # unpack the shipped world, build whatever it lacks
    run(venv_python(), "-m", "helpers", "notebooks", "--jobs", "2", OMP_WAIT_POLICY="PASSIVE")


def test(pytest_args):
    """The linter, then the tests with two workers of one torch thread each and OpenMP threads that sleep
    while they wait (two busy-waiting workers on two cores slowed a 20-second test to seven minutes)."""
    install("dev")
    run(venv_python(), "-m", "ruff", "check", "--quiet", "helpers", "tests", "tools", "book", "course.py")
    run(venv_python(), "-m", "pytest", "-q", "-n", "2", "--dist", "worksteal", *pytest_args,
        HELPERS_FAST="1", HELPERS_THREADS="1", OMP_WAIT_POLICY="PASSIVE")


def lab():
    install("lab")
    run(venv_python(), "-m", "jupyterlab", "notebooks")


COMMANDS = {"notebooks": "install what the notebooks need, unpack the shipped world, run every notebook",
            "test": "install the developer tools too, then the linter and every test (extra words go to pytest)",
            "lab": "open the notebooks in JupyterLab",
            "install": "only create or update .venv (install dev, lab or bench: with those extras)"}


def main(argv):
    if not argv or argv[0] not in COMMANDS:
        sys.exit("usage: python course.py COMMAND\n" + "\n".join(
            "  %-10s %s" % (name, what) for name, what in COMMANDS.items()))
    command, rest = argv[0], argv[1:]
    if command == "notebooks":
        notebooks()
    elif command == "test":
        test(rest)
    elif command == "lab":
        lab()
    elif rest and rest[0] not in WARM:
        sys.exit("course.py install: %r is not one of %s" % (rest[0], ", ".join(sorted(set(WARM) - {""}))))
    else:
        install(rest[0] if rest else "")


if __name__ == "__main__":
    main(sys.argv[1:])
