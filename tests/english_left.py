"""What is still English in text meant to be Chinese: the test helper behind "no English left but code,
commands and names" (issue 28). It drops what stays as it is — `code`, commands (`mgtutor …`,
`torchrun …`, `python …`), flags, paths, identifiers, numbers with units, ALL-CAPS names, quoted
text ("bus error", 「名字」), the glossary's English in parentheses after its term (全归约 (all-reduce)) — and reports
each line that still holds two or more English words in a row, at least one of them a lowercase word
of three letters or more (a sentence, not a name like "NVIDIA H200" or "GPU 0").

    assert not english_left(text), english_left(text)
"""
from __future__ import annotations

import re

# Words that stay English in Chinese text: names of programs, libraries, units and terms the glossary keeps.
KEPT = frozenset("""
torch pytorch torchrun torchvision gloo nccl cuda cudnn python pip mgtutor nvml nvidia py spy py-spy textual accelerate
lightning fsdp ddp rank ranks gpu gpus cpu cpus ssh slurm sbatch srun kubernetes kubectl pod pods jupyter
all-reduce allreduce all_reduce barrier broadcast inductor compile eager bf16 fp16 fp32 amp autocast
mib gib gb mb kb tb ms us ns s min h hz img imgs images/s samples/s it/s
resnet resnet18 resnet50 vit convnext tiny bench maxbatch doctor diagnose check convert run runs train demo report serve
lessons lesson attach stop stacks show list k8s yaml json html markdown md zh en
localhost hostname docker conda venv uv
world
""".split())
CODE = re.compile(r"`[^`]*`|「[^」]*(?:」|$)|^[^「\n]*」|\"[^\"\n]*\"|\[[a-z]+ \d+\]")  # code, quotes, [rank 0]
# The glossary's English kept in parentheses after the Chinese term: 全归约 (all-reduce), 混合精度 (mixed precision)
GLOSSED = re.compile(r"(?<=[\u4e00-\u9fff])\s?[(（][A-Za-z][\w-]*(?: [A-Za-z][\w-]*){0,2}[)）]")
COMMAND = re.compile(r"(?:^|(?<=\s))(?:\$ )?(?:mgtutor|torchrun|python3?|pip|kubectl|sbatch|srun|export|"
                     r"NCCL_\w+=\S*|[A-Z_]{2,}=\S+)\b[^，。；：\n]*")
TOKEN = re.compile(r"(?:[A-Za-z][\w-]*\d[\w-]*|--?[\w-]+(?:[=:]\S+)?|\S*[/\\]\S*|\S+\.\w+\S*|\w*_\w*|\w+\(\)|"
                   r"[\w.-]+@\S+|\d[\w.,:%×x/+-]*|[A-Z][A-Z0-9]+s?\b)")  # eth0 and resnet18 are names
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def stripped(line: str) -> str:
    """The line without code, commands, flags, paths, identifiers, numbers and capitalised names."""
    line = GLOSSED.sub(" ", CODE.sub(" ", line))
    line = COMMAND.sub(" ", line)
    return TOKEN.sub(" ", line)


def english_words(line: str) -> list[str]:
    """Runs of English words (two or more in a row, one at least a lowercase word of ≥ 3 letters)."""
    runs, current = [], []
    for piece in re.split(r"(\s+)", stripped(line)):
        if not piece or piece.isspace():
            continue
        word = piece.strip(".,;:!?()[]{}\"'")
        if WORD.fullmatch(word) and word.lower() not in KEPT:
            current.append(word)
            continue
        runs.append(current)
        current = []
    runs.append(current)
    return [" ".join(run) for run in runs
            if len(run) >= 2 and any(w.islower() and len(w) >= 3 for w in run)]


def english_left(text: str, allow: tuple[str, ...] = ()) -> list[str]:
    """Each line of `text` that still reads as English, minus lines holding one of `allow` (machine
    data echoed as it is: an OS name, a GPU's name)."""
    return [line for line in text.splitlines()
            if english_words(line) and not any(a in line for a in allow)]
