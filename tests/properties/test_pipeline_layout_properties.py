"""Properties of uneven interleaved splits over random pipelines (hypothesis, derandomized).

Wherever rule `stage_split` accepts an explicit split under interleaving, `rank_chunks` reads it as chunks
that sum to each rank's count, none longer than a middle rank's chunk, and at most one short chunk per rank,
beside the embedding (first rank, first chunk) or the loss (last rank, last chunk); the launch's pipeline
layout string reads back as the same chunks. Wherever it refuses one, it says which stage.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from planner.launch.pipeline_layout import layout_chunks, pipeline_layout
from planner.layout import Layout
from planner.rules import STAGE_SPLIT
from planner.rules.core import rank_chunks
from planner.specs import ModelSpec

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None)


@st.composite
def splits(draw: st.DrawFn) -> tuple[tuple[int, ...], int]:
    """(layers per stage, vp): equal middle stages of a vp multiple, ends anywhere from 1 to two chunks more."""
    pp, vp = draw(st.integers(3, 12)), draw(st.integers(2, 6))
    chunk = draw(st.integers(1, 4))
    middle = chunk * vp
    first, last = (draw(st.integers(1, middle + 2 * chunk)) for _ in range(2))
    return (first, *([middle] * (pp - 2)), last), vp


@SETTINGS
@given(splits())
def test_accepted_splits_read_as_one_short_chunk_and_round_trip(split: tuple[tuple[int, ...], int]) -> None:
    stages, vp = split
    problems = STAGE_SPLIT.stage_problems(stages, sum(stages), len(stages), vp)
    size = stages[1] // vp
    ends_legal = all(n % vp == 0 or stages[1] - size <= n <= stages[1] for n in (stages[0], stages[-1]))
    assert (problems == []) is ends_legal, problems
    if problems:
        assert all("layers are neither a multiple of vp" in p for p in problems)
        return
    chunks = rank_chunks(stages, vp)
    assert [sum(c) for c in chunks] == list(stages)
    for rank, held in enumerate(chunks):
        assert all(n >= 0 for n in held)
        if stages[rank] % vp:  # an end rank: one short chunk, beside the embedding (first) or the loss (last)
            beside = 0 if rank == 0 else vp - 1
            assert rank in (0, len(stages) - 1)
            assert [i for i, n in enumerate(held) if n != size] == [beside] and held[beside] < size
        else:
            assert len(set(held)) == 1
    model = ModelSpec(num_layers=sum(stages), hidden_size=64, num_attention_heads=8, vocab_size=1000, seq_length=16)
    layout = Layout(tp=1, pp=len(stages), dp=1, vp=vp, layers_per_stage=stages)
    text = pipeline_layout(model, layout)
    if any(n % vp for n in stages):
        assert text is not None and layout_chunks(text, len(stages)) == chunks
        assert text.startswith("E") and text.endswith("L")
    else:
        assert text is None  # Megatron's first/last-count flags spell it
