"""`mgtutor check` on the held-out corpus of issue 44, scored against its hand-written ground truth.

    python tests/bench/corpus_get.py            # once: bring the public scripts (not committed) into tests/data/corpus/
    python tests/bench/check_corpus.py          # the table
    python tests/bench/check_corpus.py --json   # everything, as JSON
    python tests/bench/check_corpus.py --no-fix # only the findings (skip the --fix rounds)

For each corpus script (tests/data/corpus/corpus.toml) it runs `mgtutor check --json SCRIPT` in a subprocess and
matches every finding to tests/data/corpus/truth.toml: a finding whose rule stands for the class of a listed
mistake (CLASS_RULES below), in the same file and within ±2 lines of one of its lines, is a true positive and
finds that mistake. Otherwise it is a false positive on a correct line (a `correct` entry of a class its rule
stands for), generic advice that is not scored (ADVICE_RULES), or a finding not in the truth that needs review.
Recall = mistakes found / mistakes listed; precision = true positives / (true positives + false positives on
correct lines + findings that need review).

Then, on a temporary copy of the script's file or folder, `check --fix` (and `--fix --unsafe-fixes`): does every
file still compile (py_compile), and does a second --fix change nothing?
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))
import corpus_get  # noqa: E402  (tests/bench/corpus_get.py: where each corpus file lies)

CORPUS = corpus_get.CORPUS

# The truth's classes and the `mgtutor check` rule ids that stand for them. A rule id that check does not have
# yet (marked "future") finds nothing today; it is the id a rule for that class is expected to take.
CLASS_RULES: dict[str, tuple[str, ...]] = {
    "rank_as_device": ("rank-as-device",),
    "no_local_rank": ("no-set-device", "hardcoded-cuda0", "no-local-rank"),
    "local_rank_argument": ("local-rank-argument",),
    "device_count_as_world_size": ("device-count-world-size",),
    "hardcoded_gpu_list": ("hardcoded-gpu-list", "hardcoded-cuda0"),
    "hardcoded_cuda0": ("hardcoded-cuda0",),
    "save_on_every_rank": ("unguarded-checkpoint", "save-guard-all-ranks"),
    "save_per_node": ("unguarded-checkpoint", "save-per-node"),
    "unseeded_random_split": ("unseeded-random-split",),
    "no_distributed_sampler": ("ddp-no-sampler",),
    "no_set_epoch": ("sampler-no-set-epoch",),
    "sampler_with_shuffle": ("sampler-with-shuffle",),
    "unwrapped_ddp_branch": ("no-ddp-wrap", "unwrapped-ddp-branch"),
    "no_gradient_sync": ("no-ddp-wrap",),
    "world_set_by_script": ("world-set-by-script",),
    "world_size_hardcoded": ("world-set-by-script",),
    "download_every_rank": ("download-every-rank",),
    "torch_load_no_map_location": ("torch-load-no-map-location",),
    "fixed_master_addr": ("fixed-master-addr",),
    "fixed_master_port": ("spawn-master-port",),
    "deprecated_cuda_amp": ("deprecated-cuda-amp",),
    "dataparallel": ("dataparallel",),
    "print_on_every_rank": ("unguarded-print",),
    "tracker_on_every_rank": ("unguarded-tracker",),
    "collective_in_rank_branch": ("collective-in-rank-branch",),
    "missing_destroy": ("missing-destroy",),                                 # future
    "unreduced_metric": ("unreduced-metric",),                               # future
    "cuda_no_cpu_fallback": ("cuda-required",),
    "nccl_no_fallback": ("nccl-no-fallback",),
}
# Advice that is right or wrong only by taste or by the job's size (a timeout, loader workers, .item() per
# step, find_unused_parameters): neither a true nor a false positive.
ADVICE_RULES = frozenset({"init-no-timeout", "dataloader-slow", "sync-every-step", "find-unused-parameters"})
TIERS = ("bug", "deprecated", "cpu", "minor")
HEADLINE_TIERS = ("bug", "deprecated", "cpu")   # "real multi-GPU mistakes"; minor ones are counted apart
SLACK = 2


def mgtutor_cmd() -> list[str]:
    venv = REPO / ".venv" / "bin" / "mgtutor"
    return [str(venv)] if venv.exists() else [sys.executable, "-m", "mgtutor"]


def run_check(script: Path, *extra: str) -> tuple[int, str, str]:
    proc = subprocess.run([*mgtutor_cmd(), "check", *extra, str(script)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "NO_COLOR": "1"})
    return proc.returncode, proc.stdout, proc.stderr


def entry_root(entry: dict) -> Path:
    """The folder of a folder entry, or the corpus folder for a one-file entry."""
    return CORPUS / entry["name"] if entry.get("helpers") else CORPUS


def rel_file(entry: dict, path: str) -> str:
    """A finding's file as truth.toml names it: relative to the entry's folder ("" = the script itself)."""
    p = Path(path)
    p = (Path.cwd() / p) if not p.is_absolute() else p
    script = corpus_get.script_path(entry)
    if p.resolve() == script.resolve():
        return ""
    try:
        return p.resolve().relative_to(entry_root(entry).resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def load_truth() -> dict[str, dict]:
    """truth.toml by script name; a name may come back (the review section): its lists are joined."""
    truth: dict[str, dict] = {}
    for t in tomllib.loads((CORPUS / "truth.toml").read_text())["script"]:
        merged = truth.setdefault(t["name"], {"name": t["name"]})
        for key in ("mistake", "correct", "reviewed"):
            merged.setdefault(key, []).extend(t.get(key, []))
    return truth


def score_script(entry: dict, truth: dict, findings: list[dict]) -> dict:
    script_rel = corpus_get.local_files(entry)[entry["script"]]
    script_name = script_rel.split("/", 1)[1] if entry.get("helpers") else ""
    rule_classes: dict[str, set[str]] = defaultdict(set)
    for cls, rules in CLASS_RULES.items():
        for rule in rules:
            rule_classes[rule].add(cls)

    def same_file(tfile: str, ffile: str) -> bool:
        tfile = "" if tfile in ("", script_name) else tfile
        return tfile == ffile

    def near(lines: list[int], line: int) -> bool:
        return any(abs(line - x) <= SLACK for x in lines)

    mistakes = [dict(m, found_by=[]) for m in truth.get("mistake", [])]
    corrects = truth.get("correct", [])
    reviewed = truth.get("reviewed", [])
    out: dict[str, list] = {"true": [], "false_on_correct": [], "reviewed_true": [], "reviewed_false": [],
                            "needs_review": [], "advice": []}
    for f in findings:
        ffile, line, rule = rel_file(entry, f["file"]), f["line"], f["rule"]
        item = {"rule": rule, "severity": f["severity"], "file": ffile or script_name or script_rel,
                "line": line, "caveat": bool(f.get("caveat"))}
        hits = [m for m in mistakes if m["id"] in rule_classes.get(rule, ()) and same_file(m.get("file", ""), ffile)
                and near(m["lines"], line)]
        if hits:
            for m in hits:
                m["found_by"].append(f"{rule}@{line}")
            item["classes"] = sorted({m["id"] for m in hits})
            out["true"].append(item)
            continue
        wrong = [c for c in corrects if c["like"] in rule_classes.get(rule, ()) and same_file(c.get("file", ""), ffile)
                 and near(c["lines"], line)]
        judged = [r for r in reviewed if r["rule"] == rule and same_file(r.get("file", ""), ffile) and line in r["lines"]]
        if wrong:
            item["why_correct"] = wrong[0]["why"]
            out["false_on_correct"].append(item)
        elif judged:
            item["why_review"] = judged[0]["why"]
            out["reviewed_true" if judged[0]["verdict"] == "true" else "reviewed_false"].append(item)
        elif rule in ADVICE_RULES:
            out["advice"].append(item)
        else:
            out["needs_review"].append(item)
    out["mistakes"] = [{"id": m["id"], "tier": m["tier"], "file": m.get("file", "") or script_name or script_rel,
                        "lines": m["lines"], "found": bool(m["found_by"]), "found_by": m["found_by"]}
                       for m in mistakes]
    return out


def tree_digest(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def fix_round(entry: dict, unsafe: bool) -> dict:
    """--fix on a temporary copy: did it change anything, does everything compile, is a second --fix a no-op."""
    extra = ["--fix", "--unsafe-fixes"] if unsafe else ["--fix"]
    with tempfile.TemporaryDirectory(prefix="corpus-fix-") as tmpdir:
        tmp = Path(tmpdir)
        if entry.get("helpers"):
            shutil.copytree(CORPUS / entry["name"], tmp / entry["name"])
            root = tmp / entry["name"]
        else:
            root = tmp / "one"
            root.mkdir()
            shutil.copy2(CORPUS / f"{entry['name']}.py", root)
        script = root / corpus_get.script_path(entry).relative_to(entry_root(entry) if entry.get("helpers")
                                                                  else CORPUS)
        before = tree_digest(root)
        rc1, _, err1 = run_check(script, *extra)
        after1 = tree_digest(root)
        broken = []
        for name in after1:
            if name.endswith(".py"):
                try:
                    py_compile.compile(str(root / name), doraise=True, cfile=str(tmp / "compiled.pyc"))
                except py_compile.PyCompileError as exc:
                    broken.append(f"{name}: {exc.msg.strip().splitlines()[-1]}")
        rc2, _, _ = run_check(script, *extra)
        after2 = tree_digest(root)
        return {"changed": sorted(n for n in after1 if before.get(n) != after1[n]), "exit": rc1, "exit_second": rc2,
                "compiles": not broken, "broken": broken, "second_noop": after1 == after2,
                "second_changed": sorted(n for n in after2 if after1.get(n) != after2[n]),
                "stderr": err1.strip()[-300:] if rc1 not in (0, 1) else ""}


def summarise(results: list[dict]) -> dict:
    found: Counter[str] = Counter()
    total: Counter[str] = Counter()
    by_class: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    tp = fp_correct = review = advice = rev_true = rev_false = 0
    tp_w = fp_w = review_w = 0
    for r in results:
        for m in r["mistakes"]:
            total[m["tier"]] += 1
            found[m["tier"]] += m["found"]
            by_class[m["id"]][0] += m["found"]
            by_class[m["id"]][1] += 1
        tp, fp_correct = tp + len(r["true"]), fp_correct + len(r["false_on_correct"])
        rev_true, rev_false = rev_true + len(r["reviewed_true"]), rev_false + len(r["reviewed_false"])
        review, advice = review + len(r["needs_review"]), advice + len(r["advice"])
        warn = ("error", "warning")
        tp_w += sum(f["severity"] in warn for f in r["true"] + r["reviewed_true"])
        fp_w += sum(f["severity"] in warn for f in r["false_on_correct"] + r["reviewed_false"])
        review_w += sum(f["severity"] in warn for f in r["needs_review"])

    def ratio(a: int, b: int) -> float | None:
        return round(a / b, 4) if b else None

    head_found = sum(found[t] for t in HEADLINE_TIERS)
    head_total = sum(total[t] for t in HEADLINE_TIERS)
    fixes = {mode: {"compiles": sum(r["fix"][mode]["compiles"] for r in results if "fix" in r),
                    "second_noop": sum(r["fix"][mode]["second_noop"] for r in results if "fix" in r),
                    "changed": sum(bool(r["fix"][mode]["changed"]) for r in results if "fix" in r),
                    "scripts": sum("fix" in r for r in results)}
             for mode in ("safe", "unsafe")} if any("fix" in r for r in results) else {}
    return {
        "scripts": len(results),
        "mistakes": {t: total[t] for t in TIERS},
        "found": {t: found[t] for t in TIERS},
        "recall": ratio(head_found, head_total),
        "recall_all_tiers": ratio(sum(found.values()), sum(total.values())),
        "recall_by_tier": {t: ratio(found[t], total[t]) for t in TIERS},
        "true_positives": tp, "false_on_correct": fp_correct, "reviewed_true": rev_true, "reviewed_false": rev_false,
        "needs_review": review, "advice_not_scored": advice,
        # true = matched to the truth or judged true in review; false = on a correct line, judged false, or not
        # reviewed yet (counted as false until someone reads it)
        "precision": ratio(tp + rev_true, tp + rev_true + fp_correct + rev_false + review),
        "precision_truth_only": ratio(tp, tp + fp_correct + rev_true + rev_false + review),
        "precision_warning_and_up": ratio(tp_w, tp_w + fp_w + review_w),
        "by_class": {c: {"found": v[0], "listed": v[1]} for c, v in sorted(by_class.items())},
        "missed_classes": sorted(c for c, v in by_class.items() if v[0] == 0),
        "fix": fixes,
    }


def table(results: list[dict], summary: dict, fixes: bool) -> str:
    head = f"{'script':22} {'kind':6} {'found':>7} {'TP':>3} {'FPc':>3} {'R+':>3} {'R-':>3} {'new':>3} {'adv':>3}"
    if fixes:
        head += "  fix: compiles/2nd no-op (safe | unsafe)"
    lines = [head, "-" * len(head)]
    for r in results:
        head_m = [m for m in r["mistakes"] if m["tier"] in HEADLINE_TIERS]
        row = (f"{r['name']:22} {r['kind']:6} {sum(m['found'] for m in head_m):>3}/{len(head_m):<3} "
               f"{len(r['true']):>3} {len(r['false_on_correct']):>3} {len(r['reviewed_true']):>3} "
               f"{len(r['reviewed_false']):>3} {len(r['needs_review']):>3} {len(r['advice']):>3}")
        if fixes:
            f = r["fix"]
            row += f"  {fix_cell(f['safe'])} | {fix_cell(f['unsafe'])}"
        lines.append(row)
    s = summary
    lines += ["", "found = real mistakes found / listed (tiers bug, deprecated, cpu); TP = findings that match a "
              "listed mistake; FPc = findings on lines listed as correct; R+ / R- = findings outside the truth judged "
              "true / false in review; new = findings outside the truth not reviewed yet; adv = generic advice, "
              "not scored", "",
              f"recall (bug+deprecated+cpu): {s['found_head']}/{s['total_head']} = {pct(s['recall'])}   "
              f"all tiers incl. minor: {pct(s['recall_all_tiers'])}",
              "  by tier: " + ", ".join(f"{t} {s['found'][t]}/{s['mistakes'][t]}" for t in TIERS),
              f"precision: {s['true_positives'] + s['reviewed_true']}/"
              f"{s['true_positives'] + s['reviewed_true'] + s['false_on_correct'] + s['reviewed_false'] + s['needs_review']}"
              f" = {pct(s['precision'])} (true: {s['true_positives']} matched + {s['reviewed_true']} judged in review; "
              f"false: {s['false_on_correct']} on a correct line + {s['reviewed_false']} judged in review + "
              f"{s['needs_review']} not reviewed; advice not scored {s['advice_not_scored']}); warning and up: "
              f"{pct(s['precision_warning_and_up'])}; matched to the truth alone: {pct(s['precision_truth_only'])}",
              "by class (found/listed): " + ", ".join(f"{c} {v['found']}/{v['listed']}" for c, v in s["by_class"].items()),
              "missed entirely: " + (", ".join(s["missed_classes"]) or "none")]
    if fixes:
        for mode in ("safe", "unsafe"):
            x = s["fix"][mode]
            lines.append(f"--fix ({mode}): changed {x['changed']}/{x['scripts']}, compiles {x['compiles']}/{x['scripts']}, "
                         f"second --fix no-op {x['second_noop']}/{x['scripts']}")
    wrong = [(r["name"], f) for r in results for f in r["false_on_correct"] + r["reviewed_false"]]
    review = [(r["name"], f) for r in results for f in r["needs_review"]]
    if wrong:
        lines += ["", "false positives (on a line listed as correct, or judged false in review):"]
        lines += [f"  {n}: {f['rule']} ({f['severity']}) {f['file']}:{f['line']} — "
                  f"{f.get('why_correct') or 'review: ' + f['why_review']}" for n, f in wrong]
    if review:
        lines += ["", "findings outside the truth, not reviewed yet (counted as false):"]
        lines += [f"  {n}: {f['rule']} ({f['severity']}) {f['file']}:{f['line']}" for n, f in review]
    return "\n".join(lines)


def fix_cell(x: dict) -> str:
    return (("ok" if x["compiles"] else "BROKEN") + "/" + ("ok" if x["second_noop"] else "CHANGES")
            + (" (no change)" if not x["changed"] else ""))


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true", help="print the full results as JSON")
    parser.add_argument("--no-fix", action="store_true", help="skip the --fix rounds")
    parser.add_argument("--only", nargs="*", default=None, help="corpus entries to run (default: all)")
    args = parser.parse_args(argv)
    entries = [e for e in corpus_get.entries() if not args.only or e["name"] in args.only]
    missing = [e["name"] for e in entries if not corpus_get.script_path(e).exists()]
    if missing:
        print(f"corpus files missing ({', '.join(missing)}): run python tests/bench/corpus_get.py first",
              file=sys.stderr)
        return 2
    truth = load_truth()
    results, started = [], time.monotonic()
    for entry in entries:
        rc, out, err = run_check(corpus_get.script_path(entry), "--json")
        if rc not in (0, 1):
            raise SystemExit(f"{entry['name']}: check exited {rc}: {err.strip()[-500:]}")
        findings = json.loads(out)["findings"]
        result = {"name": entry["name"], "kind": entry["kind"], "check_exit": rc, "findings": len(findings),
                  **score_script(entry, truth.get(entry["name"], {}), findings)}
        if not args.no_fix:
            result["fix"] = {"safe": fix_round(entry, unsafe=False), "unsafe": fix_round(entry, unsafe=True)}
        results.append(result)
    summary = summarise(results)
    summary["found_head"] = sum(summary["found"][t] for t in HEADLINE_TIERS)
    summary["total_head"] = sum(summary["mistakes"][t] for t in HEADLINE_TIERS)
    summary["seconds"] = round(time.monotonic() - started, 1)
    if args.json:
        print(json.dumps({"summary": summary, "scripts": results}, indent=2))
    else:
        print(table(results, summary, not args.no_fix))
        print(f"\n{len(results)} scripts in {summary['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
