"""The human report: one self-contained HTML page (``OUT/report/index.html``) from aggregated audit data."""
