"""Executed notebook -> one self-contained HTML file.

No code, no stderr chatter, no network reference: CDN scripts and fonts of the nbconvert template
are removed, and when the page holds interactive charts the Vega, Vega-Lite and vega-embed
libraries are inlined once (from vl-convert) so tooltips, zoom and filters work from disk. Each
chart also carries its static SVG, shown when JavaScript is off.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolkit.report.runner import ReportError

_EXTERNAL_SCRIPT = re.compile(r"<script\b[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>\s*</script>", re.I)
_EXTERNAL_LINK = re.compile(r"<link\b[^>]*\bhref\s*=\s*[\"']?(?:https?:)?//[^>]*>", re.I)
_EXTERNAL_IMPORT = re.compile(r"@import\s+(?:url\()?\s*[\"']?(?:https?:)?//[^;]*;", re.I)
_EXTERNAL_URL = re.compile(r"url\(\s*[\"']?(?:https?:)?//[^)]*\)", re.I)
_MATHJAX_CONFIG = re.compile(r"<script\b[^>]*type=\"text/x-mathjax-config\"[^>]*>.*?</script>", re.I | re.S)

#: What the offline check looks for: any src/href/@import/url( pointing at http(s) or a protocol-relative URL.
EXTERNAL_REFERENCE = re.compile(
    r"""(?:\bsrc\s*=\s*["']?|\bhref\s*=\s*["']?|@import\s+["']?|url\(\s*["']?)(?:https?:)?//""", re.I)


def strip_external_resources(page: str) -> str:
    """Remove CDN scripts (require.js, MathJax, widget manager), stylesheets, fonts and imports."""
    for pattern in (_EXTERNAL_SCRIPT, _EXTERNAL_LINK, _EXTERNAL_IMPORT, _MATHJAX_CONFIG):
        page = pattern.sub("", page)
    return _EXTERNAL_URL.sub("none", page)


def external_references(page: str) -> list[str]:
    """Every network reference left in an HTML page (empty for a self-contained page)."""
    return [page[max(m.start() - 40, 0):m.end() + 60] for m in EXTERNAL_REFERENCE.finditer(page)]


def prepare_export() -> None:
    """Load what :func:`export_html` needs (nbconvert, the inline Vega runtime) ahead of time.

    ``stream-incident report`` runs this on a thread while the notebook runs in its kernel: it
    takes a few seconds of one core, which are then off the end of the report. A failure here is
    left for :func:`export_html` to meet again and report."""
    try:
        from nbconvert import HTMLExporter  # noqa: F401 - imported for its cost

        from toolkit import viz

        viz.vega_runtime_html()
    except Exception:  # noqa: BLE001 - see above: export_html raises it with context
        pass


def export_html(notebook: Path, html_path: Path, title: str | None = None) -> Path:
    """Executed notebook -> self-contained HTML without code (no stderr noise, no network references)."""
    import nbformat
    from nbconvert import HTMLExporter

    from toolkit import viz

    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        # Spark and JVM warnings land on stderr; the reader needs results, not the engine's chatter.
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs
                            if not (o.get("output_type") == "stream" and o.get("name") == "stderr")
                            and not _is_progress_bar(o)]
            for o in cell.outputs:
                # nbconvert would wrap SVG in <img src="data:..."> ; inline <svg> keeps chart text selectable
                # and searchable. The SVG is our own vl-convert output, not user-supplied markup.
                data = o.get("data", {})
                if "image/svg+xml" in data and "text/html" not in data:
                    data["text/html"] = f'<div class="chart">{data.pop("image/svg+xml")}</div>'
    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    resources = {"metadata": {"name": title or notebook.stem}}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = strip_external_resources(body)
    if viz.HTML_CHART_MARKER in body:
        runtime = viz.vega_runtime_html()
        body = body.replace("</body>", runtime + "\n</body>", 1) if "</body>" in body else body + runtime
    left = external_references(body)
    if left:
        raise ReportError(f"the HTML still references the network: {left[0]!r}")
    html_path.write_text(body, encoding="utf-8")
    return html_path


def _is_progress_bar(output: dict) -> bool:
    """A tqdm progress bar (a widget, or its text twin): useful while running, noise in the report."""
    data = output.get("data", {})
    plain = str(data.get("text/plain", ""))
    return "application/vnd.jupyter.widget-view+json" in data and " stages" in plain
