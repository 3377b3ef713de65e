"""fingrav/device/amd/library.py: amdsmi's errors wrapped once (by status for amdsmi_init, a DeviceError
otherwise), other exceptions untouched, optional identity queries as "N/A" (the fake amdsmi)."""

from __future__ import annotations

import pytest

from fingrav.device.amd import library as L
from fingrav.errors import BackendUnavailableError, DeviceError
from fingrav.testing.fakes import fake_amdsmi as fake


@pytest.fixture(autouse=True)
def _fresh_fake():
    fake.reset()
    yield
    fake.reset()


def test_a_failed_call_is_one_device_error_naming_the_function_and_status() -> None:
    L.init_amdsmi(fake)
    handle = fake.amdsmi_get_processor_handles()[0]
    fake.fail("amdsmi_get_energy_count", fake.AMDSMI_STATUS_NO_PERM)
    with pytest.raises(DeviceError, match=rf"amdsmi_get_energy_count failed: .*err_code {fake.AMDSMI_STATUS_NO_PERM}"):
        L.call_amdsmi(fake, "amdsmi_get_energy_count", handle)
    assert L.call_amdsmi(fake, "amdsmi_get_energy_count", handle)["energy_accumulator"] > 0  # once only


def test_amdsmi_init_statuses_say_what_is_wrong() -> None:
    fake.configure(init_error=fake.AMDSMI_STATUS_DRIVER_NOT_LOADED)
    with pytest.raises(BackendUnavailableError, match="no AMD GPU found.*DRIVER_NOT_LOADED"):
        L.init_amdsmi(fake)
    fake.configure(init_error=4)  # FAIL_LOAD_MODULE: the bindings do not match the library
    with pytest.raises(BackendUnavailableError, match="does not match"):
        L.init_amdsmi(fake)


def test_other_exceptions_and_missing_functions() -> None:
    class Module:
        AmdSmiException = fake.AmdSmiException

        @staticmethod
        def amdsmi_broken() -> None:
            raise KeyError("a bug, not amdsmi's status")

    with pytest.raises(KeyError):
        L.call_amdsmi(Module, "amdsmi_broken")
    with pytest.raises(DeviceError, match="amdsmi has no amdsmi_get_new_thing\\(\\).*7.0"):
        L.call_amdsmi(Module, "amdsmi_get_new_thing")


def test_an_unsupported_identity_query_is_na_and_shut_down_never_raises() -> None:
    L.init_amdsmi(fake)
    handle = fake.amdsmi_get_processor_handles()[0]
    fake.fail("amdsmi_get_gpu_device_bdf", fake.AMDSMI_STATUS_NOT_SUPPORTED)
    assert L.optional(fake, "amdsmi_get_gpu_device_bdf", handle) == L.NA
    fake.fail("amdsmi_shut_down", fake.AMDSMI_STATUS_IO)
    L.shut_down(fake)  # logged, not raised


def test_the_error_text_carries_the_status_once() -> None:
    err = fake.AmdSmiLibraryException(fake.AMDSMI_STATUS_BUSY)
    text = L.amdsmi_error_text(err)
    assert text.count("err_code") == 1
    assert L.amdsmi_error_text(ValueError("plain")) == "plain"
