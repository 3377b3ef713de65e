"""`fingrav.logs.logging_to`: a stage's records go to its log file while it runs, and nowhere after."""

from __future__ import annotations

import logging
from pathlib import Path

from fingrav.logs import logging_to


def test_logging_to_a_file_and_back(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "stage.log"
    root = logging.getLogger("fingrav")
    before = (list(root.handlers), root.level)
    with logging_to(log):
        logging.getLogger("fingrav.stages.x").info("inside %d", 1)
        logging.getLogger("fingrav.stages.x").debug("too fine")
    logging.getLogger("fingrav.stages.x").warning("after")
    text = log.read_text()
    assert "INFO fingrav.stages.x: inside 1" in text and "too fine" not in text and "after" not in text
    assert (list(root.handlers), root.level) == before


def test_logging_to_none_writes_no_file(tmp_path: Path) -> None:
    with logging_to(None):
        logging.getLogger("fingrav").info("stderr only")
    assert list(tmp_path.iterdir()) == []
