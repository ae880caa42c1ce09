"""The course website's own Sphinx hooks (loaded by book/conf.py).

- The navigation: hidden toctrees, one per part of conf.PARTS, are appended to the front page
  (docs/guide.md) while Sphinx reads it, and book/solutions.md gets the list of answer twins
  (notebooks/solutions/*.ipynb); without twins that page and its part are left out.
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


def _twin_entries(root: Path, pattern: str) -> list[str]:
    """The answer twins, titled "<the notebook's title> (solutions)" in the navigation, so that a twin is not
    mistaken for its lesson (both start with the same heading)."""
    entries = []
    for path in sorted(root.glob(pattern)):
        doc = "/" + path.relative_to(root).with_suffix("").as_posix()
        title = ""
        for cell in json.loads(path.read_text(encoding="utf-8")).get("cells", []):
            source = "".join(cell.get("source", "")) if cell.get("cell_type") == "markdown" else ""
            heading = next((line[2:].strip() for line in source.splitlines() if line.startswith("# ")), "")
            if heading:
                title = heading.replace("<", "").replace(">", "").replace("`", "")
                break
        entries.append(f"{title} (solutions) <{doc}>" if title else doc)
    return entries


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


def setup(app, root: Path, parts, solutions: str) -> None:
    twins = _twin_entries(root, solutions)
    nav = []
    for caption, patterns in parts:
        if caption == "Solutions" and not twins:
            continue
        docs = _docs(root, patterns)
        if docs:
            nav.append((caption, docs))

    def config_inited(app, config):
        if not twins:
            config.exclude_patterns.append("book/solutions.md")

    def source_read(app, docname, source):
        if docname == app.config.root_doc:
            source[0] += "".join(_toctree(caption, docs) for caption, docs in nav)
        elif docname == "book/solutions":
            source[0] += _toctree("Answer twins", twins).replace(":hidden:\n", ":maxdepth: 1\n")
        elif app.env.doc2path(docname).suffix == ".ipynb":
            source[0] = _rewrite_notebook(source[0], _is_twin(docname))

    app.connect("config-inited", config_inited)
    app.connect("source-read", source_read)
