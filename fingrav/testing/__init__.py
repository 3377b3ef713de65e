"""Test support shipped with fingrav, shared by tests and benchmarks: synthetic raw data with known answers
(`synthetic`) and fakes of the vendor libraries (`fakes`: pynvml, amdsmi)."""
