"""AMD Instinct GPUs (MI300X) through amdsmi: power from the metrics table, GPU time from s_memrealtime.

GPU-side module. At module level it imports only the standard library, numpy and fingrav (torch_device
imports torch when a device is created); amdsmi and triton are imported lazily, so that
``import fingrav.device.amd`` works everywhere:

* ``AMDSMIPower`` is the amdsmi half of the backend (no torch): opening the library with one clear
  message per way it can fail, identity for provenance, the sampler process, the energy counter.
* ``AMDSMIDevice`` is the GPUDevice: a ``fingrav.device.torch_device.TorchGPUDevice`` (torch kernels,
  execution stamps, clock reads, spin load) whose power side is an ``AMDSMIPower`` and whose GPU-clock
  hooks (``_make_stamper`` / ``_make_spinner``) are Triton kernels reading ``s_memrealtime``.

Import failures (``import_amdsmi``; each raises BackendUnavailableError with its own message):
the package is missing; ``libamd_smi.so`` is missing (the PyPI wheel ships only the Python bindings:
it prints the OSError, then dies on ``KeyError: 'libamd_smi.so'``; older wrappers raise the OSError);
the bindings do not match the library (``AttributeError: ... undefined symbol``, a function fingrav needs
is absent, or amdsmi_init fails to load a symbol); no AMD GPU (the driver is not loaded, or no processor
handles). Every other AmdSmiException is wrapped once into DeviceError (``amd_sampler.call_amdsmi``).

GPU clock: ``s_memrealtime`` reads the 64-bit "REFCLK" real-time counter, a constant 100 MHz clock on
gfx9 parts (MI300X is gfx942) that does not follow the shader clock; ticks x 10 = ns. The Triton
kernel below has NOT been run on hardware yet (docs/AMD.md); clock sync measures its offset and drift
against the host clock, so a wrong rate would show up as a huge drift (flag ``clock_drift``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import logging
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from fingrav.device.amd_sampler import (
    DEFAULT_COMPONENT_FIELDS,
    ChannelPlan,
    MetricsPoller,
    SampleBatch,
    SamplerConfig,
    SamplerProcess,
    amdsmi_error_text,
    call_amdsmi,
    init_amdsmi,
)
from fingrav.device.common import PowerSamples
from fingrav.device.torch_device import TorchGPUDevice
from fingrav.errors import BackendUnavailableError, DeviceError

logger = logging.getLogger(__name__)

FOLLOWED_AMDSMI = "7.0.2"  # the amdsmi release whose Python API this backend follows
INSTALL_HINT = "pip install 'fingrav[amd]'"
REQUIRED_FUNCTIONS = (
    "amdsmi_init",
    "amdsmi_shut_down",
    "amdsmi_get_processor_handles",
    "amdsmi_get_gpu_metrics_info",
    "amdsmi_get_energy_count",
)
# amdsmi status codes (amdsmi_wrapper.amdsmi_status_t) that amdsmi_init returns without a usable GPU
_NO_GPU_STATUS = {18: "INIT_ERROR", 31: "NOT_FOUND", 34: "DRIVER_NOT_LOADED", 51: "NO_DRV", 10: "NO_PERM"}
_LOAD_STATUS = {4: "FAIL_LOAD_MODULE", 5: "FAIL_LOAD_SYMBOL"}

REALTIME_HZ = 100_000_000  # s_memrealtime on gfx9 (MI300X): constant 100 MHz
# One wave reads the counter and waits for the scalar-memory result (lgkmcnt) before using it
# (the kernels below spell it out: Triton kernels may read only constexpr globals).
MEMREALTIME_ASM = "s_memrealtime $0\ns_waitcnt lgkmcnt(0)"


# ----------------------------------------------------------------------------------------- messages
def msg_missing_package(detail: str) -> str:
    return (
        "amdsmi backend: the Python package 'amdsmi' is not installed "
        f"({detail}). Install it with: {INSTALL_HINT} (choose the amdsmi release of the ROCm on this "
        "machine, e.g. amdsmi 7.0.x for ROCm 7.0; pip install /opt/rocm/share/amd_smi installs exactly that)"
    )


def msg_missing_library(detail: str) -> str:
    return (
        "amdsmi backend: the 'amdsmi' Python package is installed but cannot load ROCm's libamd_smi.so: "
        "the PyPI wheel contains only the Python bindings, the library comes with ROCm. Install ROCm's "
        "amd-smi-lib package (e.g. apt install amd-smi-lib) so that /opt/rocm/lib/libamd_smi.so exists, or "
        f"make it findable (ROCM_PATH, LD_LIBRARY_PATH). The import said: {detail}"
    )


def msg_version_mismatch(package: str, library: str, detail: str) -> str:
    return (
        f"amdsmi backend: the 'amdsmi' Python package ({package}) does not match ROCm's libamd_smi.so "
        f"({library}): {detail}. Install the bindings that ship with this ROCm "
        "(pip install /opt/rocm/share/amd_smi, or the amdsmi release equal to the ROCm version); "
        f"fingrav follows amdsmi {FOLLOWED_AMDSMI}"
    )


def msg_no_gpu(detail: str) -> str:
    return (
        f"amdsmi backend: no AMD GPU found ({detail}). It needs an AMD Instinct GPU with the amdgpu driver "
        "loaded and read access to /dev/kfd and /dev/dri; run on the GPU machine, or use device.backend: sim"
    )


# ----------------------------------------------------------------------------------------- opening amdsmi
def amdsmi_package_version(smi: ModuleType | None = None) -> str:
    """The installed amdsmi wheel's version ("unknown" when not installed as a distribution)."""
    version = getattr(smi, "__version__", None) if smi is not None else None
    if isinstance(version, str):
        return version
    try:
        return importlib.metadata.version("amdsmi")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def amdsmi_library_version(smi: ModuleType) -> str:
    """libamd_smi's version from amdsmi_get_lib_version ("major.minor.release (build)")."""
    try:
        v = call_amdsmi(smi, "amdsmi_get_lib_version")
    except DeviceError as exc:
        return f"unknown ({exc})"
    if not isinstance(v, dict):
        return str(v)
    core = ".".join(str(v[k]) for k in ("major", "minor", "release") if k in v)
    build = v.get("build")
    return f"{core} ({build})" if build and str(build) not in core else core


def import_amdsmi(module_name: str = "amdsmi") -> ModuleType:
    """Import amdsmi, turning each way it fails into one BackendUnavailableError with a clear message.

    The wheel prints to stdout when it cannot find libamd_smi.so; that text is captured (and logged at
    debug level), never printed."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stdout(captured):
            smi = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        if exc.name is not None and exc.name.split(".")[0] == top:
            raise BackendUnavailableError(msg_missing_package(str(exc))) from exc
        raise BackendUnavailableError(
            f"amdsmi backend: 'import {module_name}' failed on a missing dependency: {exc}"
        ) from exc
    except AttributeError as exc:  # ctypes: the library lacks a symbol the bindings bind
        raise BackendUnavailableError(
            msg_version_mismatch(amdsmi_package_version(), "an older library", f"{exc}")
        ) from exc
    except (KeyError, OSError, ImportError) as exc:
        printed = " ".join(captured.getvalue().split())
        text = f"{type(exc).__name__}: {exc}" + (f" (printed: {printed})" if printed else "")
        if "undefined symbol" in text:
            raise BackendUnavailableError(msg_version_mismatch(amdsmi_package_version(), "other", text)) from exc
        if isinstance(exc, OSError) or "libamd_smi" in text or "amd-smi-lib" in text:
            raise BackendUnavailableError(msg_missing_library(text)) from exc
        raise BackendUnavailableError(f"amdsmi backend: 'import {module_name}' failed: {text}") from exc
    finally:
        if captured.getvalue():
            logger.debug("import %s printed: %s", module_name, captured.getvalue().strip())
    missing = [f for f in REQUIRED_FUNCTIONS if not callable(getattr(smi, f, None))]
    if missing:
        raise BackendUnavailableError(
            msg_version_mismatch(amdsmi_package_version(smi), "unknown", f"the bindings lack {', '.join(missing)}")
        )
    return smi


def open_amdsmi(index: int = 0, module_name: str = "amdsmi") -> tuple[ModuleType, Any, int]:
    """Import and initialize amdsmi and return (module, processor handle of GPU `index`, GPU count)."""
    smi = import_amdsmi(module_name)
    try:
        init_amdsmi(smi)
    except DeviceError as exc:
        code = getattr(exc.__cause__, "err_code", None)
        if code in _NO_GPU_STATUS:
            raise BackendUnavailableError(msg_no_gpu(f"amdsmi_init: {_NO_GPU_STATUS[code]}, {exc}")) from exc
        if code in _LOAD_STATUS:
            raise BackendUnavailableError(
                msg_version_mismatch(amdsmi_package_version(smi), amdsmi_library_version(smi), f"amdsmi_init: {exc}")
            ) from exc
        raise
    try:
        handles = call_amdsmi(smi, "amdsmi_get_processor_handles")
    except DeviceError:
        _shut_down(smi)
        raise
    if not handles:
        _shut_down(smi)
        raise BackendUnavailableError(msg_no_gpu("amdsmi_get_processor_handles() returned no GPU"))
    if not 0 <= index < len(handles):
        _shut_down(smi)
        raise BackendUnavailableError(
            f"amdsmi backend: device.index={index} but amdsmi sees {len(handles)} AMD GPU(s) (0..{len(handles) - 1})"
        )
    return smi, handles[index], len(handles)


def _shut_down(smi: ModuleType) -> None:
    try:
        call_amdsmi(smi, "amdsmi_shut_down")
    except DeviceError as exc:
        logger.debug("amdsmi_shut_down: %s", exc)


def _optional(smi: ModuleType, name: str, *args: Any) -> Any:
    """An identity query that may be unsupported: its value, or "N/A" (logged)."""
    try:
        return call_amdsmi(smi, name, *args)
    except DeviceError as exc:
        logger.debug("%s unavailable: %s", name, exc)
        return "N/A"


def metrics_version(header: Any) -> str:
    """ "format.content" of amdsmi_get_gpu_metrics_header_info's dict (gpu_metrics v1.x), else "unknown"."""
    if isinstance(header, dict) and "format_revision" in header and "content_revision" in header:
        return f"{header['format_revision']}.{header['content_revision']}"
    return "unknown"


def bdf_bus(bdf: str) -> int | None:
    """The PCI bus number of a "dddd:bb:dd.f" BDF string."""
    try:
        return int(bdf.split(":")[-2], 16)
    except (AttributeError, IndexError, ValueError):
        return None


# ----------------------------------------------------------------------------------------- power half
class AMDSMIPower:
    """The amdsmi half of the AMD backend: no torch. Opens amdsmi, reads identity and the channel plan,
    runs the sampler process, reads the energy counter. Units: ns, mW, mJ.

    index: amdsmi processor index; period_ns: poll period; source / reader / component_fields /
    firmware_period_ns / gap_factor: see amd_sampler.SamplerConfig; module_name: what is imported as
    amdsmi (the sampler process imports the same name); sampler_setup: (module, function, kwargs) the
    sampler process calls before importing it (tests configure the fake there)."""

    def __init__(
        self,
        index: int = 0,
        *,
        period_ns: int = 1_000_000,
        source: str = "auto",
        reader: str = "metrics",
        component_fields: Sequence[tuple[str, str]] = DEFAULT_COMPONENT_FIELDS,
        firmware_period_ns: int | None = None,
        gap_factor: float = 3.0,
        module_name: str = "amdsmi",
        sampler_setup: tuple[str, str, dict] | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.index = index
        self.module_name = module_name
        self.sampler_setup = sampler_setup
        self.smi, self.handle, self.gpu_count = open_amdsmi(index, module_name)
        self._closed = False
        try:
            probe = MetricsPoller(
                self.smi,
                self.handle,
                SamplerConfig(
                    index=index,
                    period_ns=period_ns,
                    source=source,
                    reader=reader,
                    component_fields=tuple(component_fields),
                    firmware_period_ns=firmware_period_ns,
                    gap_factor=gap_factor,
                ),
                clock,
            )
        except Exception:
            _shut_down(self.smi)
            raise
        self.plan: ChannelPlan = probe.plan
        self.sampler_info = probe.describe()
        # The sampler process gets the resolved choices, so that it cannot decide differently.
        self.config = SamplerConfig(
            index=index,
            period_ns=period_ns,
            source=self.plan.source,
            reader=reader,
            component_fields=self.plan.component_fields,
            firmware_period_ns=firmware_period_ns,
            gap_factor=gap_factor,
            counter_resolution_uj=probe.counter_resolution_uj,
        )
        self.counter_resolution_uj = probe.counter_resolution_uj
        self._identity = self._read_identity()
        self._sampler: SamplerProcess | None = None
        self._stamps: list[SampleBatch] = []
        logger.info(
            "amdsmi GPU %d: %s, channels %s (%s)",
            index,
            self._identity["name"],
            ",".join(self.plan.channels),
            self.plan.note,
        )

    # -- identity -------------------------------------------------------------------------
    @property
    def channels(self) -> tuple[str, ...]:
        return self.plan.channels

    def _read_identity(self) -> dict[str, Any]:
        smi, h = self.smi, self.handle
        asic = _optional(smi, "amdsmi_get_gpu_asic_info", h)
        driver = _optional(smi, "amdsmi_get_gpu_driver_info", h)
        header = (
            _optional(smi, "amdsmi_get_gpu_metrics_header_info", h)
            if hasattr(smi, "amdsmi_get_gpu_metrics_header_info")
            else "N/A"
        )
        asic = asic if isinstance(asic, dict) else {}
        driver = driver if isinstance(driver, dict) else {}
        return {
            "name": asic.get("market_name", "N/A"),
            "asic": {
                k: asic[k]
                for k in (
                    "market_name",
                    "vendor_id",
                    "device_id",
                    "rev_id",
                    "target_graphics_version",
                    "num_compute_units",
                    "asic_serial",
                    "oam_id",
                )
                if k in asic
            },
            "bdf": _optional(smi, "amdsmi_get_gpu_device_bdf", h),
            "uuid": _optional(smi, "amdsmi_get_gpu_device_uuid", h),
            "driver": {k: driver[k] for k in ("driver_name", "driver_version") if k in driver},
            "amdsmi_package_version": amdsmi_package_version(smi),
            "amdsmi_library_version": amdsmi_library_version(smi),
            "metrics_version": metrics_version(header),
        }

    def describe(self) -> dict[str, Any]:
        """JSON-able identity: ASIC, driver, amdsmi versions, metrics version, channels and whether
        component channels are available (and why not), how power is derived."""
        return {
            "backend": "amdsmi",
            "vendor": "AMD",
            "index": self.index,
            "gpu_count": self.gpu_count,
            **self._identity,
            "amdsmi_api_followed": FOLLOWED_AMDSMI,
            "channels": list(self.channels),
            "component_channels_available": len(self.channels) > 1,
            "component_channels_note": self.plan.note,
            "power": self.sampler_info,
            "gpu_clock": {"source": "s_memrealtime", "hz": REALTIME_HZ, "verified_on_hardware": False},
            "verified_on_hardware": False,
        }

    # -- power ----------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """Start the sampler process (returns once it polls)."""
        if self._sampler is not None:
            raise DeviceError("amdsmi sampling is already running")
        sampler = SamplerProcess(self.config, self.module_name, self.sampler_setup)
        info = sampler.start()
        if tuple(info.get("channels", ())) != self.channels:
            sampler.close()
            raise DeviceError(
                f"amdsmi sampler sees channels {info.get('channels')} but this device planned {list(self.channels)}"
            )
        self._sampler = sampler
        self._stamps = []

    def _take(self, batch: SampleBatch) -> PowerSamples:
        self._stamps.append(
            SampleBatch(
                PowerSamples.empty(), batch.host_ns, batch.firmware_ns, batch.reads, batch.duplicates, batch.errors
            )
        )
        if batch.errors:
            logger.warning("amdsmi sampler: %d failed reads in %d", batch.errors, batch.reads)
        return batch.samples

    def drain_samples(self) -> PowerSamples:
        """Samples logged since the last drain (or start)."""
        if self._sampler is None:
            raise DeviceError("amdsmi sampling is not running (call start_sampling first)")
        return self._take(self._sampler.drain())

    def stop_sampling(self) -> PowerSamples:
        """Stop the sampler process; return what was not drained yet."""
        if self._sampler is None:
            raise DeviceError("amdsmi sampling is not running (call start_sampling first)")
        sampler, self._sampler = self._sampler, None
        return self._take(sampler.stop())

    def index_of_pci_bus(self, bus: int) -> int | None:
        """amdsmi's processor index of the GPU on PCI bus `bus`, or None."""
        try:
            handles = call_amdsmi(self.smi, "amdsmi_get_processor_handles")
        except DeviceError as exc:
            logger.debug("amdsmi_get_processor_handles: %s", exc)
            return None
        for i, h in enumerate(handles):
            bdf = _optional(self.smi, "amdsmi_get_gpu_device_bdf", h)
            if isinstance(bdf, str) and bdf_bus(bdf) == bus:
                return i
        return None

    def firmware_stamps(self) -> tuple[np.ndarray, np.ndarray]:
        """(host_ns, firmware_ns) of every firmware update sampled since start_sampling (int64 ns)."""
        b = SampleBatch.concat(self._stamps)
        return b.host_ns, b.firmware_ns

    def energy_mj(self) -> float | None:
        """The socket energy counter in mJ (accumulator x counter_resolution uJ / 1000), or None."""
        info = call_amdsmi(self.smi, "amdsmi_get_energy_count", self.handle)
        acc = info.get("energy_accumulator", info.get("power"))
        res = info.get("counter_resolution", self.counter_resolution_uj)
        try:
            return float(acc) * float(res) / 1000.0
        except (TypeError, ValueError):
            return None

    def close(self) -> None:
        """Stop the sampler if running and shut amdsmi down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        _shut_down(self.smi)


# ----------------------------------------------------------------------------------------- GPU clock
def realtime_ticks_to_ns(ticks: Any, hz: int = REALTIME_HZ) -> Any:
    """s_memrealtime ticks -> ns (exact integer arithmetic for 100 MHz: x 10)."""
    if 1_000_000_000 % hz == 0:
        return np.asarray(ticks, dtype=np.int64) * (1_000_000_000 // hz)
    return (np.asarray(ticks, dtype=np.float64) * (1e9 / hz)).astype(np.int64)


def realtime_ticks_for_ns(duration_ns: int, hz: int = REALTIME_HZ) -> int:
    """The whole number of s_memrealtime ticks covering `duration_ns` (rounded up)."""
    return -(-int(duration_ns) * hz // 1_000_000_000)


# Spin load: the same shape as fingrav.device.gpu_timestamp's (x <- a*x + b, 1024 fp32 lanes per program,
# 256 threads = 4 wavefronts of 64), with s_memrealtime as the clock.
SPIN_THREADS = 256
SPIN_BLOCK = 1024
SPIN_INNER = 32
SPIN_A, SPIN_B = 0.9999, 1e-4
WAVEFRONT = 64

# set by _memrealtime_kernels(): module globals, so that the jit functions resolve them as globals
triton: Any = None
tl: Any = None
_KERNELS: Any = None


def _memrealtime_kernels() -> Any:  # pragma: no cover - compiles only for a ROCm GPU
    """Build (once) the Triton stamp and spin kernels that read s_memrealtime. UNVERIFIED on hardware.

    The asm is written out in each kernel (Triton kernels may only read constexpr globals): one wave
    reads the counter into an SGPR pair ("=s") and waits for the scalar-memory result (lgkmcnt)."""
    global triton, tl, _KERNELS
    if _KERNELS is not None:
        return _KERNELS
    import types

    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def fingrav_memrealtime_stamp(buf_ptr, counter_ptr):
        t = tl.inline_asm_elementwise(
            "s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s", [], dtype=tl.int64, is_pure=False, pack=1
        )
        i = tl.atomic_add(counter_ptr, 1)
        tl.store(buf_ptr + i, t)

    @triton.jit(do_not_specialize=["duration_ticks"])
    def fingrav_memrealtime_spin(t0_ptr, duration_ticks, a, b, out_ptr, BLOCK: tl.constexpr, INNER: tl.constexpr):  # noqa: N803
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        deadline = tl.load(t0_ptr) + duration_ticks
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        y = x + 0.5
        now = tl.inline_asm_elementwise(
            "s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s", [], dtype=tl.int64, is_pure=False, pack=1
        )
        while now < deadline:
            for _ in tl.static_range(INNER):
                x = x * a + b
                y = y * a + b
            now = tl.inline_asm_elementwise(
                "s_memrealtime $0\ns_waitcnt lgkmcnt(0)", "=s", [], dtype=tl.int64, is_pure=False, pack=1
            )
        tl.store(out_ptr + pid * BLOCK + offs, x + y)

    _KERNELS = types.SimpleNamespace(stamp=fingrav_memrealtime_stamp, spin=fingrav_memrealtime_spin)
    return _KERNELS


class MemRealtimeStamper:
    """GPU timestamps on ROCm: ``s_memrealtime`` through a Triton kernel (1 program, 1 wavefront).

    Same contract as fingrav.device.gpu_timestamp's stampers: ``stamp(buf, counter)`` enqueues on torch's
    current stream ``buf[counter] = ticks; counter += 1`` (int64 / int32 device tensors); ``to_ns(raw)``
    converts ticks to ns (x 10 at 100 MHz). UNVERIFIED on hardware (docs/AMD.md)."""

    name = "triton-memrealtime"
    impl = "triton"

    def __init__(self, device_index: int, hz: int = REALTIME_HZ) -> None:
        self.device_index = device_index
        self.hz = hz
        self._kernel = _memrealtime_kernels().stamp

    def stamp(self, buf: Any, counter: Any) -> None:  # pragma: no cover - needs a ROCm GPU
        self._kernel[(1,)](buf, counter, num_warps=1)

    def to_ns(self, raw: Any) -> np.ndarray:
        return realtime_ticks_to_ns(raw, self.hz)


class MemRealtimeSpinner:
    """Constant FMA load on every CU until s_memrealtime passes t0 + duration (Triton, ROCm).

    Same contract as gpu_timestamp's spinners: ``launch(t0, duration_ns)``, `t0` an int64 tensor whose
    element 0 is a stamp from MemRealtimeStamper (ticks). UNVERIFIED on hardware."""

    name = "triton-memrealtime-fma-spin"
    impl = "triton"

    def __init__(self, device_index: int, sm_count: int, programs_per_sm: int = 4, hz: int = REALTIME_HZ) -> None:
        import torch

        self.device_index = device_index
        self.hz = hz
        self.programs = max(1, int(sm_count) * int(programs_per_sm))
        self._kernel = _memrealtime_kernels().spin
        self._out = torch.empty(self.programs * SPIN_BLOCK, dtype=torch.float32, device=f"cuda:{device_index}")

    def launch(self, t0: Any, duration_ns: int) -> None:  # pragma: no cover - needs a ROCm GPU
        self._kernel[(self.programs,)](
            t0,
            realtime_ticks_for_ns(duration_ns, self.hz),
            SPIN_A,
            SPIN_B,
            self._out,
            BLOCK=SPIN_BLOCK,
            INNER=SPIN_INNER,
            num_warps=SPIN_THREADS // WAVEFRONT,
        )


def make_memrealtime_stamper(device_index: int, hz: int = REALTIME_HZ) -> MemRealtimeStamper:
    """A MemRealtimeStamper that compiled and passed gpu_timestamp's self-test (two ordered stamps)."""
    try:
        from fingrav.device.gpu_timestamp import _self_test_stamper

        stamper = MemRealtimeStamper(device_index, hz)
        _self_test_stamper(stamper, device_index)
    except Exception as exc:
        raise BackendUnavailableError(
            f"amdsmi backend: the s_memrealtime stamp kernel does not work here: {type(exc).__name__}: {exc}"
        ) from exc
    logger.info("GPU timestamp kernel: %s (%d Hz, unverified rate)", stamper.name, hz)
    return stamper


def make_memrealtime_spinner(
    device_index: int, sm_count: int, stamper: MemRealtimeStamper, programs_per_sm: int = 4
) -> MemRealtimeSpinner:
    """A MemRealtimeSpinner that passed gpu_timestamp's self-test against `stamper`."""
    try:
        from fingrav.device.gpu_timestamp import _self_test_spinner

        spinner = MemRealtimeSpinner(device_index, sm_count, programs_per_sm, stamper.hz)
        _self_test_spinner(spinner, stamper, device_index)
    except Exception as exc:
        raise BackendUnavailableError(
            f"amdsmi backend: the s_memrealtime spin kernel does not work here: {type(exc).__name__}: {exc}"
        ) from exc
    logger.info("spin kernel: %s (%d programs)", spinner.name, spinner.programs)
    return spinner


# ----------------------------------------------------------------------------------------- the device
def same_gpu_check(amdsmi_bdf: Any, torch_props: Any) -> str:
    """Do amdsmi's GPU and torch's GPU sit on the same PCI bus? "same", "different: ..." or "unknown"."""
    bus = bdf_bus(amdsmi_bdf) if isinstance(amdsmi_bdf, str) else None
    torch_bus = getattr(torch_props, "pci_bus_id", None)
    if bus is None or not isinstance(torch_bus, int):
        return "unknown"
    if bus == torch_bus:
        return "same"
    return f"different: amdsmi's GPU is on PCI bus {bus:#04x}, torch's on {torch_bus:#04x}"


class AMDSMIDevice(TorchGPUDevice):
    """An AMD Instinct GPU: torch kernels and execution stamps (TorchGPUDevice), power and energy through
    amdsmi (AMDSMIPower and its sampler process), GPU time from s_memrealtime (unverified on hardware).

    index: torch's device index; amdsmi_index: amdsmi's processor index of the same GPU (default: index,
    or the amdsmi GPU on torch's PCI bus when the two differ, e.g. under HIP_VISIBLE_DEVICES);
    power_kwargs: AMDSMIPower's options (period_ns, source, reader, component_fields, firmware_period_ns,
    gap_factor); torch_kwargs: TorchGPUDevice's (launch_mode, seed, l2_rotation_factor, stamp_capacity)."""

    backend = "amdsmi"

    def __init__(
        self,
        index: int = 0,
        *,
        amdsmi_index: int | None = None,
        power_kwargs: dict[str, Any] | None = None,
        **torch_kwargs: Any,
    ) -> None:
        # amdsmi first: its failures have the clearer messages, and it needs no GPU context.
        self._power = AMDSMIPower(index if amdsmi_index is None else amdsmi_index, **(power_kwargs or {}))
        try:
            super().__init__(index, **torch_kwargs)
        except Exception:
            self._power.close()
            raise
        self._same_gpu = same_gpu_check(self._power.describe().get("bdf"), self.props)
        torch_bus = getattr(self.props, "pci_bus_id", None)
        if self._same_gpu.startswith("different") and amdsmi_index is None and isinstance(torch_bus, int):
            # e.g. HIP_VISIBLE_DEVICES renumbered torch's GPUs: find torch's GPU among amdsmi's by PCI bus
            found = self._power.index_of_pci_bus(torch_bus)
            if found is not None:
                logger.info("torch GPU %d is amdsmi GPU %d (PCI bus %#04x)", self.index, found, torch_bus)
                self._power.close()
                try:
                    self._power = AMDSMIPower(found, **(power_kwargs or {}))
                except Exception:
                    super().close()
                    raise
                self._same_gpu = same_gpu_check(self._power.describe().get("bdf"), self.props)
        if self._same_gpu.startswith("different"):
            logger.error(
                "amdsmi GPU %d and torch GPU %d are not the same device (%s): power would be read from "
                "another GPU than the one that runs the kernels; pass amdsmi_index",
                self._power.index,
                self.index,
                self._same_gpu,
            )

    # -- GPU clock hooks (TorchGPUDevice) ---------------------------------------------------
    def _make_stamper(self) -> Any:
        if not self.is_rocm:
            raise BackendUnavailableError(
                "amdsmi backend: s_memrealtime needs a ROCm build of torch (torch.version.hip is None here)"
            )
        return make_memrealtime_stamper(self.index)

    def _make_spinner(self) -> Any:
        return make_memrealtime_spinner(self.index, int(self.props.multi_processor_count), self._stamper)

    # -- power side -------------------------------------------------------------------------
    @property
    def channels(self) -> tuple[str, ...]:
        return self._power.channels

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **self._power.describe(), "same_gpu_check": self._same_gpu}

    def start_sampling(self) -> None:
        self._power.start_sampling()

    def drain_samples(self) -> PowerSamples:
        return self._power.drain_samples()

    def stop_sampling(self) -> PowerSamples:
        return self._power.stop_sampling()

    def energy_mj(self) -> float | None:
        return self._power.energy_mj()

    def close(self) -> None:
        try:
            self._power.close()
        finally:
            super().close()


__all__ = [
    "AMDSMIDevice",
    "AMDSMIPower",
    "amdsmi_error_text",
    "MemRealtimeSpinner",
    "MemRealtimeStamper",
    "make_memrealtime_spinner",
    "make_memrealtime_stamper",
    "import_amdsmi",
    "open_amdsmi",
    "realtime_ticks_to_ns",
]
