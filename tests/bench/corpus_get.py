"""Bring the held-out corpus of issue 44 into tests/data/corpus/ (the scripts are not committed).

    python tests/bench/corpus_get.py                       # from GitHub (raw.githubusercontent.com, at the pinned commits)
    python tests/bench/corpus_get.py --mirror /work/.mirror  # from local git snapshots: <mirror>/<owner>+<repo>/repo
    python tests/bench/corpus_get.py --check               # only verify the files against corpus.sha256

Reads tests/data/corpus/corpus.toml, writes each entry as <name>.py (no helpers) or <name>/ (the script and
its helper modules), applies the recorded edits (each must match exactly once) and verifies every file
against corpus.sha256. `--write-sums` (re)writes corpus.sha256 from what was fetched.
"""
from __future__ import annotations

import argparse
import hashlib
import posixpath
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"


def entries() -> list[dict]:
    return tomllib.loads((CORPUS / "corpus.toml").read_text())["script"]


def local_files(entry: dict) -> dict[str, str]:
    """{repository path: path under CORPUS} for the entry's script and helpers."""
    helpers = entry.get("helpers", [])
    if not helpers:
        return {entry["script"]: entry["name"] + ".py"}
    root, place = entry.get("root", ""), entry.get("place", {})
    out = {}
    for path in [entry["script"], *helpers]:
        rel = place.get(path) or (posixpath.relpath(path, root) if root else path)
        out[path] = f"{entry['name']}/{rel}"
    return out


def script_path(entry: dict) -> Path:
    """Where the entry's training script lies under CORPUS."""
    return CORPUS / local_files(entry)[entry["script"]]


def read_remote(entry: dict, path: str, mirror: Path | None) -> bytes:
    if mirror is not None:
        base = mirror / entry["repo"].replace("/", "+") / "repo"
        gitdir = base / ".git" if (base / ".git").is_dir() else base
        return subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{entry['commit']}:{path}"],
                              check=True, capture_output=True).stdout
    url = f"https://raw.githubusercontent.com/{entry['repo']}/{entry['commit']}/{path}"
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def apply_edits(entry: dict, remote: str, rel: str, data: bytes) -> bytes:
    """`file` names the repository file by its base name (or its path under the entry's folder)."""
    text = data.decode("utf-8")
    for edit in entry.get("edits", []):
        if edit["file"] not in (posixpath.basename(remote), rel.split("/", 1)[-1]):
            continue
        count = text.count(edit["old"])
        if count != 1:
            raise SystemExit(f"{entry['name']}: edit {edit['old']!r} matches {count} times in {rel}")
        text = text.replace(edit["old"], edit["new"])
    return text.encode("utf-8")


def sums() -> dict[str, str]:
    path = CORPUS / "corpus.sha256"
    if not path.exists():
        return {}
    return {name: digest for digest, name in (line.split(None, 1) for line in path.read_text().split("\n") if line)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, help="folder of git snapshots named <owner>+<repo>/repo")
    parser.add_argument("--check", action="store_true", help="verify the files already here; fetch nothing")
    parser.add_argument("--write-sums", action="store_true", help="write corpus.sha256 from the fetched files")
    args = parser.parse_args(argv)
    pinned, bad, written = sums(), [], {}
    for entry in entries():
        for remote, rel in local_files(entry).items():
            dest = CORPUS / rel
            if args.check:
                data = dest.read_bytes() if dest.exists() else b""
            else:
                data = apply_edits(entry, remote, rel, read_remote(entry, remote, args.mirror))
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(data)
            digest = hashlib.sha256(data).hexdigest()
            written[rel] = digest
            if not args.write_sums and pinned.get(rel) != digest:
                bad.append(rel)
    if args.write_sums:
        (CORPUS / "corpus.sha256").write_text("".join(f"{d}  {n}\n" for n, d in sorted(written.items())))
    print(f"{len(written)} files of {len(entries())} corpus entries" + (f"; {len(bad)} differ from corpus.sha256: "
                                                                        + ", ".join(bad) if bad else "; all match"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
