"""fingrav's own exceptions. Vendor-library errors are wrapped into these exactly once,
at the backend boundary (fingrav/device/*)."""


class FingravError(Exception):
    """Base class of every error fingrav raises on purpose."""


class ConfigError(FingravError):
    """The sweep config is invalid; the message names the field and the value."""


class BackendUnavailableError(FingravError):
    """A backend cannot be used here: its library, driver or device is missing."""


class DeviceError(FingravError):
    """A call into the vendor library or the GPU failed while measuring."""


class DataError(FingravError):
    """Raw or intermediate data is missing, inconsistent or not what a stage expects."""
