"""Vega-Lite specs written as plain dicts, for the figure a report draws once per scenario (the TOI-power profile).

Altair copies a layered chart several times while it combines its layers and datasets (~0.15 s per profile, ~2 s
of a 14-scenario report); the spec itself is simple. These helpers write the same spec `altair.Chart.to_dict`
writes: every dataset moved to the top-level `datasets`, named by the sha256 of its values as altair names them
(so equal datasets are stored once), the active altair theme's defaults under `config`, altair's `$schema`.
`fingrav.report.build` renders or packs such a dict as it does a chart's spec (and validates it with `strict`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import polars as pl

Spec = dict[str, Any]


def dataset(frame: pl.DataFrame, datasets: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Store the frame's rows in `datasets` under altair's name for them ("data-" + the first 32 hex digits of
    the sha256 of their JSON with sorted keys); returns the layer's `data` entry ({"name": ...})."""
    rows = frame.to_dicts()
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()[:32]
    name = "empty" if rows == [{}] else f"data-{digest}"
    datasets.setdefault(name, rows)
    return {"name": name}


def field(name: str, kind: str | None = None, **props: Any) -> dict[str, Any]:
    """An encoding channel: `name` of a column, `kind` its Vega-Lite type ("quantitative", "nominal"; None for a
    secondary channel such as x2), any other properties (scale, title, legend, bin, ...) as given."""
    enc: dict[str, Any] = {"field": name, **props}
    if kind is not None:
        enc["type"] = kind
    return enc


def layer(data: Mapping[str, str], mark: str, encoding: Mapping[str, Any], **mark_props: Any) -> Spec:
    """One layer: its dataset reference, mark type (with properties) and encodings."""
    return {"data": dict(data), "mark": {"type": mark, **mark_props}, "encoding": dict(encoding)}


def _merged(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`, nested dicts merged (altair's `update_nested` of a theme and a spec)."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def top_level(body: Mapping[str, Any], config: Mapping[str, Any], datasets: Mapping[str, Any]) -> Spec:
    """The whole spec: `body` (layer or concat, title, size), the look `config` over the active altair theme's
    defaults, the datasets and the schema URL, as `altair.TopLevelMixin.to_dict` writes them."""
    theme = alt.theme.get()
    spec = _merged(theme() if theme is not None else {}, {"config": dict(config)})
    spec.update(body)
    spec["datasets"] = dict(datasets)
    spec["$schema"] = alt.SCHEMA_URL
    return spec


def validate(spec: Mapping[str, Any]) -> None:
    """Check a spec against altair's Vega-Lite schema (as `strict` reports do for charts); raises
    `jsonschema.ValidationError` when it does not conform."""
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema.core import load_schema

    validate_jsonschema(dict(spec), load_schema(), raise_error=True)


def titled(text: str, subtitle: str | Sequence[str] | None = None) -> dict[str, Any]:
    """A left-aligned title with an optional subtitle (the dict of `fingrav.report.figures._title`)."""
    return {"text": text, "subtitle": subtitle or "", "anchor": "start", "fontSize": 13, "subtitleFontSize": 11}
