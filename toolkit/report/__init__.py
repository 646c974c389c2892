"""Incident reports and the notebook helpers behind them.

The rooms, in the order a report is made:

* :mod:`~toolkit.report.parameters` — the notebook and command parameters, checked once;
* :mod:`~toolkit.report.investigation` — ``toolkit.pipeline.run`` for one bundle and the scope a report
  shows of it (``investigate``, ``ReportView``);
* :mod:`~toolkit.report.sections` — the verdict, tables, charts and playbooks, each section drawn
  on its own so one failure cannot sink the report;
* :mod:`~toolkit.report.runner` — running a notebook headless on this interpreter, quietly;
* :mod:`~toolkit.report.export` — the executed notebook as one offline HTML file;
* :mod:`~toolkit.report.command` — ``make_report`` and ``stream-incident report``;
* :mod:`~toolkit.report.explorer` — the widgets of ``notebooks/explore.ipynb``.

Notebooks use ``from toolkit import report`` and the names below.
"""

from toolkit.report.command import REPORT_NOTEBOOK, build_parser, main, make_report, run
from toolkit.report.explorer import Explorer
from toolkit.report.export import external_references, export_html, strip_external_resources
from toolkit.report.investigation import ReportView, investigate
from toolkit.report.parameters import CHART_MODES, VIEWS, ParameterError, ReportParameters, validate_parameters
from toolkit.report.runner import (PACKAGE_ROOT, PRIVATE_KERNEL, ReportError, ReportFiles, execute_notebook,
                                   kernel_for_this_interpreter)
from toolkit.report.sections import (appendix_tables, evidence_table, finding_html, findings_table,
                                     ingest_problems_table, playbook_html, playbook_link, provenance_table, section,
                                     show_appendix, show_findings, show_ingest_problems, show_provenance,
                                     show_timeline, show_verdict, verdict_html)

__all__ = [
    "CHART_MODES", "PACKAGE_ROOT", "PRIVATE_KERNEL", "REPORT_NOTEBOOK", "VIEWS", "Explorer",
    "ParameterError", "ReportError", "ReportFiles", "ReportParameters", "ReportView", "appendix_tables", "build_parser",
    "evidence_table", "execute_notebook", "export_html", "external_references", "finding_html", "findings_table",
    "ingest_problems_table", "investigate", "kernel_for_this_interpreter", "main", "make_report", "playbook_html",
    "playbook_link", "provenance_table", "run", "section", "show_appendix", "show_findings",
    "show_ingest_problems", "show_provenance", "show_timeline", "show_verdict", "strip_external_resources",
    "validate_parameters", "verdict_html",
]
