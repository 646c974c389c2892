"""``python -m toolkit.report BUNDLE --out DIR`` (same as ``stream-incident report``)."""

import sys

from toolkit.report.command import main

sys.exit(main())
