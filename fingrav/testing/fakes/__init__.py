"""Fakes of pynvml (`fake_pynvml`) and amdsmi (`fake_amdsmi`) for tests without a GPU."""
