"""User kernels: finding, importing and calling a factory, each failure one message naming the target
(fingrav/device/callables.py), and the preflight check that runs when a sweep is planned."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import tiny_config

from fingrav.config import parse_config
from fingrav.device.callables import build_launcher, call_launcher, find_problem, load_factory, split_target
from fingrav.errors import ConfigError, DeviceError
from fingrav.layout import SweepLayout
from fingrav.preflight import check_callables
from fingrav.stages import calibrate
from fingrav.stages.job import run_stage

USER = """
STATE = {"launches": 0}

def make(n=1, fail=False):
    if fail:
        raise ValueError(f"cannot allocate {n} elements")
    def launch():
        STATE["launches"] += n
    return launch

def broken_launch():
    def launch():
        raise RuntimeError("kernel crashed")
    return launch

def not_a_launcher():
    return 42

VALUE = 3
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "fingrav_test_user.py").write_text(USER)
    (tmp_path / "bad_import_user.py").write_text("import math\nraise ImportError('needs triton')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_split_target() -> None:
    assert split_target("a.b:c") == ("a.b", "c")
    assert split_target("dir/file.py:make") == ("dir/file.py", "make")
    with pytest.raises(ConfigError, match="expected 'package.module:factory'"):
        split_target("a.b")


def test_find_problem_looks_up_without_running(user_module: Path) -> None:
    assert find_problem("fingrav_test_user:make", user_module) is None
    assert find_problem("bad_import_user:make", user_module) is None  # found; importing it is collect's business
    assert find_problem("fingrav_test_user.py:make", user_module) is None
    assert "no module named 'no_such_module_xyz'" in find_problem("no_such_module_xyz:make", user_module)
    assert "no such file" in find_problem("missing/file.py:make", user_module)


def test_a_package_is_looked_up_without_running_its_init(tmp_path: Path) -> None:
    """A dry run looks a target up, never imports it: a package's __init__.py does not run (here it would write a
    file), for the package's own module and for a submodule alike."""
    pkg = tmp_path / "fingrav_trap_pkg"
    (pkg / "sub").mkdir(parents=True)
    ran = tmp_path / "init-ran"
    (pkg / "__init__.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    (pkg / "sub" / "__init__.py").write_text(f"open({str(ran)!r}, 'w').write('ran')\n")
    (pkg / "sub" / "kernels.py").write_text("def make():\n    return lambda: None\n")
    (pkg / "plain.py").write_text("def make():\n    return lambda: None\n")
    assert find_problem("fingrav_trap_pkg.sub.kernels:make", tmp_path) is None
    assert find_problem("fingrav_trap_pkg.plain:make", tmp_path) is None
    assert find_problem("fingrav_trap_pkg:make", tmp_path) is None
    assert "no module named 'fingrav_trap_pkg.nope'" in find_problem("fingrav_trap_pkg.nope:make", tmp_path)
    assert "no module named 'fingrav_trap_pkg.plain.x'" in find_problem("fingrav_trap_pkg.plain.x:make", tmp_path)
    assert not ran.exists() and "fingrav_trap_pkg" not in sys.modules


def test_factory_is_called_with_its_args_and_its_launcher_runs(user_module: Path) -> None:
    import fingrav_test_user

    fn = build_launcher("fingrav_test_user:make", {"n": 5})
    call_launcher("fingrav_test_user:make", fn)
    fn()
    assert fingrav_test_user.STATE["launches"] == 10
    # a file target, relative to the working directory: a module of its own
    assert callable(load_factory("fingrav_test_user.py:make"))


@pytest.mark.parametrize(
    ("target", "args", "error", "message"),
    [
        (
            "no_such_module_xyz:make",
            {},
            ConfigError,
            r"'no_such_module_xyz:make': importing 'no_such_module_xyz' failed",
        ),
        ("bad_import_user:make", {}, ConfigError, r"ImportError: needs triton \(at .*bad_import_user.py:2"),
        ("fingrav_test_user:nothing", {}, ConfigError, r"module 'fingrav_test_user' has no attribute 'nothing'"),
        ("fingrav_test_user:VALUE", {}, ConfigError, r"'VALUE' is of type int, not a function"),
        ("fingrav_test_user:make", {"fail": True}, DeviceError, r"the factory raised ValueError: cannot allocate 1"),
        ("fingrav_test_user:make", {"m": 1}, DeviceError, r"the factory raised TypeError: .*unexpected keyword"),
        ("fingrav_test_user:not_a_launcher", {}, DeviceError, r"returned an object of type int, not a function"),
        ("missing_dir/user.py:make", {}, ConfigError, r"no such file"),
    ],
)
def test_each_failure_is_one_message_naming_the_target(user_module, target, args, error, message) -> None:
    with pytest.raises(error, match=message) as exc:
        build_launcher(target, args)
    text = str(exc.value)
    assert target in text and "\n" not in text and "Traceback" not in text


def test_a_launch_function_that_raises_is_named(user_module: Path) -> None:
    fn = build_launcher("fingrav_test_user:broken_launch", {})
    with pytest.raises(
        DeviceError, match=r"'fingrav_test_user:broken_launch': its launch function raised RuntimeError"
    ):
        call_launcher("fingrav_test_user:broken_launch", fn)


def test_preflight_names_the_scenario_of_a_missing_target(user_module: Path) -> None:
    data = tiny_config()
    data["scenarios"] = [
        {"name": "ok", "kernel": {"kind": "callable", "target": "fingrav_test_user:make", "bytes": 8.0}},
        {"name": "gone", "kernel": {"kind": "callable", "target": "gone_module_xyz:make", "bytes": 8.0}},
    ]
    with pytest.raises(ConfigError, match=r"scenarios\['gone'\].kernel: callable target 'gone_module_xyz:make'"):
        check_callables(parse_config(data), user_module)
    data["scenarios"] = data["scenarios"][:1]
    check_callables(parse_config(data), user_module)


def test_the_collect_job_reports_a_broken_factory_in_one_line(user_module: Path) -> None:
    """A target that preflight finds but that fails to import: the collect job (as its rule runs it) fails with one
    error line naming the target, no traceback."""
    data = tiny_config()
    data["calibration"] = {"steps": 4, "clock_bursts": 2, "clock_reads_per_burst": 10}
    data["device"] = {"backend": "sim", "sim": {"preset": "h200"}}  # 2 channels: a quick calibration
    data["scenarios"] = [
        {"name": "bad", "kernel": {"kind": "callable", "target": "bad_import_user:make", "bytes": 8e6}}
    ]
    cfg = parse_config(data)
    check_callables(cfg, user_module)  # found: only importing it shows the problem
    layout_root = user_module / "results" / "tiny"
    calibrate.run(SweepLayout(layout_root), cfg.device, cfg.calibration, cfg.seed)
    params = {
        "root": str(layout_root),
        "device": cfg.device.model_dump(mode="json"),
        "scenario": cfg.scenarios[0].model_dump(mode="json", exclude={"run_policy"}),
        "policy": cfg.policy_for("bad").model_dump(mode="json"),
        "seed": cfg.seed,
        "calibration": cfg.calibration.model_dump(mode="json"),
    }
    log = user_module / "collect.log"
    assert run_stage(["collect", "--log", str(log), "--params", json.dumps(params)]) == 1
    text = log.read_text()
    errors = [line for line in text.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "callable target 'bad_import_user:make': importing" in errors[0], text
    assert "Traceback" not in text
