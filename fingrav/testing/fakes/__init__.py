"""Fakes of pynvml (`fake_pynvml`), amdsmi (`fake_amdsmi`) and torch (`fake_torch`) for tests without a GPU."""
