"""The diagnostics in Chinese (issue 28): doctor's text, check's findings on the bad example scripts,
diagnose's findings on real logs, the hang report from saved captures and the bench verdicts say
everything in Chinese but code, commands and names; `--json` prints the English JSON whatever the
language, and the records (report.json, the doctor's and the bench's saved reports) stay English."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from fake_nvml import FakeGpu, FakePynvml, install, two_h200

from mgtutor.diagnostics.bench.allreduce_bench import verdict
from mgtutor.diagnostics.bench.maxbatch import FinderAnswer
from mgtutor.diagnostics.bench.scaling import shared_cores_note
from mgtutor.diagnostics.cluster.k8s import K8sError, K8sJob, manifest_yaml
from mgtutor.diagnostics.cluster.k8s_explain import walkthrough
from mgtutor.diagnostics.cluster.k8s_names import ClaimMount
from mgtutor.diagnostics.doctor.report import collect, render_text
from mgtutor.diagnostics.doctor.topology import read_topology
from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.demos import SCENARIOS
from mgtutor.diagnostics.failures.hang.analyse import analyse_capture
from mgtutor.diagnostics.failures.hang.flight_recorder import read_dumps
from mgtutor.diagnostics.failures.oom.explain import memory_lines
from mgtutor.training.foundation.i18n import _, set_language
from mgtutor.tui.cli import main
from tests.english_left import english_left
from tests.zh_runs import PROBE_TIMEOUT_S, saved_in, zh_bench_run, zh_probe_run  # noqa: F401 - fixtures, one run each

DATA = Path(__file__).parent / "data"
TORCH_OK = {"python": "3.12.3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.10.2", "nccl": "2.28.9",
            "distributed": True, "nccl_available": True, "gloo_available": True, "cuda_available": True,
            "device_count": 2, "arch_list": ["sm_80", "sm_90", "sm_100"], "devices": []}
# what check prints as code: the script's line (`   12 | ...`) and the fix's lines (`- ...`, `+ ...`)
CODE_LINE = re.compile(r"^\s+(\d+ \||[-+] )")
BAD_SCRIPTS = sorted(p.name for p in (DATA / "check").glob("*.bad.py"))
LOGS = ["cuda_oom_interleaved.log", "collective_timeout_nccl.log", "collective_timeout_norank.log",
        "port_in_use_libuv.log", "rendezvous_timeout_gloo_keys.log", "same_batches_no_sampler.log",
        "nccl_error_remote.log", "cuda_driver_too_old.log", "dataloader_worker_killed.log",
        "segfault_faulthandler.log"]
CAPTURES = sorted(p.name for p in (DATA / "hang").iterdir())


def machine_data(report: dict) -> tuple[str, ...]:
    """What the doctor echoes from the machine as it is: the OS and CPU names, the CPU's flags."""
    host = report["host"]
    return tuple(x for x in (host["os"], host["cpu_model"], "指令集标志") if x)


def chinese(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def cli(capsys, *args: str) -> str:
    main(list(args))
    return capsys.readouterr().out


def test_the_doctor_on_two_nvlinked_gpus_reads_in_chinese(monkeypatch):
    install(monkeypatch, two_h200())
    set_language("zh")
    report = collect(torch=TORCH_OK)
    text = render_text(report)
    assert english_left(text, allow=machine_data(report)) == []
    assert "NVIDIA 驱动" in text and "NVLink" in text and "个 CPU 核心" in text
    assert "同一 NUMA 节点内" in text  # the topology's legend
    assert report["checks"][0]["message"].startswith("Python ")  # the JSON keeps its English
    assert "NVLink 4 ×18" in next(c["message"] for c in report["checks"] if c["id"] == "link_0_1")


def test_a_pcie_link_without_p2p_is_explained_in_chinese_and_kept_in_english(monkeypatch):
    fake = FakePynvml([FakeGpu(uuid="a", nvlinks=[]), FakeGpu(uuid="b", nvlinks=[])], nvlink_p2p=5)
    fake.nvmlDeviceGetP2PStatus = lambda a, b, index: 5
    install(monkeypatch, fake)
    set_language("zh")
    report = collect(torch=TORCH_OK)
    text = render_text(report)
    assert english_left(text, allow=machine_data(report)) == []
    assert "P2P 已关闭" in text and "PCIe 主桥" in text
    link = next(c for c in report["checks"] if c["id"] == "link_0_1")
    assert "P2P disabled" in link["message"] and "via PCIe host bridge" in link["message"]


def test_the_doctor_without_nvml_says_why_in_chinese(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    set_language("zh")
    report = collect(torch=TORCH_OK)
    text = render_text(report)
    assert english_left(text, allow=machine_data(report)) == []
    assert "NVML 已被 MGTUTOR_NO_NVML 关闭" in text and "没有 GPU 拓扑" in text
    assert report["gpu_error"] == "NVML disabled by MGTUTOR_NO_NVML"
    assert report["topology"]["matrix"] == "(no GPU topology: NVML disabled by MGTUTOR_NO_NVML)"


def test_the_doctor_in_english_is_unchanged(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    text = render_text(collect(torch=TORCH_OK))
    assert "  NVIDIA driver - (supports CUDA -)   torch debug build no   GCC " in text
    assert "\nCPU, build tools, allocator\n" in text and "(no GPU topology: NVML disabled by MGTUTOR_NO_NVML)" in text
    assert re.search(r"\n  \d+ CPU cores \(\d+ usable\), RAM [\d.]+ GiB, /dev/shm ", text)


@pytest.mark.parametrize("script", BAD_SCRIPTS)
def test_check_on_a_bad_script_reads_in_chinese(capsys, script):
    text = cli(capsys, "--lang", "zh", "check", str(DATA / "check" / script))
    words = "\n".join(line for line in text.splitlines() if not CODE_LINE.match(line))
    assert chinese(words) and "原因：" in words
    assert english_left(words) == []


def test_check_on_a_folder_whose_findings_are_built_from_the_code(capsys):
    text = cli(capsys, "--lang", "zh", "check", str(DATA / "check" / "follow"))
    words = "\n".join(line for line in text.splitlines() if not CODE_LINE.match(line))
    assert "脚本必须有 CUDA，没有 CPU 后备：`torch.cuda.set_device` (第 14 行)" in words
    assert english_left(words) == []


@pytest.mark.parametrize("script", ["collective-in-rank-branch.bad.py", "cuda-required.bad.py",
                                    "dataloader-slow.bad.py", "world-set-by-script.bad.py"])
def test_check_json_is_the_same_in_chinese(capsys, script):
    path = str(DATA / "check" / script)
    english = cli(capsys, "check", path, "--json")
    assert cli(capsys, "--lang", "zh", "check", path, "--json") == english
    assert not chinese(english) and json.loads(english)["findings"]


def test_a_finding_message_built_from_the_script_is_english_in_english(capsys):
    path = str(DATA / "check" / "collective-in-rank-branch.bad.py")
    finding = json.loads(cli(capsys, "check", path, "--json"))["findings"][0]
    assert re.fullmatch(r"\w+\(\) runs only on the ranks that pass line \d+: the other ranks never join it, "
                        r"so the job hangs", finding["message"])


@pytest.mark.parametrize("log", LOGS)
def test_diagnose_on_a_real_log_reads_in_chinese(capsys, log):
    text = cli(capsys, "--lang", "zh", "diagnose", str(DATA / "logs" / log))
    assert chinese(text)
    assert english_left(text, allow=("证据",)) == []  # evidence lines quote the log as it is


def test_diagnose_json_is_the_same_in_chinese(capsys):
    paths = [str(DATA / "logs" / log) for log in LOGS[:4]]
    english = cli(capsys, "diagnose", *paths, "--json")
    assert cli(capsys, "--lang", "zh", "diagnose", *paths, "--json") == english
    assert not chinese(english) and "waited" in english


def test_every_catalogue_summary_and_fix_has_its_chinese():
    set_language("zh")
    untranslated = [(kind, text) for kind, spec in load_catalogue().items()
                    for text in (spec.summary, spec.fix) if text and _(text) == text]
    assert untranslated == []


@pytest.mark.parametrize("capture", CAPTURES)
def test_the_hang_report_of_a_saved_capture_reads_in_chinese(capture):
    set_language("zh")
    report = analyse_capture(DATA / "hang" / capture, world_size=2)
    text = report.text()
    assert english_left(text) == []
    assert "卡住报告" in text and ("在等" in text or "等待" in text)
    assert not chinese(json.dumps(report.to_dict()))  # what is saved with the stacks stays English
    assert not chinese(report.summary)


def test_the_hang_report_names_each_rank_s_place_in_chinese():
    set_language("zh")
    report = analyse_capture(DATA / "hang" / "slow-loader-auto", world_size=2)
    lines = report.text().splitlines()
    assert "   rank 0: 在 all_reduce 里等待，位置 `slow_loader` (hang.py:58)" in lines
    assert report.where[0].describe() == "waits in all_reduce at hang.py:58 in slow_loader"


def test_the_flight_recorder_lines_and_the_divergence_read_in_chinese(tmp_path):
    capture = tmp_path / "capture"  # rank 0 waits in synchronize; its Flight Recorder says all_reduce #3
    shutil.copytree(DATA / "hang" / "slow-loader-auto", capture)
    text = (capture / "rank0.txt").read_text().replace("    all_reduce (", "    synchronize (")
    (capture / "rank0.txt").write_text(text.replace("/torch/distributed/distributed_c10d.py", "/torch/cuda/__init__.py", 1))
    set_language("zh")
    report = analyse_capture(capture, world_size=2, flight=read_dumps(DATA / "fr_gloo"))
    said = report.text()
    assert english_left(said) == []
    assert "rank 0: 在 all_reduce #3 (调用位置 fr_dump_gloo.py:21) 里等待" in said and "第一次分歧在集合通信 #3" in said
    assert report.where[0].where.op == "all_reduce #3, called at fr_dump_gloo.py:21"  # the record
    assert report.flight[-1].startswith("first divergence at collective #3: ")


def rows(busbw: float, size: int = 1 << 30) -> list[dict]:
    return [{"bytes": size, "busbw_gbps": busbw, "wrong": 0, "dtype": "float"}]


def test_the_allreduce_verdicts_read_in_chinese_and_keep_the_link_english(monkeypatch):
    install(monkeypatch, two_h200())
    topo = read_topology()
    set_language("zh")
    for busbw in (338.0, 120.0, 40.0):  # in line with the link, below it, far below
        english, link = verdict("nccl", 2, rows(busbw), topo)
        said, same_link = verdict("nccl", 2, rows(busbw), topo, _)
        assert not chinese(english) and english.startswith("NVLink 4 ×18 (450 GB/s each way): ")
        assert link == same_link and chinese(said) and english_left(said) == [], said
    for backend, world in (("gloo", 2), ("nccl", 1)):
        said, _link = verdict(backend, world, rows(3.0, 1 << 20), topo, _)
        assert chinese(said) and english_left(said) == [], said


def test_the_batch_finder_and_the_scaling_note_read_in_chinese():
    result = SimpleNamespace(chosen_batch=560, margin_pct=10.0, measured_max=600, predicted=640,
                             per_sample_bytes=3 << 20, fixed_bytes=5 << 30, budget_bytes=70 << 30, world_size=2,
                             extra={"trials": [1, 2], "split": {"global_batch": 1024, "per_rank": 256,
                                                                "accumulation": 2, "world_size": 2}},
                             seconds=12.3, proved_steps=3, proved=True)
    assert FinderAnswer(result).summary_lines()[0] == "chosen batch      560 per rank (10 % of the GPU memory kept free)"
    set_language("zh")
    lines = FinderAnswer(result).summary_lines()
    assert lines[0] == "选定的批大小      每个 rank 560 (留出 10 % 的显存)"  # the values line up in cells
    assert english_left("\n".join(lines)) == []
    assert english_left(shared_cores_note("gloo", 4, 8)) == []


def test_the_oom_memory_lines_read_in_chinese():
    memory = {"by_kind": {"activations": 6 << 30, "parameters": 1 << 30, "optimizer state": 2 << 30},
              "top_lines": [{"bytes": 3 << 30, "file": "train.py", "line": 42, "function": "forward"}],
              "snapshot": "memory/rank0.pickle"}
    assert memory_lines(memory)[0].startswith("memory at the OOM (allocated by PyTorch): activations 6.00 GiB (67 %)")
    set_language("zh")
    lines = memory_lines(memory)
    assert lines[0].startswith("OOM 时的显存 (PyTorch 分配的)：激活值 6.00 GiB (67 %)，")
    assert english_left("\n".join(lines)) == []


@pytest.mark.integration  # two ranks on torchrun (tests/zh_runs.py)
@pytest.mark.xdist_group("zh_probe")  # the same run as test_zh_every_command_runs.py's
def test_the_rendezvous_probe_reads_in_chinese_and_its_json_stays_english(zh_probe_run, monkeypatch):
    said = zh_probe_run.proc  # `--lang zh doctor --rendezvous --nproc 2 --skip-rank 1`
    assert said.returncode == 1, said.stderr
    assert f"✗ rank 1 在 {PROBE_TIMEOUT_S} 秒内始终没有加入" in said.stdout, said.stdout
    assert "被要求不加入 (--skip-rank)" in said.stdout, said.stdout
    assert english_left(said.stdout) == []
    # the report the same probe keeps is the dict `--json` prints (tui/commands/doctor: `keep` then `json.dumps`
    # of the same report); `--json` itself, printed by a real probe: test_rendezvous.py
    report = saved_in(zh_probe_run, monkeypatch, "rendezvous")
    assert f"rank 1 never joined within {PROBE_TIMEOUT_S} s" in report["message"] and not chinese(json.dumps(report))


def test_a_probe_where_every_rank_joined_reads_in_chinese():
    """The lines a probe prints when every rank joined, in Chinese (the probe above has a rank that never comes;
    a real one where all join: test_rendezvous.py in --json, test_diagnostics_screen.py on the screen in Chinese)."""
    from mgtutor.diagnostics.doctor.rendezvous_probe import ProbeReport, format_report
    from tests.test_said_reports import JOINED
    from tests.zh_leaks import leaks

    ranks = [{"rank": rank, "status": "joined", "joined_s": 0.4 + rank / 10, "init_s": 0.2, "barrier_s": 0.01,
              "allreduce_s": 0.003, "error": None} for rank in (0, 1)]
    report = ProbeReport({"ok": True, "backend": "gloo", "world_size": 2, "timeout_s": 30.0, "ranks": ranks,
                          "missing": [], "message": JOINED.format(world=2, slowest=0.5), "advice": [],
                          "run_id": "20260101-000000-rendezvous-0000", "run_dir": "/tmp/runs/rendezvous"})
    report.say = lambda say: say(JOINED).format(world=2, slowest=0.5)
    set_language("zh")
    text = format_report(report)
    assert "rank 1  0.50 秒后加入  init 0.200 s  barrier 0.010 s  all-reduce 0.003 s" in text, text
    assert "✓ 全部 2 个 rank 都加入了" in text and leaks(text) == [], text  # as the leak test read the real one


@pytest.mark.integration  # the real doctor: torch's facts from a child process
@pytest.mark.xdist_group("doctor")
def test_mgtutor_doctor_on_this_machine_leaves_only_machine_data_in_english(doctor_runs):
    said = doctor_runs["chinese text"]
    report = json.loads(doctor_runs["english json"].stdout)  # the machine's data (its JSON in Chinese: test_i18n_cli.py)
    assert said.returncode in (0, 1), said.stderr
    assert english_left(said.stdout, allow=machine_data(report)) == []
    assert "CPU、构建工具、分配器" in said.stdout


@pytest.mark.integration  # two gloo ranks
@pytest.mark.xdist_group("zh_bench")  # the same run as test_zh_every_command_runs.py's (tests/zh_runs.py)
def test_mgtutor_bench_allreduce_prints_its_verdict_in_chinese_and_saves_it_in_english(zh_bench_run, monkeypatch):
    done = zh_bench_run.proc
    assert done.returncode == 0, done.stderr
    verdict_line = next(line for line in done.stdout.splitlines() if "gloo" in line and "TCP" in line)
    assert verdict_line.startswith("# CPU 上的 gloo：") and english_left(verdict_line) == []
    assert saved_in(zh_bench_run, monkeypatch, "allreduce")["verdict"].startswith("gloo on CPU: ")


def test_the_k8s_walkthrough_reads_in_chinese_and_the_manifest_does_not_change():
    job = K8sJob(target=["train.py", "--epochs", "3"], image="nvcr.io/nvidia/pytorch:24.12-py3", nodes=2,
                 gpus_per_node=8, api="pytorchjob", claims=[ClaimMount("ckpt", "/ckpt")])
    english = manifest_yaml(job)
    set_language("zh")
    text = walkthrough(job)
    assert text.startswith("这份清单 (manifest) 做了什么：") and "ckpt 挂载在 /ckpt" in text
    assert english_left(text) == []
    assert manifest_yaml(job) == english


@pytest.mark.integration
def test_convert_says_what_it_did_in_chinese_and_its_json_stays_english(capsys):
    script = str(DATA / "check" / "convert" / "single_gpu_shape.py")
    english = cli(capsys, "convert", script, "--json")
    said = cli(capsys, "--lang", "zh", "convert", script)
    words = "\n".join(line for line in said.splitlines() if line.startswith(("  ", script)) and not line.startswith("   "))
    assert "DataLoader 读取这个 rank 的分片" in words and english_left(words) == []
    assert cli(capsys, "--lang", "zh", "convert", script, "--json") == english and not chinese(english)


@pytest.mark.parametrize("bad", [{"nodes": 0}, {"api": "mpijob"}, {"name": "Bad_Name"}, {"shm": "lots"},
                                 {"env": {"RANK": "1"}}, {"labels": {"ok": "bad value!"}}])
def test_a_k8s_option_error_is_said_in_chinese(bad):
    set_language("zh")
    options = {"target": ["train.py"], "image": "img:1", "nodes": 2, "gpus_per_node": 8, "api": "pytorchjob", **bad}
    with pytest.raises(K8sError) as error:
        K8sJob(**options).check()
    assert chinese(str(error.value)) and english_left(str(error.value)) == [], str(error.value)


def test_the_failure_demos_are_listed_in_chinese(capsys):
    text = cli(capsys, "--lang", "zh", "demo")
    assert "一个始终不加入的 rank" in text and "启动时卡住" in text
    assert english_left(text) == []
    set_language("zh")
    assert all(chinese(_(s.what_happens)) for s in SCENARIOS.values())
