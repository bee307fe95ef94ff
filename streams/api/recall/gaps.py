"""`GET /v1/gaps`: what agents needed and memory did not hold (processors/recall/gaps.py), a page of
groups at a time, the most recently met first.

    namespace, status? (open | resolved | all; open), agent_id?, limit?, cursor?

Each group asks one question in the words of its gaps: how often it was met in all, when
first and last, by which agents, named by them (explicit) or met by a recall that showed
nothing (implicit), each of its gaps with its own counts, and the memories that answered
them. A group is open while one of its gaps is.

A gap's text is what an agent asked, so it is read as the agent's personal memories are: a
key bound to an agent sees its agent's gaps and those of no agent (met by keys bound to
none); an admin key bound to none, every agent's, or one agent's and those of no agent when
it names `agent_id`; any other key, those of no agent. A group shows only what the reader
sees of it: its counts, its agents and its question come from those gaps alone.
"""

from __future__ import annotations

from typing import cast, get_args

from faust.web import Request, View

from memstream_client.answers.gaps import Gap, GapList, GapResolution
from memstream_client.answers.gaps import GapGroup as GapGroupAnswer
from processors.api import cursors
from processors.api.access import Caller
from processors.api.parameters import integer, one_of, opaque
from stores.recall.gaps import GapFilter, GapGroup, GapRow, Gaps, GapStatus, GroupPosition
from streams.api.auth import granted_namespace, personal_reader
from streams.api.pages import Pages
from streams.api.params import READER_PARAMS, Param, Params, optional, value

# Groups answered per request, by default and at most.
GROUPS_LIMIT = 20
MAX_GROUPS_LIMIT = 100
# The gaps a group lists, the most met first.
GAPS_SHOWN = 10
LIMIT = integer(1, MAX_GROUPS_LIMIT)
# A group's id, as Postgres keeps it (bigserial).
GROUP_ID = integer(1, 2**63 - 1)
STATUS = one_of(get_args(GapStatus))


def wire_gaps(pages: Pages, gaps: Gaps) -> None:
    @pages.page("/v1/gaps", params=GAPS_PARAMS, answer=GapList)
    async def gaps_view(web: View, request: Request, caller: Caller) -> GapList:
        """What agents needed and memory did not hold, grouped by question."""
        query = request.query
        namespace = granted_namespace(caller, query)
        reader = personal_reader(caller, query)
        status = cast(GapStatus, value(query, "status", STATUS, "open"))
        limit = value(query, "limit", LIMIT, GROUPS_LIMIT)
        # One more than asked: whether there is a next page.
        found = await gaps.gap_groups(GapFilter(namespace, reader, status),
                                      optional(query, "cursor", cursor_position), limit + 1)
        shown = found[:limit]
        return GapList(namespace=namespace, status=status, agent_id=reader.agent_id,
                       groups=[group_answer(group) for group in shown],
                       next=encode_cursor(shown[-1]) if len(found) > limit else None)


def group_answer(group: GapGroup) -> GapGroupAnswer:
    # The memories that answered its gaps, the latest first.
    resolutions: dict[str, GapRow] = {}
    for row in sorted((row for row in group.rows if row.resolved_at is not None),
                      key=lambda row: row.resolved_at or row.last_seen, reverse=True):
        if row.resolved_by is not None:
            resolutions.setdefault(row.resolved_by, row)
    return GapGroupAnswer(
        group_id=group.group_id,
        status="open" if group.open else "resolved",
        # Its most met gap's words.
        question=group.rows[0].text,
        times=group.times,
        first_seen=group.first_seen,
        last_seen=group.last_seen,
        agents=sorted({row.agent_id for row in group.rows if row.agent_id is not None}),
        sources=sorted({row.source for row in group.rows}),
        gap_count=len(group.rows),
        gaps=[gap_answer(row) for row in group.rows[:GAPS_SHOWN]],
        resolved_by=[GapResolution(record_id=record_id,
                                   relevance=_rounded(row.resolved_score),
                                   resolved_at=row.resolved_at)
                     for record_id, row in resolutions.items()],
    )


def gap_answer(row: GapRow) -> Gap:
    return Gap(
        gap_id=row.gap_id,
        agent_id=row.agent_id,
        source=row.source,
        text=row.text,
        query=row.query,
        times=row.times,
        first_seen=row.first_seen,
        last_seen=row.last_seen,
        status="open" if row.resolved_at is None else "resolved",
        resolved_by=row.resolved_by,
        relevance=_rounded(row.resolved_score),
        resolved_at=row.resolved_at,
    )


def _rounded(score: float | None) -> float | None:
    return None if score is None else round(score, 4)


def encode_cursor(group: GapGroup) -> str:
    return cursors.encode_cursor(group.last_seen, str(group.group_id))


def cursor_position(cursor: str) -> GroupPosition:
    """The position a cursor of `encode_cursor` stands for."""
    return cursors.position_of(cursor, 1, "listing", lambda at, keys: GroupPosition(
        at, GROUP_ID(keys[0])))


GAPS_PARAMS: Params = {
    **READER_PARAMS, "status": Param(STATUS), "limit": Param(LIMIT),
    "cursor": Param(opaque(cursor_position, "the `next` of the listing's previous page")),
}
