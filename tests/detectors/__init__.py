"""One test module per detector of ``toolkit/detectors``."""
