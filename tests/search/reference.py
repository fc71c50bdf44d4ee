"""A plain, slow reference enumerator: every layout by nested loops, checked by the scalar rules and estimate.

It shares nothing with `planner.constraints.space` or `planner.search`: only
the public rules (`layout_violations`) and the scalar `estimate`. The search
must never return a layout this enumerator beats.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

from planner.constraints.space import MAX_MICRO_BATCH
from planner.costmodel.recompute import own_selective_modules, searched_module_sets
from planner.estimate import Estimate, estimate
from planner.layout import Layout
from planner.profiles import ClusterSpec
from planner.specs import ModelSpec, Recompute, TrainingSpec
from planner.validate import layout_violations

SPLIT_FLAGS = ((False, False), (False, True), (True, False), (True, True))
"""(account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split) options."""


def all_layouts(model: ModelSpec, num_gpus: int, allowed: dict[str, list[object]] | None = None) -> Iterator[Layout]:
    """Every layout by nested loops; an axis the request pins loops over its pinned values only."""
    sizes = range(1, num_gpus + 1)
    experts = model.moe.num_experts if model.moe else 1
    pins = allowed or {}

    def values(key: str, everything: Iterable[object]) -> list[Any]:
        return [v for v in everything if key not in pins or v in pins[key]]

    for tp, pp, cp in itertools.product(values("tp", sizes), values("pp", sizes), values("cp", sizes)):
        if num_gpus % (tp * pp * cp):
            continue
        dp = num_gpus // (tp * pp * cp)
        # etp: tp, and 1 for a mixture-of-experts model (the search's domain), and whatever the request pins.
        pinned = set(pins.get("etp", ()))
        etps = sorted({tp, 1} | pinned if model.moe else {tp} | pinned)
        for ep, etp, vp, mbs in itertools.product(
            values("ep", range(1, experts + 1)),
            etps,
            values("vp", range(1, model.num_layers + 3)),
            values("micro_batch_size", range(1, MAX_MICRO_BATCH + 1)),
        ):
            recomputes = [r for r in Recompute if "recompute" not in pins or r.value in pins["recompute"]]
            for recompute, sp, zero, (embedding, loss) in itertools.product(
                recomputes, values("sequence_parallel", (False, True)), values("zero_stage", (0, 1, 2, 3)), SPLIT_FLAGS
            ):
                yield Layout(
                    tp=tp,
                    pp=pp,
                    dp=dp,
                    cp=cp,
                    ep=ep,
                    etp=etp,
                    vp=vp,
                    micro_batch_size=mbs,
                    recompute=recompute,
                    sequence_parallel=sp,
                    zero_stage=zero,
                    account_for_embedding_in_pipeline_split=embedding,
                    account_for_loss_in_pipeline_split=loss,
                )


def legal_layouts(
    model: ModelSpec, num_gpus: int, training: TrainingSpec, allowed: dict[str, list[object]] | None = None
) -> Iterator[Layout]:
    """Every layout that the request's constraints allow and that breaks no rule.

    The search counts the embedding and the loss in the pipeline split only where the plain split
    (same pp and vp > 1) breaks stage_split; so does this enumerator.
    """
    plain_breaks: dict[tuple[int, int], bool] = {}  # stage_split reads only pp and vp (and the flags)
    for layout in all_layouts(model, num_gpus, allowed):
        if allowed and any(_value(layout, k) not in v for k, v in allowed.items()):
            continue
        if layout.counts_embedding_or_loss:
            key = (layout.pp, layout.vp)
            if key not in plain_breaks:
                plain_breaks[key] = _plain_split_breaks(layout, model, training, num_gpus)
            if not plain_breaks[key]:
                continue
        if not layout_violations(layout, model, training, num_gpus):
            yield layout


def _plain_split_breaks(layout: Layout, model: ModelSpec, training: TrainingSpec, num_gpus: int) -> bool:
    plain = replace(layout, account_for_embedding_in_pipeline_split=False, account_for_loss_in_pipeline_split=False)
    return layout.vp > 1 and any(v.rule == "stage_split" for v in layout_violations(plain, model, training, num_gpus))


def reference_best(
    model: ModelSpec, cluster: ClusterSpec, training: TrainingSpec, allowed: dict[str, list[object]] | None = None
) -> tuple[Layout, Estimate] | None:
    """The fastest layout that breaks no rule and fits, by brute force; a selective-recompute layout with the
    request's own set (`recompute.own_selective_modules`: the default without an idle core_attn, where that
    differs) and with each module set the search tries besides it (`recompute.searched_module_sets`, the public
    statement of which sets those are), each checked by the rules again."""
    best: tuple[Layout, Estimate] | None = None
    sets = searched_module_sets(model, training)
    own = own_selective_modules(model, training)
    for layout in legal_layouts(model, cluster.num_gpus, training, allowed):
        variants = [layout]
        if layout.recompute is Recompute.SELECTIVE:
            own_variant = layout if own is None else replace(layout, recompute_modules=own)
            variants = [own_variant, *(replace(layout, recompute_modules=s) for s in sets)]
        for x in variants:
            if x is not layout and layout_violations(x, model, training, cluster.num_gpus):
                continue
            e = estimate(model, cluster, training, x)
            if e.fits and (best is None or e.step_time_s < best[1].step_time_s):
                best = (x, e)
    return best


def _value(layout: Layout, key: str) -> object:
    value = getattr(layout, key)
    return value.value if isinstance(value, Recompute) else value
