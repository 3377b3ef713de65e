"""The analysis (polars): pure functions over frames with units in column names. The stages
(`fingrav.stages.bin`, `fingrav.stages.differentiate`, `fingrav.stages.combine`) read and write the files."""
