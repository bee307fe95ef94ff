"""Grouping accuracy of error signatures on logs with ground-truth templates (a dev tool).

    python -m bench.signature_grouping /work/corpora/loghub [--show-errors N]
    python -m bench.signature_grouping HDFS.tsv Spark.tsv
    python -m bench.signature_grouping /work/corpora/loghub --templates DIR
    PYTHONPATH=DIR python -m bench.signature_grouping /work/corpora/loghub --drain3

Each file has lines "EventId<TAB>message" (the Loghub 2k samples of logpai/loghub, converted;
see /work/corpora/README.md); a directory means every "*.tsv" in it but the "*_templates.tsv".
Grouping accuracy (GA, Zhu et al., "Tools and Benchmarks for Automated Log Parsing", 2019):
a message counts as right only when the set of messages sharing its signature id is exactly
the set sharing its true EventId. The corpora are not in git and CI does not run this.

``--templates DIR`` relabels every message with the template of DIR/<System>.csv that matches
it (the most specific one, "EventId,EventTemplate" as in the corrected Loghub 2k templates of
logpai/logparser, data/loghub_2k_corrected, Khan et al. 2022), to score against that second
ground truth, whose conventions Loghub-2.0 follows. ``--drain3`` adds drain3 (its default
configuration, online, in file order) as a baseline; it is not a dependency of memstream:
``pip install --target DIR drain3``.

Results on the samples (16 systems, 5,647 messages; one configuration for all):

    system       Loghub GA  corrected GA  drain3 (Loghub)
    Android        0.938       0.982         0.699
    Apache         1.000       1.000         1.000
    BGL            0.988       0.988         1.000
    HDFS           1.000       1.000         0.993
    HPC            0.996       0.996         0.853
    Hadoop         0.992       0.992         0.921
    HealthApp      1.000       1.000         0.612
    Linux          0.886       1.000         0.881
    Mac            0.992       0.992         0.739
    OpenSSH        1.000       1.000         1.000
    OpenStack      1.000       1.000         0.333
    Proxifier      1.000       1.000         0.514
    Spark          0.983       0.983         0.905
    Thunderbird    0.932       0.932         0.938
    Windows        1.000       1.000         0.849
    Zookeeper      0.994       0.994         1.000
    mean           0.981       0.991         0.827

What each rule of processors/runs/masking.py buys: mean GA without it, minus mean GA with all
(Loghub / corrected). The two ground truths disagree only on word values: Loghub keeps
"user=root" and "ret:false" apart from "user=guest" and "ret:true", the corrected one (and
Loghub-2.0) does not; the masking follows the latter.

    digits -0.512 / -0.512      run -0.104 / -0.104        host:port, IPv6, MAC -0.063
    unit -0.036                 path -0.032                timestamp -0.032
    dotted name -0.015          user name -0.008           quoted -0.001
    key=value +0.006 / -0.009   boolean +0.003 / -0.003
    url, email, ip address, hex: 0 here (digits and path mask most of what they do)

Device names (eth0, en0: kept) buy +0.0015 (Mac; HPC's interfaces have templates of their
own in both ground truths too). Tried and left out: keeping the word prefix of an id
("attempt_<*>", as Loghub writes it): -0.030 on 9 systems (Spark and Windows split); quoted
phrases as one variable: -0.031 (OpenStack's "GET ..." and "POST ..." merge); dotted names
of two parts ("chrome.exe"): 0.000; one alternation for all multi-part rules: the same
templates, 1.7x slower.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from processors.runs.signatures import signature_of


def grouping_accuracy(truth: Sequence[str], predicted: Sequence[str]) -> float:
    """The share of messages whose predicted group is exactly their true group."""
    true_sizes = Counter(truth)
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(predicted):
        members[group].append(index)
    correct = 0
    for indexes in members.values():
        true_ids = {truth[i] for i in indexes}
        if len(true_ids) == 1 and true_sizes[true_ids.pop()] == len(indexes):
            correct += len(indexes)
    return correct / len(truth) if truth else 1.0


def read_corpus(path: Path) -> tuple[list[str], list[str]]:
    """(true event ids, messages) of one "EventId<TAB>message" file."""
    truth: list[str] = []
    messages: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        event_id, _, message = line.partition("\t")
        truth.append(event_id)
        messages.append(message)
    return truth, messages


def relabel(messages: Sequence[str], templates_csv: Path) -> list[str]:
    """The event id of each message by another ground truth: the matching template with the
    most constant text (a message that matches none keeps a group of its own)."""
    with templates_csv.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    patterns = [
        (len(template.replace("<*>", "")), event_id, re.compile(
            "^" + "(.*?)".join(re.escape(part) for part in " ".join(template.split()).split("<*>"))
            + "$"))
        for event_id, template in rows
    ]
    labels = []
    for index, message in enumerate(messages):
        text = " ".join(message.split())
        matches = [(size, event_id) for size, event_id, pattern in patterns if pattern.match(text)]
        labels.append(max(matches)[1] if matches else f"unmatched-{index}")
    return labels


def corpus_files(paths: Sequence[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.glob("*.tsv") if not p.name.endswith("_templates.tsv"))
        else:
            files.append(path)
    return files


def signature_groups(messages: Sequence[str]) -> list[str]:
    return [signature_of(message).signature_id for message in messages]


def drain3_groups(messages: Sequence[str]) -> list[str]:
    """The baseline: drain3's online clusters with its default configuration, in file order."""
    from drain3 import TemplateMiner  # installed ad hoc, not a dependency of memstream

    miner = TemplateMiner()
    return [str(miner.add_log_message(message)["cluster_id"]) for message in messages]


Grouper = Callable[[Sequence[str]], list[str]]


def run_grouping(files: Sequence[Path], grouper: Grouper = signature_groups,
                 templates: Path | None = None) -> list[tuple[str, int, float]]:
    """(corpus name, messages, GA) per file."""
    rows = []
    for path in files:
        truth, messages = read_corpus(path)
        if templates is not None:
            truth = relabel(messages, templates / f"{path.stem}.csv")
        rows.append((path.stem, len(messages), grouping_accuracy(truth, grouper(messages))))
    return rows


def grouping_errors(path: Path, limit: int, templates: Path | None = None) -> list[str]:
    """The wrongly grouped true templates of one file, biggest first, as printable lines."""
    truth, messages = read_corpus(path)
    if templates is not None:
        truth = relabel(messages, templates / f"{path.stem}.csv")
    found_by_truth: dict[str, Counter[str]] = defaultdict(Counter)
    truths_by_template: dict[str, Counter[str]] = defaultdict(Counter)
    for event_id, message in zip(truth, messages, strict=True):
        template = signature_of(message).template
        found_by_truth[event_id][template] += 1
        truths_by_template[template][event_id] += 1
    lines = []
    for event_id, found in sorted(found_by_truth.items(), key=lambda item: -item[1].total()):
        split = len(found) > 1
        if split or any(len(truths_by_template[template]) > 1 for template in found):
            lines.append(f"  {event_id} ({found.total()}) {'split' if split else 'merged'}:")
            for template, count in found.most_common(4):
                others = sorted(set(truths_by_template[template]) - {event_id})[:4]
                also = f"  + {others}" if others else ""
                lines.append(f"      {count:4} {template[:150]}{also}")
        if len(lines) >= limit:
            break
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.signature_grouping",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--show-errors", type=int, default=0, metavar="LINES",
                        help="print up to LINES lines of wrongly grouped templates per file")
    parser.add_argument("--templates", type=Path, default=None, metavar="DIR",
                        help="score against DIR/<System>.csv templates instead of the EventIds")
    parser.add_argument("--drain3", action="store_true", help="add drain3 as a baseline")
    args = parser.parse_args(argv)

    files = corpus_files(args.paths)
    columns = {"GA": run_grouping(files, templates=args.templates)}
    if args.drain3:
        columns["drain3 GA"] = run_grouping(files, drain3_groups, args.templates)
    rows = columns["GA"]
    print(f"{'corpus':16} {'messages':>8}" + "".join(f" {name:>9}" for name in columns))
    for index, (name, count, _) in enumerate(rows):
        print(f"{name:16} {count:8}" + "".join(f" {c[index][2]:9.3f}" for c in columns.values()))
    if rows:
        print(f"{'mean':16} {sum(r[1] for r in rows):8}"
              + "".join(f" {statistics.fmean(r[2] for r in c):9.3f}" for c in columns.values()))
    if args.show_errors:
        for path in files:
            print(f"\n{path.stem}")
            print("\n".join(grouping_errors(path, args.show_errors, args.templates)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
