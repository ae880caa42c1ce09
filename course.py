"""The course's setup and runs in one command, on Windows, macOS and Linux, without make:

    python course.py notebooks   # .venv with what the notebooks need, the shipped world, every notebook run
    python course.py test        # the same .venv plus the developer tools: the linter, then every test
    python course.py lab         # JupyterLab on the notebooks (installs it into .venv once)
    %run ../course.py kernel     # in a notebook cell, where the kernel lacks the packages (Colab, a JupyterHub)

Each command creates .venv (with the Python that runs this file) or reuses it, and installs the exact
versions of requirements.lock; it reinstalls when pyproject.toml or requirements.lock is newer than its
stamp in .venv. The Makefile's `make notebooks`, `make test` and `make lab` call these commands, so there
is one code path. Extra words after `test` go to pytest (`python course.py test -k metrics`). `kernel` is the
one command that uses no .venv: it installs into the environment of the Python that runs it, a notebook's
kernel (docs/troubleshooting.md has the cell).

Settings from the environment: PIP_ARGS (more pip arguments, for example PyTorch's CPU wheel index,
docs/platforms.md). Standard library only, and no syntax newer than Python 3.6 before the version check,
so that an old Python gets the sentence of tools/check_python.py instead of a SyntaxError.
"""
import importlib.util
import os
import platform
import re
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
TOOLS = ROOT / "tools"
TORCH = "torch==2.13.0"  # named in the same pip call as everything else: one resolution
# What each install imports once after pip (which compiles no bytecode): the modules every kernel and test uses.
WARM = {"": "helpers.build.notebook, helpers.figures.explorers, nbclient, ipykernel.ipkernel, sklearn.calibration",
        "dev": "hypothesis, xdist, pytest, sphinx", "lab": "jupyterlab",
        "bench": "netcal, torchmetrics", "grade": "otter, nbconvert"}


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


def python_check():
    """tools/check_python.py, imported without leaving tools/ on sys.path (which a notebook's kernel keeps)."""
    sys.path.insert(0, str(TOOLS))
    try:
        import check_python
    finally:
        sys.path.remove(str(TOOLS))
    return check_python


def check_python():
    said = python_check().problem(sys.version_info, sys.executable)
    if said:
        sys.exit("course.py: " + said)


def install(extra=""):
    """.venv with the package (and its `extra`: "dev", "lab", "bench" or "grade") at requirements.lock's versions,
    once: a stamp in .venv records it, and is stale when pyproject.toml or requirements.lock is newer. Every
    extra's install holds the package too, so a current stamp of any extra also does for the package alone
    (`make notebooks` after `make test` installs nothing)."""
    stamp = VENV / (".installed" + ("-" + extra if extra else ""))
    sources = [ROOT / "pyproject.toml", ROOT / "requirements.lock"]
    enough = [stamp] if extra else [stamp, *(VENV / (".installed-" + other) for other in WARM if other)]
    if any(s.exists() and all(s.stat().st_mtime >= source.stat().st_mtime for source in sources) for s in enough):
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
    install()  # then unpack the shipped world, build whatever the notebooks read that it lacks, run them
    run(venv_python(), "-m", "helpers", "notebooks", "--build", "--jobs", "2", OMP_WAIT_POLICY="PASSIVE")


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


def normal(name):
    """A distribution's name as pip compares them: `Jinja2` -> `jinja2`, `typing_extensions` -> `typing-extensions`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def kernel_problems():
    """What keeps this Python from running the notebooks, one short phrase each; [] when nothing does: helpers
    installed from this checkout, and its dependencies and theirs at the versions requirements.lock pins."""
    import json
    import tomllib
    from importlib import metadata
    from urllib.parse import urlparse
    from urllib.request import url2pathname
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        name, pinned, version = line.split("#")[0].partition("==")
        if pinned:
            pins[normal(name.strip())] = version.strip()
    # pip's record of an editable install (not the helpers.egg-info that setuptools leaves in the checkout),
    # compared as paths: a link, or Windows' drive letters, can spell the same folder another way
    sources = [json.loads(d.read_text("direct_url.json") or "{}").get("url", "")
               for d in metadata.distributions(name="helpers")]
    here = any(Path(url2pathname(urlparse(url).path)).resolve() == ROOT for url in sources if url.startswith("file:"))
    problems = [] if here else ["helpers from %s" % ROOT]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [(requirement, True) for requirement in project["dependencies"]]
    seen = set()
    while todo:
        requirement, needed = todo.pop()
        requirement, _, marker = requirement.partition(";")
        name = normal(re.match(r"\s*([A-Za-z0-9._-]+)", requirement).group(1))
        if "extra" in marker or name in seen or name not in pins:  # an extra's, or not this lock's (CUDA libraries)
            continue
        seen.add(name)
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            if needed:  # one with a marker (a platform, a Python version) may be missing where it does not apply
                problems.append("%s (none)" % name)
            continue
        if version.split("+")[0] != pins[name]:  # 2.13.0+cpu is torch 2.13.0
            problems.append("%s (%s, not %s)" % (name, version, pins[name]))
        todo += [(r, not r.partition(";")[2].strip()) for r in metadata.requires(name) or []]
    return problems


def installed_versions():
    from importlib import metadata
    return {normal(d.metadata["Name"]): d.version for d in metadata.distributions() if d.metadata["Name"]}


def use_checkout():
    """Make helpers importable in this (running) Python: an editable install's .pth file is read only when
    Python starts, so add the checkout to sys.path (last, as the .pth would) and forget the import caches.
    Not `if ROOT not in sys.path`: `%run` puts the script's folder, ROOT, first while it runs, then removes it."""
    if str(ROOT) not in sys.path[1:]:
        sys.path.append(str(ROOT))
    importlib.invalidate_caches()


def kernel_step(what, *args):
    """Run one step of `kernel` with the kernel's Python, its output shown in the notebook; exit, saying which
    step failed, if it fails."""
    print("+ " + " ".join(str(a) for a in args), flush=True)
    start = time.time()
    done = subprocess.run([str(a) for a in args], cwd=str(ROOT), env=environment(), capture_output=True, text=True)
    print(re.sub(r"\x1b\[[0-9;]*m", "", done.stdout), end="", flush=True)  # pip's colour codes, even with --quiet
    sys.stderr.write(re.sub(r"\x1b\[[0-9;]*m", "", done.stderr))
    if done.returncode:
        sys.exit("course.py kernel: %s failed (exit status %d; its own message is above)" % (what, done.returncode))
    return time.time() - start


def kernel():
    """Inside a notebook's kernel (`%run ../course.py kernel`, so that sys.executable is the kernel's Python):
    install requirements.lock's versions and this checkout's helpers into the kernel's environment, unpack the
    shipped world, and make helpers importable without a restart. Nothing to do: it says so and stops."""
    check = python_check()
    if check.problem(sys.version_info, sys.executable):
        sys.exit("course.py kernel: this kernel runs Python %s (%s); the series runs on Python %d.%d to %d.%d: "
                 "choose a kernel with one of them" % ((platform.python_version(), sys.executable)
                                                        + check.OLDEST + check.NEWEST))
    problems = kernel_problems()
    if not problems:
        use_checkout()
        print("course.py kernel: nothing to do: %s (Python %s) has requirements.lock's versions and helpers "
              "from %s" % (sys.executable, platform.python_version(), ROOT))
        return
    print("course.py kernel: installing into %s (Python %s), a few minutes the first time; missing or other "
          "versions: %s" % (sys.executable, platform.python_version(),
                            ", ".join(problems[:4]) + (", and %d more" % (len(problems) - 4) if len(problems) > 4
                                                       else "")), flush=True)
    if importlib.util.find_spec("pip") is None:
        sys.exit("course.py kernel: this kernel's Python (%s) has no pip: add it (`python -m ensurepip` with that "
                 "Python), or choose a kernel whose Python has it" % sys.executable)
    before = installed_versions()
    took = kernel_step("installing the packages with pip", sys.executable, "-m", "pip", "install", "--quiet",
                       "--no-compile", *os.environ.get("PIP_ARGS", "").split(), "-c", "requirements.lock", "-e",
                       ROOT, TORCH)
    use_checkout()
    after = installed_versions()
    changed = {name for name, version in before.items() if after.get(name) != version}
    print("course.py kernel: installed %d packages in %d s" % (len(set(after.items()) - set(before.items())), took))
    took = kernel_step("unpacking the shipped world", sys.executable, "-m", "helpers", "build")
    print("course.py kernel: shipped world ready in %d s" % took)
    from importlib import metadata
    # What this kernel runs in memory at another version than the one now on disk (not a "_" module such as
    # setuptools' _distutils_hack, which a .pth file imports at start-up and the notebooks never use)
    stale = sorted(module for module, names in metadata.packages_distributions().items()
                   if module in sys.modules and not module.startswith("_")
                   and any(normal(name) in changed for name in names))
    problems = kernel_problems()
    if problems:
        sys.exit("course.py kernel: pip finished, but this kernel does not see %s: restart the kernel, then run "
                 "this cell again" % ", ".join(problems[:4]))
    if stale:
        sys.exit("course.py kernel: installed, but this kernel had already imported other versions of %s: restart "
                 "the kernel, then run this cell again" % ", ".join(stale))
    print("course.py kernel: ready: the notebooks' packages at requirements.lock's versions, and helpers from %s "
          "(no restart needed)" % ROOT)


COMMANDS = {"notebooks": "install what the notebooks need, unpack the shipped world, run every notebook",
            "test": "install the developer tools too, then the linter and every test (extra words go to pytest)",
            "lab": "open the notebooks in JupyterLab",
            "kernel": "install what the notebooks need into the Python that runs this (`%run ../course.py kernel` "
                      "in a notebook: its kernel)",
            "install": "only create or update .venv (install dev, lab, bench or grade: with those extras)"}


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
    elif command == "kernel":
        kernel()
    elif rest and rest[0] not in WARM:
        sys.exit("course.py install: %r is not one of %s" % (rest[0], ", ".join(sorted(set(WARM) - {""}))))
    else:
        install(rest[0] if rest else "")


if __name__ == "__main__":
    main(sys.argv[1:])
