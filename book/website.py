"""The course website's own Sphinx hooks (loaded by book/conf.py).

- The navigation: hidden toctrees, one per part of conf.PARTS, are appended to the front page
  (docs/guide.md) while Sphinx reads it, and book/solutions.md gets the list of answer twins
  (notebooks/solutions/*.ipynb); without twins that page and its part are left out.
- The front page opens with a short "Start here" block (get the code, what to read first, where the
  answers are), put under its title while Sphinx reads it: the guide itself says it after 3,000 words.
- The repository's address (`repository_url`): one setting, `repository` under `[tool.course]` in
  pyproject.toml; when it is empty, this checkout's `origin` remote (`git remote get-url origin`); with
  neither, the site says where to set it and makes up no address. The "Start here" block and the README's
  page show it in their `git clone`, and every page's header links it.
- An answer twin's title is "Answers: <the lesson's title>" on the site (its page, the navigation and the
  search results), so that search does not list every lesson twice under one title.
- Exercise solutions inside a lesson notebook (cells tagged `solution`) are folded behind a
  "show" toggle (myst-nb's `hide-cell`), so a learner does not read them by accident; the answer
  twins show everything.
- Explorers (cells tagged `explorer`, or any widget output): a static page has no kernel, so the
  controls cannot move. The page shows the figure the explorer saved beside its widget (its static PNG)
  under a note that says where to use the controls; the widget view and the saved widget state are
  dropped, so that the page loads no widget JavaScript from a CDN (it works offline, and shows no
  console error).
"""
from __future__ import annotations

import json
import re
import subprocess
import tomllib
from pathlib import Path

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EXPLORER_NOTE = (
    "**Interactive explorer.** The controls need a running Python kernel, so they are not shown on "
    "this website: open this notebook in JupyterLab (`make lab`), run all cells and use them there."
)


def _docs(root: Path, patterns: list[str]) -> list[str]:
    """Toctree entries (document names without suffix, from the root) matched by the patterns, in name
    order, each pattern in turn; "Title <path>" keeps its title."""
    out = []
    for pattern in patterns:
        title, _, inner = pattern.rpartition(" <")
        pattern = inner.rstrip(">") if title else pattern
        for path in sorted(root.glob(pattern)):
            name = "/" + path.relative_to(root).with_suffix("").as_posix()
            entry = f"{title} <{name}>" if title else name
            if entry not in out:
                out.append(entry)
    return out


# The placeholder the README's `git clone` line uses; the site replaces it with the address when it knows one.
README_PLACEHOLDER = "<repository-address>"
# What the site says when it knows no address (the "Start here" block; make check-site looks for it).
NO_ADDRESS = ("This website was built without the repository's address: `repository` under `[tool.course]` in "
              "pyproject.toml is empty and the checkout it was built from has no public `origin` remote. Use the "
              "address you got the course from in place of `<repository-address>`.")


def _public(url: str) -> str:
    """An address as a learner clones it: without user name or token, `git@host:owner/name(.git)` as
    https, and without a trailing `.git` or slash; "" for a local path or file:// remote, and for ""."""
    url = url.strip()
    ssh = re.fullmatch(r"(?:ssh://)?git@([^:/]+)[:/](.+)", url)
    if ssh:
        url = f"https://{ssh.group(1)}/{ssh.group(2)}"
    url = re.sub(r"^(https?://)[^/@]*@", r"\1", url)  # never publish credentials of a remote
    if not re.match(r"https?://", url):
        return ""  # a local path or file:// remote (a clone of a clone) is no address a learner can use
    return url.removesuffix("/").removesuffix(".git")


def repository_url(root: Path) -> str:
    """The repository's address: `[tool.course] repository` in root/pyproject.toml, else the `origin` remote
    of the git checkout at root, else "" (no address: the site says so and invents none)."""
    pyproject = root / "pyproject.toml"
    setting = ""
    if pyproject.is_file():
        setting = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("course", {}).get(
            "repository", "")
    if setting.strip():
        return _public(setting)
    try:
        remote = subprocess.run(["git", "-C", str(root), "remote", "get-url", "origin"], capture_output=True,
                                text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return _public(remote.stdout) if remote.returncode == 0 else ""


TWIN_PREFIX = "Answers: "


def _title(path: Path) -> str:
    """A notebook's title: the text of its first level-1 heading, without markup ("" if it has none)."""
    for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
        source = "".join(cell.get("source", "")) if cell.get("cell_type") == "markdown" else ""
        heading = next((line[2:].strip() for line in source.splitlines() if line.startswith("# ")), "")
        if heading:
            return heading.replace("<", "").replace(">", "").replace("`", "").replace("*", "")
    return ""


def _twin_entries(root: Path, pattern: str) -> list[str]:
    """The answer twins, titled "Answers: <the notebook's title>" in the navigation, as on their pages."""
    entries = []
    for path in sorted(root.glob(pattern)):
        doc = "/" + path.relative_to(root).with_suffix("").as_posix()
        title = _title(path)
        entries.append(f"{TWIN_PREFIX}{title} <{doc}>" if title else doc)
    return entries


def _start_here(root: Path, lessons: list[str], twins: bool, repository: str) -> str:
    """The front page's "Start here" block (MyST, for docs/guide.md): get the code, read the first lesson,
    check the exercises against the answer twins. Links are relative to docs/."""
    where = repository or README_PLACEHOLDER
    note = f" The repository: <{repository}>." if repository else " " + NO_ADDRESS
    items = [f"""**Get the code** with git, and run every notebook once. You need `make` and Python 3.11, 3.12 or
   3.13; the first run also installs the pinned packages into `.venv`.

   ```bash
   git clone --depth 1 {where} calibration-series
   cd calibration-series
   make notebooks
   make lab
   ```

   `make notebooks` unpacks the shipped world and executes every notebook; `make lab` opens them in
   JupyterLab.{note} More: [Get it and run it](../README.md#get-it-and-run-it)."""]
    if lessons:
        first = lessons[0]
        title = _title(root / (first.lstrip("/") + ".ipynb")).split(":")[0] or first.rsplit("/", 1)[-1]
        items.append(f"**Read the notebooks in order**, from [{title}](..{first}.ipynb). Each opens with what "
                     "you will learn and what you need first; this guide, below, gives each one's study time.")
    if twins:
        items.append("**Do each notebook's exercises**, then check them against its answer twin in "
                     "[Exercise solutions](../book/solutions.md).")
    items.append("Look up a word in the [glossary](glossary.md).")
    listed = "\n".join(f"{k}. {item}" for k, item in enumerate(items, 1))
    return f"""
(start-here)=
:::{{admonition}} Start here
:class: tip course-start

{listed}
:::
"""


def _after_title(source: str, block: str) -> str:
    """`source` (Markdown) with `block` right after its first level-1 heading (at the top without one)."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("# "):
            return "".join(lines[:i + 1]) + block + "".join(lines[i + 1:])
    return block + source


def _toctree(caption: str, docs: list[str]) -> str:
    entries = "\n".join(docs)
    return f"\n\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```\n"


def _is_twin(docname: str) -> bool:
    return docname.startswith("notebooks/solutions/")


def _rewrite_notebook(text: str, twin: bool) -> str:
    nb = json.loads(text)
    changed = False
    if nb.get("metadata", {}).pop("widgets", None) is not None:
        changed = True
    if twin:  # the title: "Answers: <the lesson's title>"
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "markdown":
                continue
            lines = "".join(cell.get("source", "")).splitlines(keepends=True)
            heading = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
            if heading is not None:
                if not lines[heading].startswith("# " + TWIN_PREFIX):
                    lines[heading] = "# " + TWIN_PREFIX + lines[heading][2:]
                    cell["source"] = "".join(lines)
                    changed = True
                break
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if not twin and "solution" in tags and "hide-cell" not in tags:
            tags.append("hide-cell")
            cell["metadata"].setdefault("mystnb", {}).update(
                code_prompt_show="Show the solution", code_prompt_hide="Hide the solution")
            changed = True
        outputs = cell.get("outputs", [])
        widgets = [out for out in outputs if WIDGET_VIEW in out.get("data", {})]
        if widgets or "explorer" in tags:
            kept = []
            for out in outputs:
                data = out.get("data", {})
                if WIDGET_VIEW in data:
                    out = dict(out, data={k: v for k, v in data.items() if k != WIDGET_VIEW})
                    if set(out["data"]) <= {"text/plain"}:  # only the widget's repr: nothing to see
                        continue
                kept.append(out)
            note = {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": EXPLORER_NOTE}}
            cell["outputs"] = [note] + kept
            changed = True
    return json.dumps(nb) if changed else text


def setup(app, root: Path, parts, solutions: str, repository: str = "") -> None:
    twins = _twin_entries(root, solutions)
    nav = []
    for caption, patterns in parts:
        if caption == "Solutions" and not twins:
            continue
        docs = _docs(root, patterns)
        if docs:
            nav.append((caption, docs))
    lessons = [doc for _, docs in nav for doc in docs if doc.startswith("/notebooks/") and " <" not in doc]
    start_here = _start_here(root, lessons, bool(twins), repository)

    def config_inited(app, config):
        if not twins:
            config.exclude_patterns.append("book/solutions.md")

    def source_read(app, docname, source):
        if docname == app.config.root_doc:
            source[0] = _after_title(source[0], start_here)
            source[0] += "".join(_toctree(caption, docs) for caption, docs in nav)
        elif docname == "README" and repository:
            source[0] = source[0].replace(README_PLACEHOLDER, repository)
        elif docname == "book/solutions":
            source[0] += _toctree("Answer twins", twins).replace(":hidden:\n", ":maxdepth: 1\n")
        elif app.env.doc2path(docname).suffix == ".ipynb":
            source[0] = _rewrite_notebook(source[0], _is_twin(docname))

    def header_button(app, pagename, templatename, context, doctree):
        """Every page's header links the repository (after the theme's own buttons: priority 502)."""
        if repository and "header_buttons" in context:
            host = repository.split("/")[2] if repository.count("/") >= 2 else ""
            icon = {"github.com": "fab fa-github", "gitlab.com": "fab fa-gitlab",
                    "bitbucket.org": "fab fa-bitbucket"}.get(host, "fab fa-git-alt")
            context["header_buttons"].append({"type": "link", "url": repository, "icon": icon,
                                              "tooltip": "The repository: get the code",
                                              "label": "course-repository"})

    app.connect("config-inited", config_inited)
    app.connect("html-page-context", header_button, priority=502)
    app.connect("source-read", source_read)
