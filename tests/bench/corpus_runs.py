"""Do the corpus scripts that `mgtutor check --fix` and `mgtutor convert` rewrote actually train on 2 gloo ranks?

    python tests/bench/corpus_get.py       # once: the public scripts (not committed) into tests/data/corpus/
    python tests/bench/corpus_runs.py      # the table; --json for everything; --only NAME … for some

`convert` (the single-GPU scripts): each is converted to a new file and started with torchrun on 2 CPU ranks
(gloo, CUDA_VISIBLE_DEVICES empty). It trains when the job exits 0; shards when the two ranks' DistributedSamplers
hand out disjoint halves of the training set (a script with no sampler: when the two ranks' DDP model trained on
as many batches and none the same); prints once when only rank 0 printed; saves once when only rank
0 called torch.save or save_image ("-": no rank printed in this short run). Its output's own `check` must have no
error.

`check --fix` (the multi-GPU scripts): each is fixed (safe fixes) on a copy and started the way it is meant to be
(torchrun for a torchrun script, `python` for one that spawns its own processes, asked for 2) on the CPU. It
trains on 2 ranks when the job exits 0 and two processes joined a group of 2.

What each rank did is recorded by tests/bench/shard_probe/sitecustomize.py (on PYTHONPATH). No data set is
downloaded: MNIST-shaped files of random bytes stand in (tests/bench/fake_data.py), and a script that needs a
package this environment lacks, or hours of CPU, is listed with the reason instead of being run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import corpus_get  # noqa: E402
import fake_data  # noqa: E402
from mgtutor.training.runs.net.ports import free_port

PROBE = HERE / "shard_probe"
TIMEOUT = 900


@dataclass
class Run:
    args: list[str] = field(default_factory=list)
    data: tuple[str, ...] = ()          # fake data sets to lay out: "MNIST", "FashionMNIST", "wikitext", "shakespeare"
    launcher: str = "torchrun"          # or "python": the script starts its own 2 processes
    skip: str = ""                      # why it is not run here
    folders: tuple[str, ...] = ()       # output folders the script expects to find (its repository has them)


# the single-GPU scripts, converted by `mgtutor convert`
CONVERT: dict[str, Run] = {
    "mnist_accel": Run(["--epochs", "1", "--save-model"], ("MNIST",)),
    "dcgan_flat": Run(["--dataset", "fake", "--niter", "1", "--workers", "0", "--batchSize", "32", "--ngf", "16",
                       "--ndf", "16"]),
    "vae_kwargs": Run(["--epochs", "1"], ("MNIST",), folders=("results",)),
    "word_lm": Run(["--epochs", "1", "--emsize", "16", "--nhid", "16", "--bptt", "10", "--batch_size", "4"],
                   ("wikitext",)),
    "yunjey_cnn_flat": Run([], ("MNIST",)),
    "siamese_accel": Run(["--epochs", "1", "--save-model"], ("MNIST",)),
    "yunjey_gan_flat": Run([], ("MNIST",)),
    "simclr": Run(skip="its helper imports torch.utils.tensorboard (needs the tensorboard package)"),
}
# the multi-GPU scripts, fixed by `mgtutor check --fix`
FIXED: dict[str, Run] = {
    "ddp_series_multigpu": Run(["1", "1", "--batch_size", "32"], launcher="python"),
    "ddp_series_multinode": Run(["1", "1", "--batch_size", "32"]),
    "ddp_example": Run([]),
    "yangkky_spawn": Run(skip="imports apex (NVIDIA's extension, not installed), though it uses torch's DDP"),
    "hongxin_mp": Run(["--ngpus_per_node", "2"], ("FashionMNIST",), launcher="python"),
    "seba_dist_tuto": Run([], ("MNIST",), launcher="python"),
    "nanogpt": Run(["--dataset=shakespeare", "--device=cpu", "--compile=False", "--dtype=float32", "--backend=gloo",
                    "--n_layer=2", "--n_head=2", "--n_embd=32", "--block_size=32", "--batch_size=4",
                    "--gradient_accumulation_steps=2", "--max_iters=4", "--eval_interval=2", "--eval_iters=2",
                    "--log_interval=1"], ("shakespeare",)),
    "imagenet": Run(skip="one epoch of --dummy data is 1.28 million images, hours on a CPU"),
    "tczhangzhi_launch": Run(skip="an ImageNet folder and a ResNet at 224x224: hours on a CPU"),
    "jiazhuang_ddp": Run(skip="imports torch.utils.tensorboard (needs the tensorboard package)"),
    "mingpt_ddp": Run(skip="needs hydra"),
    "build_nanogpt": Run(skip="needs tiktoken and the FineWeb shards"),
    "dit": Run(skip="needs timm and diffusers"),
    "guided_diffusion": Run(skip="needs mpi4py and blobfile"),
    "swin": Run(skip="needs timm"),
    "stylegan2": Run(skip="compiles CUDA extensions (op/)"),
    "accelerate_cv": Run(skip="needs timm and the Oxford pets images"),
    "accelerate_nlp": Run(skip="needs transformers, datasets and evaluate"),
}


def mgtutor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    venv = REPO / ".venv" / "bin" / "mgtutor"
    argv = [str(venv)] if venv.exists() else [sys.executable, "-m", "mgtutor"]
    return subprocess.run([*argv, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"})


def copy_entry(entry: dict, into: Path) -> Path:
    """The entry's script (and its helper modules) under `into`/work; returns the script's path."""
    work = into / "a" / "work"  # ../../data stays inside `into`
    if entry.get("helpers"):
        shutil.copytree(corpus_get.CORPUS / entry["name"], work)
        return work / corpus_get.script_path(entry).relative_to(corpus_get.CORPUS / entry["name"])
    work.mkdir(parents=True)
    return Path(shutil.copy2(corpus_get.script_path(entry), work))


def launch(script: Path, run: Run, probe: Path, launcher: list[str] | None = None
           ) -> subprocess.CompletedProcess[str]:
    """The script on 2 CPU ranks with the probe on their PYTHONPATH: through torchrun, through `launcher` (a
    python program that takes torchrun's arguments, e.g. the tests' stand-in), or started by the script itself."""
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(PROBE), "SHARD_PROBE_DIR": str(probe),
           "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    if launcher:
        # -I keeps the probe out of the launcher itself: with SHARD_PROBE_DIR set it imports torch in every
        # process it is loaded in, and the launcher's ranks, started without -I, load it.
        argv = [launcher[0], "-I", *launcher[1:], "--nproc-per-node", "2", "--rdzv-endpoint",
                f"127.0.0.1:{free_port()}", script.name, *run.args]
    elif run.launcher == "torchrun":
        argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
                str(free_port()), script.name, *run.args]
    else:
        argv = [sys.executable, script.name, *run.args]
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, cwd=script.parent, env=env,
                              start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(argv, 124, str(exc.stdout or ""), f"timed out after {TIMEOUT} s")


def ranks(probe: Path) -> list[dict]:
    """The records of the processes that joined a process group, by rank."""
    records = [json.loads(p.read_text()) for p in probe.glob("proc*.json")]
    return sorted((r for r in records if r["rank"] is not None), key=lambda r: r["rank"])


def shards(joined: list[dict]) -> bool:
    """Each of the two ranks read its own half of the training set (the largest sampled); with no sampler, the
    two ranks trained on as many batches, none of them the same (the digests of the DDP model's inputs)."""
    if len(joined) != 2:
        return False
    if not all(r["samplers"] for r in joined):
        seen = [r.get("inputs", []) for r in joined]
        return bool(seen[0]) and len(seen[0]) == len(seen[1]) and not set(seen[0]) & set(seen[1])
    size = max(s["size"] for r in joined for s in r["samplers"])
    halves = [set(next(s["indices"] for s in r["samplers"] if s["size"] == size)) for r in joined]
    return not halves[0] & halves[1] and halves[0] | halves[1] == set(range(size))


def prepare(entry: dict, run: Run, tmp: Path) -> Path:
    script = copy_entry(entry, tmp)
    fake_data.lay_out(run.data, script.parent)
    for folder in run.folders:
        (script.parent / folder).mkdir()
    return script


def prints_once(joined: list[dict]) -> bool | None:
    """Rank 0 printed and rank 1 did not; None when neither printed (this short run reaches no print)."""
    if len(joined) != 2:
        return False
    return None if joined[0]["prints"] == joined[1]["prints"] == 0 else joined[0]["prints"] > 0 == joined[1]["prints"]


def run_convert(entry: dict, run: Run, tmp: Path) -> dict:
    script = prepare(entry, run, tmp)
    converted = script.with_name("ddp_" + script.name)
    made = mgtutor("convert", str(script), "-o", str(converted), cwd=script.parent)
    if made.returncode not in (0, 1):
        return {"converted": False, "error": made.stderr.strip()[-300:]}
    check = json.loads(mgtutor("check", "--json", str(converted), cwd=script.parent).stdout)
    errors = [f"{f['rule']}@{f['line']}" for f in check["findings"] if f["severity"] == "error"]
    probe = tmp / "probe"
    probe.mkdir()
    job = launch(converted, run, probe)
    joined = ranks(probe)
    return {"converted": True, "check_errors": errors, "exit": job.returncode, "ranks": len(joined),
            "trains": job.returncode == 0 and len(joined) == 2, "shards": shards(joined),
            "prints_once": prints_once(joined),
            "saves_once": len(joined) == 2 and not joined[1]["saves"],
            "saved_by_rank0": joined[0]["saves"] if joined else [], "tail": (job.stdout + job.stderr)[-600:]}


def run_fixed(entry: dict, run: Run, tmp: Path) -> dict:
    script = prepare(entry, run, tmp)
    fixed = mgtutor("check", "--fix", str(script), cwd=script.parent)
    if fixed.returncode not in (0, 1):
        return {"fixed": False, "error": fixed.stderr.strip()[-300:]}
    probe = tmp / "probe"
    probe.mkdir()
    job = launch(script, run, probe)
    joined = ranks(probe)
    return {"fixed": True, "fix_exit": fixed.returncode, "exit": job.returncode, "ranks": len(joined),
            "trains": job.returncode == 0 and len(joined) == 2 and all(r["world_size"] == 2 for r in joined),
            "tail": (job.stdout + job.stderr)[-600:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the full results as JSON")
    parser.add_argument("--only", nargs="*", default=None, help="corpus entries to run (default: all)")
    args = parser.parse_args(argv)
    entries = {e["name"]: e for e in corpus_get.entries()}
    results: dict[str, dict] = {"convert": {}, "fix": {}}
    started = time.monotonic()
    for kind, specs, runner in (("convert", CONVERT, run_convert), ("fix", FIXED, run_fixed)):
        for name, run in specs.items():
            if args.only and name not in args.only:
                continue
            if run.skip:
                results[kind][name] = {"skipped": run.skip}
                continue
            with tempfile.TemporaryDirectory(prefix=f"corpus-{kind}-") as tmp:
                results[kind][name] = runner(entries[name], run, Path(tmp))
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(table(results))
        print(f"\nin {time.monotonic() - started:.0f} s")
    return 0


def table(results: dict) -> str:
    lines = ["convert (single-GPU scripts, 2 gloo ranks):",
             f"  {'script':20} {'check':8} {'trains':7} {'shards':7} {'prints':7} {'saves':6}"]
    for name, r in results["convert"].items():
        if "skipped" in r or not r.get("converted"):
            lines.append(f"  {name:20} not run: {r.get('skipped') or r.get('error')}")
            continue
        lines.append(f"  {name:20} {'ok' if not r['check_errors'] else ','.join(r['check_errors']):8} "
                     + " ".join(f"{'-' if r[k] is None else 'yes' if r[k] else 'NO':7}"
                                for k in ("trains", "shards", "prints_once", "saves_once")))
    good = [n for n, r in results["convert"].items() if r.get("trains") and r.get("shards")
            and r.get("prints_once") is not False and r.get("saves_once") and not r.get("check_errors")]
    lines.append(f"  converted and train as asked: {len(good)} of {len(results['convert'])}")
    lines += ["", "check --fix (multi-GPU scripts, 2 gloo ranks on a CPU):"]
    for name, r in results["fix"].items():
        state = r.get("skipped") and f"not run: {r['skipped']}" or \
            (f"trains on 2 ranks (fix exit {r['fix_exit']})" if r.get("trains")
             else f"does not: exit {r.get('exit')}, {r.get('ranks')} rank(s) joined")
        lines.append(f"  {name:22} {state}")
    ran = [r for r in results["fix"].values() if "skipped" not in r]
    lines.append(f"  train on 2 ranks: {sum(bool(r.get('trains')) for r in ran)} of {len(ran)} run "
                 f"({len(results['fix']) - len(ran)} not run here)")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
