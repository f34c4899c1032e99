"""The page's look: one palette and the stylesheet built from it.

Severity colours mean the same in cards, badges, tables and every chart: the palette reaches CSS as
custom properties, and the charts take the same constants. A severity from data is restricted to the
contract's (``sev``) before it becomes a class name or a colour.
"""

from __future__ import annotations

from analytics.contract import SEV_EXPLAINED, SEV_INFO, SEV_OK, SEV_VIOLATION, SEVERITIES

SEVERITY_COLOURS = {SEV_OK: "#9db3a6", SEV_INFO: "#3b7dd8", SEV_EXPLAINED: "#d99a22",
                    SEV_VIOLATION: "#d64545"}
INK, MUTED, GRID, LINE = "#1f2933", "#6b7785", "#e3e7ec", "#52606d"


def sev(v) -> str:
    """A severity from data, restricted to the known ones: it becomes a class name and a colour."""
    return v if v in SEVERITIES else SEV_INFO


def colour(severity) -> str:
    return SEVERITY_COLOURS[sev(severity)]


CSS = (f":root{{--ink:{INK};--muted:{MUTED};--grid:{GRID};"
       + "".join(f"--{name}:{hue};" for name, hue in SEVERITY_COLOURS.items()) + "}") + """
*{box-sizing:border-box}
body{margin:0;background:#f5f7fa;color:var(--ink);
font:14px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
header{background:#fff;border-bottom:1px solid var(--grid);padding:18px 32px}
header h1{margin:0;font-size:22px;font-weight:600}
header p{margin:4px 0 0;color:var(--muted);overflow-wrap:anywhere}
nav{padding:8px 32px;background:#fff;border-bottom:1px solid var(--grid);position:sticky;top:0;z-index:1;
display:flex;flex-wrap:wrap;gap:2px 16px}
nav a{color:var(--muted);text-decoration:none;white-space:nowrap}
a{color:#2563c9}
main{max-width:1240px;margin:0 auto;padding:8px 32px 40px}
section{background:#fff;border:1px solid var(--grid);border-radius:6px;padding:16px 20px;margin:18px 0;
min-width:0}
/* a link's target clears the sticky navigation, and shows where the reader landed */
[id]{scroll-margin-top:64px}
tr:target>td,details:target>summary{background:#fff3cf}
h2{margin:0 0 12px;font-size:17px;font-weight:600}
h3{margin:14px 0 6px;font-size:13px;font-weight:600;color:var(--muted);
text-transform:uppercase;letter-spacing:.04em}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px}
.card{border:1px solid var(--grid);border-left:4px solid var(--ok);border-radius:4px;padding:10px 12px}
.card.sev-violation{border-left-color:var(--violation)}.card.sev-explained{border-left-color:var(--explained)}
.card-value{font-size:24px;font-weight:600}.card-label{font-weight:600}
.card-sub{color:var(--muted);font-size:12px}
/* side by side while both fit, else one under the other; neither ever runs into the other */
.cols{display:flex;flex-wrap:wrap;gap:8px 40px;align-items:flex-start}
.cols>div{flex:1 1 320px;min-width:0}.cols>.col-table{flex:0 1 auto}
/* every table sits in one: a table wider than the page scrolls inside it, the page does not */
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px}
th{text-align:left;color:var(--muted);font-weight:600;border-bottom:2px solid var(--grid);padding:5px 8px}
td{border-bottom:1px solid var(--grid);padding:4px 8px;vertical-align:middle}
tr.zero td{color:#aab4bf}
.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
/* a path wraps after a separator (values.fmt_path), inside a folder's name only if that alone is too wide */
.path{overflow-wrap:break-word}
.muted,.note{color:var(--muted)}.note{font-size:12px}
.nothing{color:var(--muted);font-style:italic}
.question{color:var(--ink);font-size:14px;text-transform:none;letter-spacing:0}
.diff{color:var(--violation);font-weight:600}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 14px;margin:0}dt{color:var(--muted)}dd{margin:0}
dd{min-width:0;overflow-wrap:anywhere}dd ul{margin:0;padding-left:16px}
table.findings td{vertical-align:top;border-bottom:0}table.findings tr.first>td{border-top:1px solid var(--grid)}
table.findings td.where{white-space:nowrap}
.badge,.chip{display:inline-block;border-radius:10px;padding:1px 8px;font-size:12px;margin:1px 2px;
white-space:nowrap}
.chip{background:#eef1f5}
.badge{color:#fff}.badge.sev-ok{background:#6f8f7d}.badge.sev-info{background:var(--info)}
.badge.sev-explained{background:var(--explained)}.badge.sev-violation{background:var(--violation)}
details{border-top:1px solid var(--grid);padding:6px 0}summary{cursor:pointer;padding:4px 0}
svg.chart{display:block;margin:6px 0;background:#fff}
svg .lbl{font-size:11px;fill:var(--muted)}svg .cap{font-size:11px;fill:var(--ink)}
.legend{font-size:12px;color:var(--muted);margin:4px 0 8px}.legend span{margin-right:14px;white-space:nowrap}
.swatch{vertical-align:-2px;margin-right:4px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:16px}
@media print{nav{display:none}body{background:#fff}section{break-inside:avoid-page}}
"""
