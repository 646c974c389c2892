"""MkDocs hooks: the pages that come from the toolkit's own data, so they never drift from it.

* **Detector pages.** Each ``playbooks/*.md`` at the repository root is read where it is (no copy) and
  published as ``playbooks/<name>/``; ``playbooks/README.md`` becomes the section's index. The nav entry
  ``Detectors`` of ``mkdocs.yml`` is filled here: the index, one page per detector playbook (by id), then the
  other playbooks (capturing state, collecting evidence). A playbook's front matter (``id``, ``title``,
  ``severity``) is read as ``key: value`` lines (a title may hold a colon, which YAML refuses) and shown
  under the page's heading.
* **Layout and wrapper tables.** A page line ``<!-- catalogue: layouts -->`` (or ``wrappers``) becomes a
  table of ``toolkit/catalogue/layouts.toml``: id, description and a sample line of every layout (wrapper).
* **Table columns.** A page line ``<!-- schema: state -->`` (or ``parse``, ``events``, ``timeline``) becomes the
  columns of every table that stage writes, as the table registry declares them (``toolkit/tables.py``).

``mkdocs`` is imported only inside the hooks, so ``tests/test_docs_pages.py`` can import this module
without it.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLAYBOOKS = REPO / "playbooks"
LAYOUTS = REPO / "toolkit" / "catalogue" / "layouts.toml"
NAV_SECTION = "Detectors"
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n", re.S)
CATALOGUE_TABLE = re.compile(r"^<!-- catalogue: (layouts|wrappers) -->$", re.M)
SCHEMA_TABLE = re.compile(r"^<!-- schema: (parse|state|events|timeline) -->$", re.M)


def front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` lines of a playbook's front matter ({} without one)."""
    match = FRONT_MATTER.match(text)
    if not match:
        return {}
    pairs = (line.split(":", 1) for line in match.group(1).splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _heading(text: str, default: str) -> str:
    match = re.search(r"^# (.+)$", text, re.M)
    return match.group(1).strip() if match else default


def playbook_pages() -> list[tuple[str, str]]:
    """(nav label, docs path) of every published playbook: the index, the detectors' playbooks by id, then
    the others by title."""
    detectors, others = [], []
    for path in sorted(PLAYBOOKS.glob("*.md")):
        if path.name == "README.md":
            continue
        text = path.read_text(encoding="utf-8")
        detector_id = front_matter(text).get("id")
        if detector_id:
            detectors.append((detector_id, f"playbooks/{path.name}"))
        else:
            others.append((_heading(text, path.stem), f"playbooks/{path.name}"))
    return [("Detectors", "playbooks/README.md"), *sorted(detectors), *sorted(others)]


def on_config(config):
    """Fill the ``Detectors`` section of the nav with the playbooks."""
    pages = playbook_pages()
    section = [pages[0][1], *({label: path} for label, path in pages[1:])]
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and NAV_SECTION in entry:
            entry[NAV_SECTION] = section
            break
    else:
        raise ValueError(f"mkdocs.yml: the nav has no {NAV_SECTION!r} section for the playbooks")
    return config


def on_files(files, config):
    """Publish the playbooks where they are."""
    from mkdocs.structure.files import File

    for _label, docs_path in playbook_pages():
        source = REPO / docs_path
        files.append(File.generated(config, docs_path, abs_src_path=str(source)))
    return files


def on_page_read_source(page, config):
    """A playbook without its front matter (MkDocs would read it as YAML and, on a title with a colon, show
    it as text); the facts are put back under the heading by :func:`on_page_markdown`."""
    if not page.file.src_uri.startswith("playbooks/"):
        return None
    text = Path(page.file.abs_src_path).read_text(encoding="utf-8-sig")
    return FRONT_MATTER.sub("", text, count=1)


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri.startswith("playbooks/"):
        meta = front_matter(Path(page.file.abs_src_path).read_text(encoding="utf-8-sig"))
        if meta.get("id"):
            facts = (f"Detector `{meta['id']}` · severity `{meta.get('severity', '?')}` · "
                     f"run it alone: `stream-incident detect BUNDLE --only {meta['id']}` · "
                     f"source: `playbooks/{meta['id']}.md`")
            markdown = re.sub(r"^(# .+\n)", lambda m: f"{m.group(1)}\n{facts}\n", markdown, count=1, flags=re.M)
    markdown = CATALOGUE_TABLE.sub(lambda m: catalogue_table(m.group(1)), markdown)
    return SCHEMA_TABLE.sub(lambda m: schema_table(m.group(1)), markdown)


def _cell(text: str) -> str:
    """Plain text for a table cell: no HTML (``<pod>``), no emphasis (``*-json.log``), no column break."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for char in "\\*_`|":
        text = text.replace(char, "\\" + char)
    return text.replace("\n", " ")


def _code(text: str) -> str:
    """Inline code for a table cell (a bar inside a code span does not split the row)."""
    text = text.replace("\n", "\\n")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def catalogue_table(kind: str) -> str:
    """Markdown table of the layouts or the wrappers of ``toolkit/catalogue/layouts.toml``."""
    data = tomllib.loads(LAYOUTS.read_text(encoding="utf-8"))
    rows = ["| id | what it reads | example |", "| --- | --- | --- |"]
    if kind == "layouts":
        for layout in data.get("layout", []):
            lines = [s.get("line") or s.get("message", "") for s in layout.get("samples", [])]
            line = next((text for text in lines if text), "")
            rows.append(f"| `{layout['id']}` | {_cell(layout.get('description', ''))} | {_code(line) if line else ''} |")
    else:
        for wrapper in data.get("wrapper", []):
            sample = wrapper.get("sample", "")
            rows.append(f"| `{wrapper['id']}` | {_cell(wrapper.get('description', ''))} | "
                        f"{_code(sample) if sample else ''} |")
    return "\n".join(rows)


def schema_table(stage: str) -> str:
    """Markdown table of the declared file and columns of every table ``stage`` writes (``toolkit.tables``)."""
    from toolkit.tables import tables_of

    rows = ["| file | columns |", "| --- | --- |"]
    for spec in tables_of(stage).values():
        rows.append(f"| `{spec.path}` | {', '.join(f'`{f.name}`' for f in spec.schema.fields)} |")
    return "\n".join(rows)
