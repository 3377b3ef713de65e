"""The backend registry: everything that differs between `device.backend` values, in one place.

Standard library only (it is read by `python -m fingrav.stages` before any heavy import, by the GPU lock, by
preflight and by the device factory). Every literal of `fingrav.config.DeviceConfig.backend` has one `Backend`
entry; `tests/test_backends.py` checks that each is complete, and every lookup goes through `backend()`, which
fails loudly on a name without an entry (there is no default backend behaviour).

The factory follows Zeus's zeus/device/gpu layout: `fingrav.device.open_device` (the package's ``__init__``)
imports the backend's package (`Backend.module`) only when a device is made, and calls its ``open_device``;
the vendor library (`Backend.library`) is imported lazily by that package, which wraps its errors once.

Adding a backend (the drill in docs/ARCHITECTURE.md, "Adding a backend"): a literal in
`DeviceConfig.backend`, an entry here, a package `fingrav/device/<vendor>/` whose ``__init__`` defines
``open_device(device_cfg, seed)``, an optional dependency (pyproject ``[project.optional-dependencies]``) and a
test module; the registry test fails until all of them exist.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from fingrav.errors import BackendUnavailableError

LockScope = Literal["gpu", "none"]


@dataclass(frozen=True)
class EnergyCounter:
    """A device's cumulative energy counter as fingrav reads it (the reference run's counter power and its CI,
    `fingrav.analysis.reference.counter_power`): resolution_mj, one step (a reading is floored to it); update_ns,
    how often it changes (a reading is up to this old); source: what the numbers rest on. A recorded device
    description overrides them where it has its own (the simulator's preset, amdsmi's reported resolution)."""

    resolution_mj: float
    update_ns: float
    source: str


@dataclass(frozen=True)
class CardState:
    """How far apart two measurements of one below-cap kernel's sustained power on one card are, run at different
    times (the card's thermal state, where its inputs sit): sd_pct, the standard deviation of the power above idle
    between runs (% of that excess); df, the degrees of freedom it was estimated with (None: known exactly, the
    simulator's own parameter); source: what it rests on. `fingrav.analysis.card_state` puts it in the CIs of the
    headlines that do not limit-cycle. A recorded device description overrides it where it has its own (the
    simulator's parameters.state_sd_pct)."""

    sd_pct: float
    df: float | None
    source: str


@dataclass(frozen=True)
class Backend:
    """What one `device.backend` value means.

    name: the config literal; summary: one line for docs and messages;
    module: the package whose ``open_device(device_cfg, seed)`` makes its `GPUDevice` (None: it cannot collect,
    a replay copies recorded raw data);
    library / extra: the vendor module it imports lazily and the pip extra that installs it (None: none needed);
    visible_devices_env: the variables that renumber a process's GPUs (a scheduler's job sees its GPUs as
    0, 1, ...), first the one the vendor runtime reads first (`fingrav.gpulock.node_gpu`);
    lock_scope: "gpu" — a calibrate / collect job holds a per-physical-GPU flock and runs in its own process,
    never in the forked stage worker; "none" — nothing physical to lock (simulator, replay);
    truth: the backend knows the ground truth (the simulator writes truth/gpu<k>/<scenario>.parquet);
    dist_backend: the torch.distributed backend of a lockstep group on it (None: it runs none);
    framework: what executes the kernels, as exports name it (the export's ``framework`` column);
    provenance_fields: the keys its device's ``describe()`` always records (raw parquet / plan.json provenance);
    energy_counter: its energy counter (`EnergyCounter`; None: it has none of its own, a replay keeps the recorded
    device's backend in its provenance);
    card_state: the card's state between runs (`CardState`; None: not characterized for this backend's cards, or a
    replay, which keeps the recorded device's backend).
    """

    name: str
    summary: str
    module: str | None
    library: str | None
    extra: str | None
    visible_devices_env: tuple[str, ...]
    lock_scope: LockScope
    truth: bool
    dist_backend: Literal["gloo", "nccl"] | None
    framework: str | None
    provenance_fields: tuple[str, ...]
    energy_counter: EnergyCounter | None
    card_state: CardState | None

    @property
    def collects(self) -> bool:
        """Whether it measures (has a device factory); a replay copies recorded data instead."""
        return self.module is not None

    @property
    def real_gpu(self) -> bool:
        """A physical GPU: its calibrate and collect jobs lock the GPU and run in their own process."""
        return self.lock_scope == "gpu"

    def library_problem(self) -> str | None:
        """Why this backend's vendor library cannot be imported here (one message with the install hint), or
        None when it can (or none is needed). Looked up (`importlib.util.find_spec`), never imported."""
        if self.library is None or importlib.util.find_spec(self.library) is not None:
            return None
        return (
            f"device.backend = {self.name!r} needs the {self.library} module, which is missing: "
            f"pip install 'fingrav[{self.extra}]'"
        )

    def check_library(self) -> None:
        """BackendUnavailableError naming the missing vendor module and its pip extra."""
        problem = self.library_problem()
        if problem is not None:
            raise BackendUnavailableError(problem)


BACKENDS: Mapping[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            name="sim",
            summary="the simulated GPU (default): virtual time, a modelled sensor and the ground truth",
            module="fingrav.device.sim",
            library=None,
            extra=None,
            visible_devices_env=(),
            lock_scope="none",
            truth=True,
            dist_backend="gloo",
            framework="fingrav-sim",
            provenance_fields=("vendor", "name", "backend", "uuid", "preset", "channels", "parameters"),
            energy_counter=EnergyCounter(
                0.015259, 1e6, "the default preset (mi300x); the recorded parameters.energy_counter overrides it"
            ),
            card_state=None,  # the recorded parameters.state_sd_pct (the preset's state_sd), where it is recorded
        ),
        Backend(
            name="nvml",
            summary="an NVIDIA GPU: torch (CUDA) for the work, NVML for power, %globaltimer for time",
            module="fingrav.device.nvidia",
            library="pynvml",
            extra="nvidia",
            visible_devices_env=("CUDA_VISIBLE_DEVICES",),
            lock_scope="gpu",
            truth=False,
            dist_backend="nccl",
            framework="torch",
            provenance_fields=(
                "vendor",
                "name",
                "uuid",
                "driver_version",
                "power_limit_mw",
                "enforced_power_limit_mw",
                "channels",
            ),
            energy_counter=EnergyCounter(
                1.0, 100e6, "nvmlDeviceGetTotalEnergyConsumption: integer mJ, changes every ~100 ms (H200.md)"
            ),
            card_state=CardState(
                0.586,
                53.0,
                "measured on six H200 cards: 31 below-cap kernels collected 2-3 times each, a minute or more apart "
                "(results/h200-state-reps, -state-reps2, -state-reps3, -placement, -state-reps4, -ref-check; "
                "experiments/card_state_sd.py)",
            ),
        ),
        Backend(
            name="amdsmi",
            summary="an AMD Instinct GPU: torch (ROCm) for the work, amdsmi for power, s_memrealtime for time",
            module="fingrav.device.amd",
            library="amdsmi",
            extra="amd",
            visible_devices_env=("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
            lock_scope="gpu",
            truth=False,
            dist_backend="nccl",
            framework="torch",
            provenance_fields=("vendor", "name", "backend", "index", "channels"),
            energy_counter=EnergyCounter(
                2.0**-16 * 1e3,
                1e6,
                "amdsmi_get_energy_count: ticks of 2^-16 J (the recorded counter_resolution_uj overrides), firmware "
                "updates every ~1 ms",
            ),
            card_state=None,  # not measured on an AMD card
        ),
        Backend(
            name="replay",
            summary="committed raw data (device.replay_dir) copied into the sweep; nothing is measured",
            module=None,
            library=None,
            extra=None,
            visible_devices_env=(),
            lock_scope="none",
            truth=False,
            dist_backend=None,
            framework=None,
            provenance_fields=(),
            energy_counter=None,
            card_state=None,
        ),
    )
}


def get_backend(name: str) -> Backend:
    """The registry entry of `device.backend` = `name`; BackendUnavailableError for a name without one."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise BackendUnavailableError(
            f"device.backend = {name!r} has no entry in fingrav.backends.BACKENDS (known: {', '.join(BACKENDS)})"
        ) from None


def visible_devices_vars() -> tuple[str, ...]:
    """Every backend's visible-devices variables, once each, in registry order (provenance records them)."""
    return tuple(dict.fromkeys(var for b in BACKENDS.values() for var in b.visible_devices_env))
