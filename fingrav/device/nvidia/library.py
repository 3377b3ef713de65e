"""pynvml (package ``nvidia-ml-py``): importing it, and wrapping its errors (the only place that does).

GPU-side module: standard library only. pynvml is imported by module name (`load_nvml`), so that tests
can hand in a fake (``fingrav.testing.fakes.fake_pynvml``).

Every NVML error is wrapped exactly once, by `nvml_errors` / `nvml_call`, into ``fingrav.errors``
through one code map (`ERROR_MAP`): ``BackendUnavailableError`` when the library, driver or device is
missing, ``DeviceError`` otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
from typing import Any

from fingrav.errors import BackendUnavailableError, DeviceError, FingravError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'fingrav[nvidia]' (the official nvidia-ml-py package, which provides `pynvml`)"

#: NVML constants, with the values of nvidia-ml-py, for modules that lack some of them
NVML_DEFAULTS: dict[str, int] = {
    "NVML_SUCCESS": 0,
    "NVML_ERROR_NOT_SUPPORTED": 3,
    "NVML_ERROR_NO_PERMISSION": 4,
    "NVML_ERROR_NOT_FOUND": 6,
    "NVML_ERROR_DRIVER_NOT_LOADED": 9,
    "NVML_ERROR_LIBRARY_NOT_FOUND": 12,
    "NVML_ERROR_FUNCTION_NOT_FOUND": 13,
    "NVML_ERROR_GPU_IS_LOST": 15,
    "NVML_ERROR_GPU_NOT_FOUND": 28,
    "NVML_TOTAL_POWER_SAMPLES": 0,
    "NVML_FI_DEV_POWER_AVERAGE": 185,
    "NVML_POWER_SCOPE_MEMORY": 2,
}

_NO_DRIVER = (
    "{what}: the NVIDIA driver / libnvidia-ml.so.1 is not available ({text}); "
    "is this a machine with an NVIDIA GPU and its driver installed?"
)
#: the one code map: NVML error code name -> (fingrav error class, message; {what} = the call, {text} = NVML's)
ERROR_MAP: dict[str, tuple[type[FingravError], str]] = {
    "NVML_ERROR_LIBRARY_NOT_FOUND": (BackendUnavailableError, _NO_DRIVER),
    "NVML_ERROR_DRIVER_NOT_LOADED": (BackendUnavailableError, _NO_DRIVER),
    "NVML_ERROR_GPU_NOT_FOUND": (BackendUnavailableError, "{what}: no such NVIDIA GPU ({text})"),
    "NVML_ERROR_NO_PERMISSION": (
        DeviceError,
        "{what} failed: {text}; the user lacks the permission for this NVML query",
    ),
    "NVML_ERROR_GPU_IS_LOST": (DeviceError, "{what} failed: {text}; the GPU fell off the bus or needs a reset"),
}
_OTHER_ERROR = (DeviceError, "{what} failed: {text}")


def load_nvml(module_name: str = "pynvml") -> Any:
    """Import pynvml (or a stand-in named `module_name`); BackendUnavailableError when missing."""
    try:
        nvml = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailableError(f"NVML backend: cannot import {module_name!r} ({exc}); {INSTALL_HINT}") from exc
    if nvml is None or not hasattr(nvml, "nvmlInit"):
        raise BackendUnavailableError(
            f"NVML backend: {module_name!r} is not NVIDIA's pynvml (no nvmlInit); {INSTALL_HINT}"
        )
    return nvml


def nvml_code(nvml: Any, name: str, default: int | None = None) -> int:
    """An NVML constant from `nvml`, or its nvidia-ml-py value (`NVML_DEFAULTS`) when the module lacks it."""
    fallback = NVML_DEFAULTS[name] if default is None else default
    value = getattr(nvml, name, fallback)
    return int(value) if isinstance(value, int) else fallback


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ calls into the library, which may be gone
        text = ""
    code = getattr(exc, "value", None)
    text = text or type(exc).__name__
    return f"{text} (NVML error {code})" if code is not None else text


def wrap_nvml_error(nvml: Any, exc: BaseException, what: str) -> FingravError:
    """The fingrav error for an NVMLError raised by `what` (a call description), through `ERROR_MAP`."""
    code = getattr(exc, "value", None)
    cls, template = next((entry for name, entry in ERROR_MAP.items() if code == nvml_code(nvml, name)), _OTHER_ERROR)
    return cls(template.format(what=what, text=_error_text(exc)))


def is_nvml_error(nvml: Any, exc: BaseException, code_name: str) -> bool:
    """True when `exc` is an NVMLError with the code `code_name` (e.g. "NVML_ERROR_NOT_FOUND")."""
    err_cls = getattr(nvml, "NVMLError", None)
    return (
        err_cls is not None and isinstance(exc, err_cls) and getattr(exc, "value", None) == nvml_code(nvml, code_name)
    )


@contextlib.contextmanager
def nvml_errors(nvml: Any, what: str) -> Iterator[None]:
    """Turn an NVMLError raised inside the block into one fingrav error (the only place that does)."""
    err_cls = getattr(nvml, "NVMLError", None)
    try:
        yield
    except FingravError:
        raise
    except Exception as exc:
        if err_cls is not None and isinstance(exc, err_cls):
            raise wrap_nvml_error(nvml, exc, what) from exc
        raise


def nvml_call(nvml: Any, name: str, *args: Any) -> Any:
    """`nvml.<name>(*args)` with errors wrapped; a function the installed pynvml lacks is a DeviceError."""
    fn = getattr(nvml, name, None)
    if fn is None:
        raise DeviceError(f"pynvml has no {name}(): nvidia-ml-py is too old; {INSTALL_HINT}")
    with nvml_errors(nvml, name):
        return fn(*args)


def init_nvml(nvml: Any) -> None:
    """nvmlInit with a clear message when the driver is missing."""
    nvml_call(nvml, "nvmlInit")


def shutdown_nvml(nvml: Any) -> None:
    """nvmlShutdown, logging (not raising) a failure: used on the way out."""
    try:
        nvml_call(nvml, "nvmlShutdown")
    except FingravError as exc:
        logger.warning("nvmlShutdown: %s", exc)


def normalize_uuid(uuid: str) -> str:
    """'GPU-1a2b...' / '1A2B...' -> '1a2b...' (NVML prefixes GPU-/MIG-, CUDA prints none)."""
    u = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            u = u[len(prefix) :]
    return u


def open_handle(nvml: Any, index: int | None = 0, uuid: str | None = None) -> tuple[int, Any]:
    """(NVML index, handle) of the GPU with this `uuid` (preferred) or NVML `index`.

    NVML indices ignore CUDA_VISIBLE_DEVICES; a UUID names the same GPU in CUDA and NVML."""
    count = int(nvml_call(nvml, "nvmlDeviceGetCount"))
    if count <= 0:
        raise BackendUnavailableError("NVML backend: the NVIDIA driver is loaded but NVML sees no GPU")
    if uuid:
        want = normalize_uuid(uuid)
        seen = []
        for i in range(count):
            handle = nvml_call(nvml, "nvmlDeviceGetHandleByIndex", i)
            got = str(nvml_call(nvml, "nvmlDeviceGetUUID", handle))
            seen.append(got)
            if normalize_uuid(got) == want:
                return i, handle
        raise BackendUnavailableError(f"NVML backend: no GPU with UUID {uuid!r} (NVML sees {seen})")
    index = 0 if index is None else int(index)
    if not 0 <= index < count:
        raise BackendUnavailableError(f"NVML backend: GPU index {index} does not exist (NVML sees {count} GPUs)")
    return index, nvml_call(nvml, "nvmlDeviceGetHandleByIndex", index)
