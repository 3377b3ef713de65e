"""amdsmi: importing it (one clear message per way it fails), and wrapping its errors (the only place).

GPU-side module: standard library only; amdsmi is imported by module name, so that tests can hand in a
fake (``fingrav.testing.fakes.fake_amdsmi``).

Import failures (`import_amdsmi`; each raises BackendUnavailableError with its own message): the package
is missing; ``libamd_smi.so`` is missing (the PyPI wheel ships only the Python bindings: it prints the
OSError, then dies on ``KeyError: 'libamd_smi.so'``; older wrappers raise the OSError); the bindings do
not match the library (``AttributeError: ... undefined symbol``, a function fingrav needs is absent, or
amdsmi_init fails to load a symbol); no AMD GPU (the driver is not loaded, or no processor handles).

Errors: `call_amdsmi` wraps every AmdSmiException exactly once, through one code map (`STATUS_MAP`):
the statuses amdsmi_init returns without a usable GPU, or with bindings that do not match the library,
become BackendUnavailableError; every other failure is a DeviceError.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import io
import logging
from types import ModuleType
from typing import Any

from fingrav.errors import BackendUnavailableError, DeviceError, FingravError

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
NA = "N/A"


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


# ----------------------------------------------------------------------------------------- errors
#: the one code map: amdsmi status (amdsmi_wrapper.amdsmi_status_t) -> (name, meaning), for the call where
#: it has one (amdsmi_init): "no_gpu" (no usable GPU) or "mismatch" (the bindings do not match the library)
STATUS_MAP: dict[str, dict[int, tuple[str, str]]] = {
    "amdsmi_init": {
        18: ("INIT_ERROR", "no_gpu"),
        31: ("NOT_FOUND", "no_gpu"),
        34: ("DRIVER_NOT_LOADED", "no_gpu"),
        51: ("NO_DRV", "no_gpu"),
        10: ("NO_PERM", "no_gpu"),
        4: ("FAIL_LOAD_MODULE", "mismatch"),
        5: ("FAIL_LOAD_SYMBOL", "mismatch"),
    },
}


def amdsmi_error_text(exc: BaseException) -> str:
    """`str(exc)` plus amdsmi's numeric status (err_code) when the exception carries one."""
    code = getattr(exc, "err_code", None)
    text = str(exc) or type(exc).__name__
    return f"{text} (err_code {code})" if code is not None and "err_code" not in text else text


def wrap_amdsmi_error(smi: Any, exc: BaseException, name: str) -> FingravError:
    """The fingrav error for an AmdSmiException raised by `smi.<name>()`, through `STATUS_MAP`."""
    failed = f"{name} failed: {amdsmi_error_text(exc)}"
    status = STATUS_MAP.get(name, {}).get(getattr(exc, "err_code", None))  # type: ignore[arg-type]
    if status is not None:
        label, meaning = status
        if meaning == "no_gpu":
            return BackendUnavailableError(msg_no_gpu(f"{name}: {label}, {failed}"))
        return BackendUnavailableError(
            msg_version_mismatch(amdsmi_package_version(smi), amdsmi_library_version(smi), f"{name}: {failed}")
        )
    return DeviceError(failed)


def call_amdsmi(smi: Any, name: str, *args: Any, **kwargs: Any) -> Any:
    """Call `smi.<name>(*args)`; an AmdSmiException becomes one fingrav error (`wrap_amdsmi_error`, the
    only place fingrav wraps amdsmi's errors). A function the installed amdsmi lacks is a DeviceError too."""
    fn = getattr(smi, name, None)
    if fn is None:
        raise DeviceError(
            f"amdsmi has no {name}(): the installed amdsmi Python package is older than fingrav expects "
            "(fingrav follows amdsmi 7.0); install the amdsmi that matches your ROCm"
        )
    amdsmi_exc = getattr(smi, "AmdSmiException", None)
    try:
        return fn(*args, **kwargs)
    except FingravError:
        raise
    except Exception as exc:
        if amdsmi_exc is not None and isinstance(exc, amdsmi_exc):
            raise wrap_amdsmi_error(smi, exc, name) from exc
        raise


# ----------------------------------------------------------------------------------------- versions
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


# ----------------------------------------------------------------------------------------- opening
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


def init_amdsmi(smi: Any) -> None:
    """amdsmi_init for GPUs (AmdSmiInitFlags.INIT_AMD_GPUS when the module has the enum)."""
    flags = getattr(smi, "AmdSmiInitFlags", None)
    if flags is not None and hasattr(flags, "INIT_AMD_GPUS"):
        call_amdsmi(smi, "amdsmi_init", flags.INIT_AMD_GPUS)
    else:
        call_amdsmi(smi, "amdsmi_init")


def shut_down(smi: Any) -> None:
    """amdsmi_shut_down, logging (not raising) a failure: used on the way out."""
    try:
        call_amdsmi(smi, "amdsmi_shut_down")
    except DeviceError as exc:
        logger.debug("amdsmi_shut_down: %s", exc)


def open_amdsmi(index: int = 0, module_name: str = "amdsmi") -> tuple[ModuleType, Any, int]:
    """Import and initialize amdsmi and return (module, processor handle of GPU `index`, GPU count)."""
    smi = import_amdsmi(module_name)
    init_amdsmi(smi)
    try:
        handles = call_amdsmi(smi, "amdsmi_get_processor_handles")
    except DeviceError:
        shut_down(smi)
        raise
    if not handles:
        shut_down(smi)
        raise BackendUnavailableError(msg_no_gpu("amdsmi_get_processor_handles() returned no GPU"))
    if not 0 <= index < len(handles):
        shut_down(smi)
        raise BackendUnavailableError(
            f"amdsmi backend: device.index={index} but amdsmi sees {len(handles)} AMD GPU(s) (0..{len(handles) - 1})"
        )
    return smi, handles[index], len(handles)


def optional(smi: Any, name: str, *args: Any) -> Any:
    """An identity query that may be unsupported: its value, or "N/A" (logged)."""
    try:
        return call_amdsmi(smi, name, *args)
    except DeviceError as exc:
        logger.debug("%s unavailable: %s", name, exc)
        return NA
