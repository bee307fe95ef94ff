"""How much consolidation merges in a namespace of distinct conversational turns.

    python -m bench.consolidation_locomo [--show]

Every dialog turn of LoCoMo's development conversations (bench/data/locomo-dev.json) becomes
one memory exactly as `bench.retrieval_eval` writes it (text "speaker: text" plus
"[shares a photo of <blip_caption>]", created at the session's date, source_ref the turn's
dia_id), one namespace per conversation. The turns are embedded with the project's int8 model
and consolidated with the default settings: `find_clusters`, then `merge_cluster` for each
cluster, the plan the consolidator carries out.

No two turns of a conversation are the same utterance: each has its own speaker, moment and
place in the dialog, and the questions of the benchmark point at single turns. Every merge here
is a false one, so the figure to read is the fraction of turns merged: target <= 0.02 (a few
"Thanks!"/"Bye!" exchanges may read alike; whole topics must not collapse).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.consolidation_eval import SETTINGS, SIMILARITY_DIR
from bench.retrieval_eval import DATA_FILE, Conversation, load_conversations
from embedder.model import Embedder
from processors.consolidation.candidates import ConsolidationCandidate, ConsolidationSettings
from processors.consolidation.clusters import find_clusters, merge_cluster

TARGET_FRACTION = 0.02


@dataclass(frozen=True)
class ConversationMerges:
    sample_id: str
    memories: int
    # Each cluster's member texts, in turn order.
    clusters: list[list[str]]

    @property
    def merged(self) -> int:
        """Memories that a merge would supersede."""
        return sum(len(cluster) for cluster in self.clusters)

    @property
    def fraction(self) -> float:
        return self.merged / self.memories if self.memories else 0.0


def candidates_of(conversation: Conversation) -> list[ConsolidationCandidate]:
    """The conversation's turns as the live memories of one namespace."""
    return [
        ConsolidationCandidate(
            record_id=f"{conversation.sample_id}:{turn.dia_id}",
            namespace=conversation.sample_id, scope="shared", agent_id=None,
            record_kind="memory", memory_type="fact", text=turn.text, title=None, tags=(),
            related_ids=(), review_state="approved",
            source_event_ids=(f"{conversation.sample_id}:{turn.dia_id}",),
            created_at=turn.occurred_at, source_ref=turn.dia_id)
        for turn in conversation.turns
    ]


def consolidate_conversations(settings: ConsolidationSettings = SETTINGS,
                              model_dir: Path = SIMILARITY_DIR,
                              data: Path = DATA_FILE) -> list[ConversationMerges]:
    """Each conversation consolidated as one namespace: what merges."""
    conversations = load_conversations(data)
    with Embedder.load(model_dir) as embedder:
        vectors = [embedder.embed([turn.text for turn in conversation.turns], role="passage")
                   for conversation in conversations]
    results = []
    for conversation, matrix in zip(conversations, vectors, strict=True):
        candidates = candidates_of(conversation)
        clusters = find_clusters(candidates, matrix, settings)
        for cluster in clusters:
            # The plan merges every cluster; a merge that refuses its members would show here.
            merge_cluster([candidates[row] for row in cluster], matrix[cluster], settings)
        results.append(ConversationMerges(
            conversation.sample_id, len(candidates),
            [[candidates[row].text for row in cluster] for cluster in clusters]))
    return results


def overall_fraction(results: Sequence[ConversationMerges]) -> float:
    memories = sum(result.memories for result in results)
    return sum(result.merged for result in results) / memories if memories else 0.0


def run_consolidation_locomo() -> list[tuple[str, str, str]]:
    """`make bench`'s rows: the fraction of turns merged, per conversation and overall."""
    results = consolidate_conversations()
    rows = [(f"LoCoMo dev turns merged by consolidation ({sum(r.memories for r in results)})",
             f"{overall_fraction(results):.3f}", f"<= {TARGET_FRACTION}")]
    rows += [(f"  {result.sample_id}: {result.merged} of {result.memories} in "
              f"{len(result.clusters)} merges", f"{result.fraction:.3f}", "")
             for result in results]
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.consolidation_locomo",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--show", action="store_true", help="print every merge's turns")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    results = consolidate_conversations()
    for result in results:
        print(f"{result.sample_id}: {result.memories} memories, {result.merged} merged into "
              f"{len(result.clusters)}, fraction {result.fraction:.3f}")
        if args.show:
            for cluster in result.clusters:
                print()
                for text in cluster:
                    print(f"   {text}")
            print()
    print(f"overall: {sum(r.memories for r in results)} memories, "
          f"{sum(r.merged for r in results)} merged, fraction {overall_fraction(results):.3f}"
          f"   (target <= {TARGET_FRACTION})")
    print(f"time {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
