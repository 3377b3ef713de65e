"""Shape grids in the sweep config: a `grid:` entry expands to scenarios.

A kernel power database measures hundreds of shapes; writing each as a scenario is error-prone. A grid entry gives
the fields every scenario shares (`kernel`), optionally a list of named `shapes` (a model's layers: each a name plus
kernel fields) and `axes` (kernel fields with a list of values each, crossed: the cartesian product), `tie` (a field
that takes another field's value, e.g. causal prefill's `kv_len: q_len`), and a `predecessor` / `run_policy` for
every scenario it makes. The scenarios are

    for shape in shapes (or one unnamed shape):  for values in product(*axes.values()):
        name   = <grid name>[-<shape name>](-<field><value>)*      e.g. llama3-8b-qkv-m128
        kernel = kernel | shape | {field: value ...} | {field: its tied field's value ...}

in that order, appended after the hand-written `scenarios`. Names depend only on the grid entry (stable across
runs and machines), and every scenario is then validated exactly as a hand-written one (`fingrav.config.Scenario`),
so a bad shape is named by its generated scenario name. `fingrav validate --expand` lists what a config expands to.

This module depends on pydantic only (it is imported on the GPU machine through `fingrav.config`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # fingrav.config.NAME_PATTERN (config imports this module)
MAX_NAME_LEN = 80  # fingrav.config.Scenario.name
MAX_GRID_SCENARIOS = 2000  # fingrav.config.MAX_SCENARIOS: one grid never makes more than a sweep may hold

GridValue = int | float | str | bool
GridName = Annotated[str, Field(pattern=NAME_PATTERN, max_length=60)]


class GridShape(BaseModel):
    """One named shape: a name (part of the scenario names) and the kernel fields it sets."""

    model_config = ConfigDict(extra="allow", frozen=True, strict=True)

    name: GridName

    def fields(self) -> dict[str, Any]:
        """The kernel fields this shape sets (everything but its name)."""
        return dict(self.model_extra or {})


class GridEntry(BaseModel):
    """A grid of scenarios (see the module docstring): `kernel` | shape | axes | ties, crossed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    name: GridName = Field(description="prefix of every generated scenario name")
    kernel: dict[str, Any] = Field(
        default_factory=dict, description="kernel fields every scenario shares (usually `kind` and `dtype`)"
    )
    shapes: list[GridShape] | None = Field(
        None, min_length=1, description="named shapes, each a `name` plus kernel fields (e.g. a model's layers)"
    )
    axes: dict[str, Annotated[list[GridValue], Field(min_length=1)]] = Field(
        default_factory=dict, description="kernel fields crossed over these values (cartesian product)"
    )
    tie: dict[str, str] = Field(
        default_factory=dict, description="field: other field -- the field takes the other field's value"
    )
    predecessor: dict[str, Any] | None = Field(None, description="the predecessor of every scenario (as in one)")
    run_policy: dict[str, Any] | None = Field(None, description="the run_policy of every scenario (as in one)")

    @field_validator("axes")
    @classmethod
    def _distinct_values(cls, axes: dict[str, list[GridValue]]) -> dict[str, list[GridValue]]:
        for field, values in axes.items():
            dup = next((v for i, v in enumerate(values) if v in values[:i]), None)
            if dup is not None:
                raise ValueError(f"axes.{field}: value {dup!r} is given twice (two scenarios of one name)")
        return axes

    @model_validator(mode="after")
    def _consistent(self) -> GridEntry:
        if self.shapes is not None:
            names = [s.name for s in self.shapes]
            dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
            if dup is not None:
                raise ValueError(f"grid {self.name!r}: shape name {dup!r} is given twice")
        for field, source in self.tie.items():
            if field in self.axes:
                raise ValueError(f"grid {self.name!r}: tie.{field}: {field!r} is an axis too; tie it or cross it")
            if field == source:
                raise ValueError(f"grid {self.name!r}: tie.{field} names itself")
        count = self.count()
        if count > MAX_GRID_SCENARIOS:
            raise ValueError(f"grid {self.name!r} makes {count} scenarios; a sweep holds at most {MAX_GRID_SCENARIOS}")
        return self

    def count(self) -> int:
        """How many scenarios this grid makes."""
        n = len(self.shapes) if self.shapes else 1
        for values in self.axes.values():
            n *= len(values)
        return n

    def scenarios(self) -> list[dict[str, Any]]:
        """The scenarios as config mappings (validated later, as hand-written ones are)."""
        out = []
        for shape in self.shapes or [None]:
            for values in itertools.product(*self.axes.values()):
                crossed = dict(zip(self.axes, values, strict=True))
                kernel = {**self.kernel, **(shape.fields() if shape else {}), **crossed}
                for field, source in self.tie.items():
                    if source not in kernel:
                        raise ValueError(
                            f"grid {self.name!r}: tie.{field} = {source!r}: no such field in the grid's kernel, "
                            f"shapes or axes (has: {', '.join(sorted(kernel))})"
                        )
                    kernel[field] = kernel[source]
                name = "-".join(
                    [self.name, *([shape.name] if shape else []), *(_piece(f, v) for f, v in crossed.items())]
                )
                if len(name) > MAX_NAME_LEN:
                    raise ValueError(
                        f"grid {self.name!r}: generated scenario name {name!r} is {len(name)} characters (at most "
                        f"{MAX_NAME_LEN}): shorten the grid or shape names"
                    )
                scenario: dict[str, Any] = {"name": name, "kernel": kernel}
                if self.predecessor is not None:
                    scenario["predecessor"] = self.predecessor
                if self.run_policy is not None:
                    scenario["run_policy"] = self.run_policy
                out.append(scenario)
        return out


def _piece(field: str, value: GridValue) -> str:
    """One axis value in a scenario name: `m128`, `dtypebf16`, `causal1` (characters a name cannot hold -> '_')."""
    text = str(int(value)) if isinstance(value, bool) else str(value)
    return re.sub(r"[^A-Za-z0-9_.]", "_", f"{field}{text}")


def expand(data: Mapping[str, Any]) -> dict[str, Any]:
    """A config mapping with its `grid` entries' scenarios appended to `scenarios` (`grid` itself kept: the model
    stores it for reference and leaves it out of its dumps). Raises pydantic's ValidationError for a malformed grid
    and ValueError for a grid that cannot expand (a generated name too long, a tie to nothing, a repeated name)."""
    from pydantic import TypeAdapter

    grids = TypeAdapter(list[GridEntry]).validate_python(data.get("grid") or [])
    hand = list(data.get("scenarios") or [])
    made = [s for g in grids for s in g.scenarios()]
    taken = {s.get("name") for s in hand if isinstance(s, Mapping)}
    clash = next((s["name"] for s in made if s["name"] in taken), None)
    if clash is not None:
        raise ValueError(f"grid: generated scenario {clash!r} has the name of a scenario in `scenarios`")
    return {**data, "scenarios": hand + made}
