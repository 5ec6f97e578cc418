"""The async doors (issue 40: async that is whole): every public method of MemoryStore and StorePool has a coroutine
counterpart on AsyncMemoryStore / AsyncStorePool (same name, same docstring), and they run concurrently under one event
loop without losing a write."""
import asyncio
import inspect
import pytest
from earmem.memory import AsyncMemoryStore, AsyncStorePool, HashingEncoder, MemoryStore, StoreConfig, StorePool
from earmem.memory.service.users import public_methods


@pytest.mark.parametrize("cls,wrapper,skip", [(MemoryStore, AsyncMemoryStore, ()), (StorePool, AsyncStorePool, ("using",))])
def test_every_public_method_is_awaitable(cls, wrapper, skip):
    for name in public_methods(cls):
        if name in skip: continue
        method = getattr(wrapper, name, None)
        assert method is not None and inspect.iscoroutinefunction(method), name
        if name not in ("store", "close"): assert method.__doc__ == getattr(cls, name).__doc__, name


def test_concurrent_calls_under_one_loop_lose_nothing(tmp_path):
    async def go():
        async with AsyncStorePool(tmp_path / "p", encoder=HashingEncoder(64), config=StoreConfig(min_relevance=-1.0)) as pool:
            users = [await pool.store(f"u{i}") for i in range(3)]
            await asyncio.gather(*(u.add(f"user {i} note {j} about topic {j}", "fact") for i, u in enumerate(users) for j in range(10)))
            chats = await asyncio.gather(*(u.add_messages([{"role": "user", "content": f"I live in city {i}."}]) for i, u in enumerate(users)))
            hits = await asyncio.gather(*(u.search("note 3 about topic 3", k=3) for u in users))
            fed = await asyncio.gather(*(u.feedback(h, cited=[h[0].id]) for u, h in zip(users, hits)))
            stats = await asyncio.gather(*(u.stats() for u in users))
            return chats, hits, fed, stats, sorted(await pool.namespaces())
    chats, hits, fed, stats, names = asyncio.run(go())
    assert names == ["default", "u0", "u1", "u2"]
    assert all(len(c.episodes) == 1 for c in chats) and all(s["memories"] >= 11 for s in stats)
    assert all(f"user {i} note 3" in h[0].text for i, h in enumerate(hits)) and all(list(f["labels"].values())[0] == 1 for f in fed)
