"""The service through real HTTP: uvicorn on 127.0.0.1 on a free port, driven by httpx and the client."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from api.localserver import local_service
from planner.client import PlannerClient, PlannerServiceError


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with local_service() as url:
        yield url


REQUEST = {
    "model": {"preset": "gpt3-175b"},
    "cluster": {"profile": "dgx-a100-80gb", "num_gpus": 1024},
    "training": {"global_batch_size": 1536},
    "top_k": 5,
}


def test_plan_over_http_with_the_client(server: str) -> None:
    with PlannerClient(server) as client:
        assert client.live()
        response = client.plan(REQUEST)
        assert len(response.plans) == 5
        best = response.plans[0]
        assert best.layout.tp * best.layout.pp * best.layout.dp * best.layout.cp == 1024
        assert "torchrun --nnodes 128 --nproc-per-node 8" in best.launch["megatron"].command
        assert response.baseline.speedup_of_best is not None and response.baseline.speedup_of_best >= 1
        again = client.plan(REQUEST)
        assert again.cached and again.plans == response.plans


def test_errors_over_http_are_problems(server: str) -> None:
    with PlannerClient(server) as client, pytest.raises(PlannerServiceError) as info:
        client.plan(REQUEST | {"model": {"preset": "nope"}})
    assert info.value.status == 422
    assert info.value.problem["errors"][0]["loc"] == ["model", "preset"]
    r = httpx.get(server + "/v1/hardware-profiles/nope")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    assert r.headers["x-request-id"]


def test_fifty_concurrent_identical_plans_on_two_workers_give_one_complete_answer() -> None:
    """The search is bounded by work, not time: load cannot truncate it or change the answer.

    50 copies of one request from 16 threads against a fresh 2-worker service (cold caches, so many
    are computed at once) must all be complete and byte-identical once the timing and cache fields
    are dropped, and equal the same request answered alone, in-process.
    """
    import json
    from concurrent.futures import ThreadPoolExecutor

    from api.convert import answer_plan
    from api.schemas import PlanRequest
    from planner.profiles import load_profiles

    def normalised(body: dict[str, object]) -> str:
        search = body["search"]
        assert isinstance(search, dict) and search["complete"] is True, search
        search.pop("elapsed_ms")
        body.pop("cached")
        return json.dumps(body, sort_keys=True)

    with local_service(workers=2) as url, httpx.Client(base_url=url, timeout=120) as client:

        def ask(_: int) -> str:
            response = client.post("/v1/plan", json=REQUEST)
            assert response.status_code == 200, response.text
            return normalised(response.json())

        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = set(pool.map(ask, range(50)))
    alone = json.loads(answer_plan(PlanRequest.model_validate(REQUEST), load_profiles()).model_dump_json())
    assert answers == {normalised(alone)}
