"""Precision and recall of the refusal rules (processors/memory/refusal.py) on a labelled set, and
what they would refuse of LoCoMo's development conversations.

    python -m bench.refusal_eval [--data bench/data/refusal_eval.jsonl] [--examples 12]

The labelled set (bench/data/README.md) says of each text whether a memory writer should keep
or refuse it, and why. Each text is redacted as intake redacts it, then judged. "Refuse" is
the positive class: precision is the share of refusals that were meant (a false refusal loses
a memory), recall the share of meant refusals made. Per reason, a refusal counts as right only
with the reason expected.

The dialog turns of bench/data/locomo-dev.json are judged as bench/retrieval_eval.py writes
them; a turn that some question names as its evidence must never be refused.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from bench.retrieval_eval import DATA_FILE as LOCOMO_DEV
from bench.retrieval_eval import memory_text
from memstream_client.redaction import redact_secrets
from processors.memory.refusal import RefusalReason, refusal_of

DATA = Path(__file__).resolve().parent / "data" / "refusal_eval.jsonl"


@dataclass(frozen=True)
class Labelled:
    text: str
    refuse: bool
    reason: RefusalReason | None
    note: str


@dataclass(frozen=True)
class Score:
    true_positives: int
    refused: int
    meant: int

    @property
    def precision(self) -> float:
        return self.true_positives / self.refused if self.refused else 1.0

    @property
    def recall(self) -> float:
        return self.true_positives / self.meant if self.meant else 1.0


@dataclass(frozen=True)
class LocomoCheck:
    turns: int
    refused: list[tuple[str, RefusalReason]]
    evidence_turns: int
    evidence_refused: list[str]


def load(path: Path = DATA) -> list[Labelled]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [Labelled(row["text"], row["label"] == "refuse", row["reason"], row["note"])
            for row in rows]


def judged(text: str) -> RefusalReason | None:
    """The rules' answer for a memory.write of `text`, redacted as intake redacts it."""
    return refusal_of(redact_secrets(text).text, None)


def score(cases: Sequence[Labelled], answers: Sequence[RefusalReason | None],
          reason: RefusalReason | None = None) -> Score:
    """Overall (reason None): refused or not. Per reason: refused with that reason."""
    def refused(answer: RefusalReason | None) -> bool:
        return answer is not None and (reason is None or answer == reason)

    def meant(case: Labelled) -> bool:
        return case.refuse and (reason is None or case.reason == reason)

    pairs = list(zip(cases, answers, strict=True))
    return Score(sum(meant(case) and refused(answer) for case, answer in pairs),
                 sum(refused(answer) for _, answer in pairs),
                 sum(meant(case) for case, _ in pairs))


def locomo_check(path: Path = LOCOMO_DEV) -> LocomoCheck:
    """Every dialog turn judged as the retrieval benchmark writes it; the evidence of every
    question (of all five categories) must be kept."""
    evidence: set[tuple[str, str]] = set()
    refused: list[tuple[str, RefusalReason]] = []
    turns = 0
    refused_ids: set[tuple[str, str]] = set()
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for question in sample["qa"]:
            evidence.update((sample["sample_id"], part)
                            for entry in question.get("evidence", ())
                            for part in re.split(r"\s*;\s*", entry) if part)
        for turn in _turns(sample["conversation"]):
            turns += 1
            text = memory_text(turn)
            reason = judged(text)
            if reason is not None:
                refused.append((text, reason))
                refused_ids.add((sample["sample_id"], turn["dia_id"]))
    return LocomoCheck(turns, refused, len(evidence),
                       sorted(f"{sample}/{dia_id}" for sample, dia_id in evidence & refused_ids))


def _turns(conversation: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for key, value in conversation.items():
        if re.fullmatch(r"session_\d+", key):
            yield from value


def refusal_rows(cases: Sequence[Labelled] | None = None) -> list[tuple[str, str, str]]:
    """The rows of `make bench`'s table."""
    cases = load() if cases is None else cases
    answers = [judged(case.text) for case in cases]
    overall = score(cases, answers)
    locomo = locomo_check()
    return [
        (f"refusal precision ({len(cases)} labelled texts)", f"{overall.precision:.3f}",
         ">= 0.99"),
        ("refusal recall (same set)", f"{overall.recall:.3f}", ""),
        (f"LoCoMo dev turns refused (of {locomo.turns})", str(len(locomo.refused)), ""),
        ("LoCoMo dev evidence turns refused", str(len(locomo.evidence_refused)), "0"),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.refusal_eval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--examples", type=int, default=12,
                        help="LoCoMo turns and mistakes to show")
    args = parser.parse_args(argv)

    cases = load(args.data)
    answers = [judged(case.text) for case in cases]
    kept = sum(not case.refuse for case in cases)
    print(f"labelled texts {len(cases)}: keep {kept}, refuse {len(cases) - kept}")
    print(f"{'refuse':<18} {'precision':>9} {'recall':>7} {'refused':>8} {'meant':>6}")
    for reason in (None, *get_args(RefusalReason)):
        result = score(cases, answers, reason)
        print(f"{reason or 'overall':<18} {result.precision:>9.3f} {result.recall:>7.3f} "
              f"{result.refused:>8} {result.meant:>6}")
    mistakes = [(case, answer) for case, answer in zip(cases, answers, strict=True)
                if (answer is not None) != case.refuse or (case.refuse and answer != case.reason)]
    print(f"\nmistakes {len(mistakes)}:")
    for case, answer in mistakes[: args.examples]:
        print(f"  {case.text!r}: expected {case.reason or 'keep'}, got {answer or 'keep'}"
              f" ({case.note})")

    locomo = locomo_check()
    print(f"\nLoCoMo dev: {len(locomo.refused)} of {locomo.turns} turns refused; "
          f"evidence turns refused: {len(locomo.evidence_refused)} of {locomo.evidence_turns}")
    for text, reason in locomo.refused[: args.examples]:
        print(f"  {reason:<16} {text!r}")
    for turn in locomo.evidence_refused:
        print(f"  EVIDENCE REFUSED: {turn}")
    return 1 if locomo.evidence_refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
