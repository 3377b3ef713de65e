"""fingrav: fine-grain GPU power profiles of short AI kernels (the FinGraV method)."""

__version__ = "0.1.0"
