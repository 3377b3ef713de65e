"""A real SLURM in CI: a single-node cluster from Debian's slurm-wlm and munge (no accounting database), two fake
GPUs as GRES backed by character devices, and a small simulated sweep over both listed GPUs run through
snakemake-executor-plugin-slurm with profiles/slurm: every GPU job goes through sbatch with its GPU request, the
analysis runs locally, and summary.csv equals a local run's with the same seed.

SLURM 22.05 (Debian 12) rejects a GRES `File=` that is a plain file and registers no GPU from a bare `Count=`,
hence the `mknod` devices. No slurmdbd: sacct fails, so the plugin polls squeue, which sees finished jobs for
MinJobAge (300 s here, >= the 3 x first-poll delay the plugin needs). `SlurmdParameters=config_overrides` lets the
fake node have the CPUs and memory the profile asks for on a 2-core machine. The fixture starts munged, slurmctld
and slurmd in the foreground as its children and stops each of them (by its pid) at the end.

Needs root (the daemons run as root). It runs in CI (.ci/run installs the packages); elsewhere it is skipped when
not root or when SLURM is not installed.
"""

from __future__ import annotations

import csv
import json
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SNAKEFILE, run_snakemake, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.waits]  # waits: the plugin polls squeue, backing off by 10 s

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "srun", "sinfo", "scancel")
FAKE_GPUS = 2
GPU_TYPE = "fake"

if os.geteuid() != 0 and not os.environ.get("CI"):
    pytest.skip("starting slurmctld, slurmd and munged needs root (CI runs this test as root)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ok, timeout_s: float, logs: list[Path]) -> None:
    """Poll `ok()` until it is true; fail naming `what` with the logs' tails after `timeout_s`."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if ok():
            return
        time.sleep(0.3)
    tails = "\n".join(f"--- {p}:\n{p.read_text()[-2000:]}" for p in logs if p.exists())
    pytest.fail(f"{what} not ready after {timeout_s:.0f} s\n{tails}")


class Cluster:
    """A running single-node SLURM cluster: its env (SLURM_CONF) and logs."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.conf = base / "slurm.conf"
        self.ctld_log = base / "slurmctld.log"
        self.slurmd_log = base / "slurmd.log"
        # the plugin's job step runs `srun` with every SLURM_* variable but the job's ids removed, SLURM_CONF too: a
        # real cluster's srun finds /etc/slurm/slurm.conf (or the configless cache); this one's gets the test's
        # config from an `srun` first on PATH that sets it (the system's SLURM files stay untouched)
        bin_dir = base / "bin"
        bin_dir.mkdir()
        srun = bin_dir / "srun"
        srun.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {shutil.which("srun")} "$@"\n')
        srun.chmod(0o755)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"}

    def run(self, *cmd: str) -> str:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=30, check=True).stdout


def _write_config(base: Path, host: str) -> None:
    (base / "state").mkdir()
    (base / "spool").mkdir()
    devs = base / "dev"
    devs.mkdir()
    for i in range(FAKE_GPUS):  # character devices (/dev/null's numbers): slurmd registers a GPU per device file
        os.mknod(devs / f"fakegpu{i}", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    conf = f"""
ClusterName=fingrav-ci
SlurmctldHost={host}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge.socket
SlurmUser=root
SlurmdUser=root
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/slurmctld.pid
SlurmdPidFile={base}/slurmd.pid
SlurmctldLogFile={base}/slurmctld.log
SlurmdLogFile={base}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
ReturnToService=2
MpiDefault=none
SlurmdParameters=config_overrides
NodeName={host} NodeAddr=127.0.0.1 CPUs=8 RealMemory=64000 Gres=gpu:{GPU_TYPE}:{FAKE_GPUS} State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    (base / "slurm.conf").write_text(conf.lstrip())
    (base / "gres.conf").write_text(
        f"NodeName={host} Name=gpu Type={GPU_TYPE} File={devs}/fakegpu[0-{FAKE_GPUS - 1}]\n"
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """munged + slurmctld + slurmd, in the foreground as this process's children; each stopped at the end."""
    missing = [c for c in (*DAEMONS, *CLIENTS) if shutil.which(c) is None]
    if missing:  # CI installs it (.ci/run) and must run this test; elsewhere (the README's test command) it skips
        say = pytest.fail if os.environ.get("CI") else pytest.skip
        say(f"SLURM is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge")
    base = tmp_path_factory.mktemp("slurm")
    host = socket.gethostname()
    _write_config(base, host)
    key = base / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    c = Cluster(base)
    procs: list[subprocess.Popen] = []
    outs = []

    def start(name: str, *args: str) -> None:
        outs.append(open(base / f"{name}.out", "w"))  # noqa: SIM115 - the daemon's output while it runs
        procs.append(subprocess.Popen([name, *args], stdout=outs[-1], stderr=subprocess.STDOUT, env=c.env))

    try:
        start(
            "munged", "-F", "--force", f"--socket={base}/munge.socket", f"--key-file={key}",
            f"--pid-file={base}/munged.pid", f"--log-file={base}/munged.log", f"--seed-file={base}/munge.seed",
        )  # fmt: skip
        _wait("munged", lambda: (base / "munge.socket").exists(), 20, [base / "munged.out"])
        start("slurmctld", "-D", "-i", "-f", str(c.conf))
        start("slurmd", "-D", "-f", str(c.conf))

        def idle() -> bool:
            try:
                return c.run("sinfo", "-h", "-o", "%T").strip() == "idle"
            except subprocess.SubprocessError:
                return False

        _wait("the node", idle, 60, [base / "slurmctld.out", base / "slurmd.out", c.ctld_log, c.slurmd_log])
        node = c.run("scontrol", "show", "node", host)
        assert f"Gres=gpu:{GPU_TYPE}:{FAKE_GPUS}" in node, node
        yield c
    finally:
        if procs and procs[-1].poll() is None:  # no job outlives the test: cancel, wait for the steps to end
            user = pwd.getpwuid(os.getuid()).pw_name
            subprocess.run(["scancel", "--full", "-u", user], env=c.env, capture_output=True, timeout=30)
            end = time.monotonic() + 30
            while time.monotonic() < end:
                q = subprocess.run(["squeue", "-h", "-t", "R,CG,PD"], env=c.env, capture_output=True, text=True)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(0.5)
        for proc in reversed(procs):  # slurmd, slurmctld, munged: ours, by pid
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        for out in outs:
            out.close()


def sweep_config() -> dict:
    """Two scenarios spread over two listed (simulated) GPUs, the cards a few % apart."""
    data = tiny_config(sweep="slurm-ci")
    data["device"].update(gpus=[0, 1])
    data["device"]["sim"]["card_spread_pct"] = 3.0
    data["scenarios"] = data["scenarios"][:2]
    return data


def site_profile(path: Path) -> Path:
    """profiles/slurm as a site fills it in: this cluster's GPU type, squeue for status (no accounting), 1 CPU per
    GPU job (2 cores), and quick status polls (a CI run, not a production queue)."""
    prof = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    for rule in ("calibrate", "collect"):
        prof["set-resources"][rule]["gpu_model"] = GPU_TYPE
    prof["slurm-status-command"] = "squeue"
    prof["slurm-init-seconds-before-status-checks"] = 1
    prof["seconds-between-status-checks"] = 1
    prof["slurm-keep-successful-logs"] = True
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(yaml.safe_dump(prof))
    return path


def snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = run_snakemake(["-s", str(SNAKEFILE), "-d", str(workdir), *args], cwd=workdir, timeout=600, env=env)
    assert proc.returncode == 0, f"snakemake failed ({proc.returncode}):\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    return proc


def read_summary(path: Path) -> dict[str, dict[str, str]]:
    with open(path) as fh:
        return {r["scenario"]: r for r in csv.DictReader(fh)}


def jobs(c: Cluster) -> list[dict[str, str]]:
    """Every job slurmctld still holds (MinJobAge), with its details (-d: the GRES index it was given)."""
    out = []
    for line in c.run("scontrol", "show", "job", "-d", "-o").splitlines():
        if line.startswith("JobId="):
            out.append(dict(re.findall(r"(\S+?)=(\S*)", line)) | {"_line": line})
    return out


def test_sweep_through_slurm_equals_local_run(cluster: Cluster, tmp_path: Path) -> None:
    cfg_data = sweep_config()
    local, remote = tmp_path / "local", tmp_path / "slurm"
    for d in (local, remote):
        d.mkdir()
        (d / "sweep.yaml").write_text(yaml.safe_dump(cfg_data))
    snakemake(local, "--configfile", "sweep.yaml", "--cores", "2")
    profile = site_profile(tmp_path / "site-profile")
    proc = snakemake(remote, "--profile", str(profile), "--configfile", "sweep.yaml", env=cluster.env)

    # every GPU job went through sbatch, asking for one GPU of the site's type; the analysis did not
    ours = [j for j in jobs(cluster) if j.get("WorkDir") == str(remote)]
    comments = sorted(j.get("Comment", "") for j in ours)
    assert [c.split("_wildcards_")[0] for c in comments] == ["rule_calibrate"] * 2 + ["rule_collect"] * 2, comments
    for j in ours:
        assert j["JobState"] == "COMPLETED", j["_line"]
        assert j.get("TresPerJob") == f"gres:gpu:{GPU_TYPE}:1", j["_line"]
    submitted = re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", cluster.ctld_log.read_text())
    assert {j["JobId"] for j in ours} <= set(submitted)
    assert "has been submitted with SLURM jobid" in proc.stdout + proc.stderr
    spans = sorted((j["StartTime"], j["EndTime"]) for j in ours)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False)), f"no two jobs ran at once: {spans}"

    # provenance: host, the simulated card's UUID and the SLURM job (its id, the fake GPU it got) of every GPU job;
    # the two calibrations ran at once, on both fake GPUs
    res = remote / "results" / "slurm-ci"
    provs = [
        json.loads((res / "cards" / str(g) / "calibration" / "gpu0.json").read_text())["provenance"] for g in (0, 1)
    ]
    for g, name in ((0, "cb-2k"), (1, "cb-8k")):
        provs.append(
            json.loads((res / "cards" / str(g) / "raw" / "gpu0" / name / "plan.json").read_text())["provenance"]
        )
    uuids = []
    for prov in provs:
        job = prov["scheduler_job"]
        assert job["scheduler"] == "slurm" and job["job_id"] in {j["JobId"] for j in ours}, prov
        assert prov["host"] == socket.gethostname()
        uuids.append(prov["gpu_uuid"])
    assert uuids[0] == uuids[2] != uuids[1] == uuids[3] and uuids[0].startswith("SIM-"), uuids
    assert {p["scheduler_job"].get("cuda_visible_devices") for p in provs[:2]} == {"0", "1"}, provs[:2]

    # the same numbers as the local run with the same seed
    a = read_summary(local / "results" / "slurm-ci" / "summary.csv")
    b = read_summary(remote / "results" / "slurm-ci" / "summary.csv")
    assert a.keys() == b.keys() == {"cb-2k", "cb-8k"}
    for name in a:
        assert a[name].keys() == b[name].keys()
        for col, va in a[name].items():
            vb = b[name][col]
            try:
                assert float(vb) == pytest.approx(float(va), rel=1e-9, abs=1e-12), (name, col)
            except ValueError:
                assert vb == va, (name, col)
    # the GPU each scenario ran on (a metrics.csv number: summary.csv is narrow)
    with open(remote / "results" / "slurm-ci" / "metrics.csv", newline="") as fh:
        gpu = {r["scenario"]: float(r["value"]) for r in csv.DictReader(fh) if r["metric"] == "gpu"}
    assert gpu == {"cb-2k": 0.0, "cb-8k": 1.0}
    # the scheduler kept the DAG's order: every job ended after it started, no collect job started before a
    # calibration had ended (how long the run took is a benchmark, not a test: it fails on a busy machine)
    assert all(j["StartTime"] <= j["EndTime"] for j in ours), [(j["StartTime"], j["EndTime"]) for j in ours]
    first_calibrated = min(j["EndTime"] for j in ours if j.get("Comment", "").startswith("rule_calibrate"))
    assert all(j["StartTime"] >= first_calibrated for j in ours if j.get("Comment", "").startswith("rule_collect"))
