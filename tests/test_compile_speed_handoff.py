"""LLVM's overlaps hand Python's lock over: the caller's work beside LLVM starts
once the thread is inside LLVM (`nvptx._overlapped`'s `in_llvm`), never before,
and never waits on a thread that failed before getting there."""

from __future__ import annotations

import threading

import pytest

from affinec.backend import nvptx


def test_here_starts_once_the_work_is_in_llvm() -> None:
    order: list[str] = []
    in_llvm = threading.Event()

    def work() -> None:
        order.append("set-up")
        in_llvm.set()
        order.append("llvm")

    def here() -> None:
        assert in_llvm.is_set()
        order.append("here")

    nvptx._overlapped(work, here, "t", work_error_first=False, in_llvm=in_llvm)
    assert order[0] == "set-up"
    assert sorted(order) == ["here", "llvm", "set-up"]


@pytest.mark.parametrize("work_error_first", [False, True])
def test_a_work_that_fails_before_llvm_does_not_hold_here(work_error_first) -> None:
    ran: list[str] = []

    def work() -> None:
        raise RuntimeError("LLVM rejected the IR")

    nvptx._overlapped(
        lambda: None,
        lambda: ran.append("fine"),
        "t",
        work_error_first=work_error_first,
        in_llvm=threading.Event(),
    )
    with pytest.raises(RuntimeError, match="rejected"):
        nvptx._overlapped(
            work,
            lambda: ran.append("here"),
            "t",
            work_error_first=work_error_first,
            in_llvm=threading.Event(),
        )
    assert ran == ["fine", "here"]


def test_a_compile_hands_over_at_each_overlap(monkeypatch) -> None:
    from affinec.base.spec import ConvSpec
    from affinec.driver.compiler import compile_to_ptx

    handed: list[tuple[str, bool]] = []
    plain = nvptx._overlapped

    def overlapped(work, here, name, *, work_error_first, in_llvm=None):
        def checked_here() -> None:
            handed.append((name, in_llvm is not None and in_llvm.is_set()))
            here()

        plain(
            work,
            checked_here,
            name,
            work_error_first=work_error_first,
            in_llvm=in_llvm,
        )

    monkeypatch.setattr(nvptx, "_overlapped", overlapped)
    spec = ConvSpec(1, 8, 6, 6, 8, 3, 3, padding=1)
    # verified once, beside LLVM's optimization, as users' compiles are
    compiled = compile_to_ptx(spec, arch="sm_80", verify_each=False)
    assert ".entry" in compiled.ptx
    assert handed == [("affinec-llvm", True), ("affinec-llvm-ptx", True)]
