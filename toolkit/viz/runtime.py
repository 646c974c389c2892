"""Rendering: static SVG, inline Vega (offline HTML), or a JupyterLab widget (offline).

The ``html`` renderer writes each chart as its static SVG plus its Vega-Lite spec; one inline script per page
(:func:`vega_runtime_html`, Vega, Vega-Lite and vega-embed from vl-convert) turns the specs into live charts.
"""

from __future__ import annotations

import functools

import altair as alt


#: Class of the element that holds one interactive chart's spec in an HTML page.
HTML_CHART_MARKER = "si-chart-spec"
HTML_RENDERER = "stream-incident-html"


def spec_html(spec: dict) -> str:
    """One chart as HTML, from its Vega-Lite spec: its static SVG (shown without JavaScript) and the spec, which
    the page's inline runtime (:func:`vega_runtime_html`) turns into an interactive chart. It takes the spec,
    not the chart, so the caller checks it against the schema once: Altair's checks cost a few tenths of a
    second per chart, and a report draws dozens."""
    import html as html_lib
    import json

    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec)
    # "</" cannot end the script element early once escaped; the JSON stays valid.
    payload = json.dumps(spec, default=str).replace("</", "<\\/")
    return (f'<div class="si-chart"><div class="si-static">{svg}</div>'
            f'<script type="application/json" class="{HTML_CHART_MARKER}">{payload}</script></div>'
            f'<!-- {html_lib.escape(str(spec.get("title", "")))[:80]} -->')


@functools.cache
def vega_runtime_html() -> str:
    """One ``<script type="module">`` with Vega, Vega-Lite and vega-embed inlined (from vl-convert) that
    renders every chart spec on the page and hides its static SVG once the live chart is drawn.

    Bundling takes a second or two and gives the same text every time in a process: it is kept."""
    import vl_convert as vlc
    from altair.utils._importers import vl_version_for_vl_convert

    snippet = """
for (const node of document.querySelectorAll("script.%s")) {
  const box = node.parentElement;
  const live = document.createElement("div");
  live.className = "si-live";
  box.insertBefore(live, box.firstChild);
  vegaEmbed(live, JSON.parse(node.textContent), {actions: false, renderer: "svg"})
    .then(() => { box.querySelector(".si-static").style.display = "none"; box.dataset.live = "yes"; })
    .catch((err) => { live.textContent = "interactive chart unavailable (" + err + "); static picture below"; });
}
""" % HTML_CHART_MARKER
    bundle = vlc.javascript_bundle(snippet, vl_version=vl_version_for_vl_convert())
    style = ("<style>.si-chart .vega-bindings{font:12px sans-serif;margin:4px 0}"
             "#vg-tooltip-element{max-width:720px;white-space:normal}"
             "#vg-tooltip-element td.value{font-family:monospace;word-break:break-all}</style>")
    return style + '<script type="module">' + bundle.replace("</script", "<\\/script") + "</script>"


def _html_renderer(spec: dict, **_kwargs) -> dict:
    return {"text/html": spec_html(spec)}


def renders_offline() -> bool:
    """True when the active chart renderer gives finished text (inline SVG or the report's HTML), which
    can be made on another thread; False for a widget, which belongs to the kernel's own thread."""
    return alt.renderers.active in ("svg", HTML_RENDERER)


def use_inline_svg() -> None:
    """Render charts as inline SVG (vl-convert): the notebook and its HTML need no JavaScript or network."""
    alt.renderers.enable("svg")


def use_charts(mode: str) -> None:
    """``svg`` (static), ``html`` (interactive with its JavaScript inline in the page, plus an SVG
    fallback: the offline report) or ``interactive`` (a JupyterLab widget that ships its JavaScript)."""
    if mode == "svg":
        use_inline_svg()
    elif mode == "html":
        if HTML_RENDERER not in alt.renderers.names():
            alt.renderers.register(HTML_RENDERER, _html_renderer)
        alt.renderers.enable(HTML_RENDERER)
    else:
        use_offline_widgets()


def use_offline_widgets() -> None:
    """Charts as JupyterLab widgets whose Vega libraries come from vl-convert, not a CDN (needs
    ``anywidget``, in the ``lab`` extra); without it, the inline ``html`` renderer."""
    try:
        import anywidget  # noqa: F401
    except ImportError:
        use_charts("html")
        return
    # SVG rather than canvas: chart text stays selectable and searchable in the notebook.
    alt.renderers.enable("jupyter", offline=True, embed_options={"renderer": "svg", "actions": False})


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG string (vl-convert; no browser, no network)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(chart.to_dict())
