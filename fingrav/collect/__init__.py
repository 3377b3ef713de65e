"""GPU-side stages: calibrate (clock sync + sensor characterization) and collect (one scenario)."""
