"""Figures drawn by the browser when a reader opens them, and tables a reader can sort and filter: what keeps the
report of a kernel power database (hundreds of scenarios) small and quick to open.

Above `LAZY_ABOVE` scenarios the figures are not rendered to PNG (a figure across 200 scenarios is a 1-2 MB PNG, and
200 profile PNGs are 70 MB): each is stored in the page as its Vega-Lite spec (compact JSON with numbers rounded to
`SIGNIFICANT` digits, gzip, base64: ~10 kB for a profile of ~300 LOIs) inside a folded `<details>`, and drawn by
Vega-Embed the first time it is opened (the overview, open from the start, when the page loads). Vega, Vega-Lite and
Vega-Embed come from vl-convert's own bundle (`vl_convert.javascript_bundle`), inlined once per page, so the page
still works offline and alone. The bundle (~0.9 MB) is built once per vl-convert version and kept in the user's
cache folder (`$XDG_CACHE_HOME/fingrav`, else `~/.cache/fingrav`; rebuilt when missing or unreadable).

Tables marked `data-sortable` sort by a click on a column head (numbers by value, the leading number of a cell such
as "688.8 [686.1, 691.4]"; text otherwise) and are filtered by the text box before them."""

from __future__ import annotations

import base64
import gzip
import json
import logging
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final

import vl_convert as vlc

logger = logging.getLogger(__name__)

LAZY_ABOVE: Final = 24  # scenarios; above this, the figures are drawn by the browser (each when first opened)
LAZY_MAX_POINTS: Final = 1500  # points per profile chart in the lazy mode (deterministic subsampling)


def cache_dir() -> Path:
    """Where the Vega bundle is kept between reports."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "fingrav"


@cache
def vega_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one script that sets `window.vegaEmbed` (from vl-convert, offline)."""
    version = getattr(vlc, "__version__", "unknown")
    path = cache_dir() / f"vega-embed-vlc-{version}.js"
    try:
        text = path.read_text(encoding="utf-8")
        if "vegaEmbed" in text:
            return text
    except OSError:
        pass
    text = vlc.javascript_bundle()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as err:  # a read-only home: build it again next time
        logger.info("Vega bundle not cached (%s): %s", path, err)
    return text


SIGNIFICANT: Final = 5  # digits kept of every number in a packed spec (608.56 W; 0.1 % of a 1 % CI is 5 digits)


def _rounded(obj: Any) -> Any:
    """`obj` with every float rounded to `SIGNIFICANT` significant digits (what a chart can show)."""
    if isinstance(obj, float):
        return float(f"{obj:.{SIGNIFICANT}g}")
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def pack_spec(spec: Mapping[str, Any]) -> str:
    """A Vega-Lite spec as the page stores it: compact JSON of its numbers rounded (`SIGNIFICANT`), gzip (mtime 0:
    the same spec gives the same bytes), base64."""
    raw = json.dumps(_rounded(dict(spec)), separators=(",", ":"), allow_nan=False).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode("ascii")


def unpack_spec(payload: str) -> dict[str, Any]:
    """The inverse of `pack_spec` (tests, and readers of the page's data)."""
    return json.loads(gzip.decompress(base64.b64decode(payload)))


LAZY_JS: Final = """
(function () {
  async function draw(details) {
    if (details.dataset.drawn) return;
    details.dataset.drawn = "1";
    const box = details.querySelector(".vega");
    try {
      const b64 = details.querySelector("script.spec").textContent.trim();
      const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      const spec = await new Response(stream).json();
      const actions = {export: true, source: false, compiled: false, editor: false};  // "save as PNG / SVG"
      await vegaEmbed(box, spec, {actions: actions, renderer: "canvas"});
      box.dataset.state = "drawn";
    } catch (err) {
      box.dataset.state = "failed";
      box.textContent = "Your browser did not draw this figure: " + err;
    }
  }
  document.querySelectorAll("details.lazy").forEach(d => {
    d.addEventListener("toggle", () => { if (d.open) draw(d); });
    if (d.open) draw(d);
  });
})();
"""

TABLE_JS: Final = """
(function () {
  function key(cell) {
    const t = cell.textContent.trim();
    const m = t.match(/^[+\\u2212-]?\\d[\\d,]*(\\.\\d+)?([eE][+-]?\\d+)?/);
    if (m) return [0, parseFloat(m[0].replace("\\u2212", "-").replace(/,/g, "")), t];
    return [1, 0, t.toLowerCase()];
  }
  function cmp(a, b) {
    if (a[0] !== b[0]) return a[0] - b[0];
    if (a[0] === 0 && a[1] !== b[1]) return a[1] - b[1];
    return a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0;
  }
  document.querySelectorAll("table[data-sortable]").forEach(table => {
    const head = table.rows[0];
    Array.from(head.cells).forEach((th, col) => {
      th.classList.add("sort");
      th.title = "sort by this column";
      th.addEventListener("click", () => {
        const dir = th.dataset.dir === "asc" ? "desc" : "asc";
        Array.from(head.cells).forEach(h => delete h.dataset.dir);
        th.dataset.dir = dir;
        const rows = Array.from(table.rows).slice(1);
        rows.sort((a, b) => (dir === "asc" ? 1 : -1) * cmp(key(a.cells[col] || a), key(b.cells[col] || b)));
        rows.forEach(r => r.parentNode.appendChild(r));
      });
    });
  });
  document.querySelectorAll("input.table-filter").forEach(box => {
    const table = document.getElementById(box.dataset.table);
    box.addEventListener("input", () => {
      const words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
      let shown = 0;
      Array.from(table.rows).slice(1).forEach(r => {
        const text = r.textContent.toLowerCase();
        const keep = words.every(w => text.includes(w));
        r.style.display = keep ? "" : "none";
        shown += keep;
      });
      const count = document.getElementById(box.dataset.table + "-count");
      if (count) count.textContent = shown + " of " + (table.rows.length - 1) + " rows";
    });
  });
})();
"""

LAZY_CSS: Final = """
th.sort{cursor:pointer}th.sort[data-dir=asc]::after{content:" \\25B2"}th.sort[data-dir=desc]::after{content:" \\25BC"}
input.table-filter{margin:6px 0;padding:3px 6px;width:24em}
details.lazy{margin:4px 0}details.lazy .vega{min-height:40px}
"""


def filter_box(table_id: str, n_rows: int) -> str:
    """The text box that filters the rows of the table `table_id` (every word must occur in a row)."""
    return (
        f'<input class="table-filter" data-table="{table_id}" type="search" '
        f'placeholder="filter rows: words that must all occur" aria-label="filter rows"> '
        f'<span class="sub" id="{table_id}-count">{n_rows} rows</span>'
    )


def scripts(lazy: bool) -> str:
    """The page's scripts, at the end of the body: table sorting and filtering; with `lazy`, the Vega bundle and
    the code that draws a folded figure when it is first opened."""
    parts = [f"<script>{TABLE_JS}</script>"]
    if lazy:
        parts.append(f"<script>{vega_bundle()}</script>")
        parts.append(f"<script>{LAZY_JS}</script>")
    return "\n".join(parts)
