"""``make browser`` asked for by several test processes at once unpacks Chromium once, and a
folder whose unpacking has not finished is not taken for the browser."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.report import browser


def test_fetches_at_once_unpack_once_and_none_sees_half_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "browser"
    unpacked: list[int] = []

    def slow_unpack(target: Path) -> None:  # the download and unpacking, without the network
        target.mkdir(parents=True, exist_ok=True)
        (target / "chromium").write_text("#!/bin/sh\n")
        with pytest.raises(browser.BrowserMissing):
            browser.chromium_path(target)  # the binary is there, the package not yet named
        time.sleep(0.2)
        unpacked.append(threading.get_ident())

    monkeypatch.setattr(browser, "_unpack", slow_unpack)
    found: list[Path] = []
    fetches = [
        threading.Thread(target=lambda: found.append(browser.fetch(folder))) for _ in range(3)
    ]
    for fetch in fetches:
        fetch.start()
    for fetch in fetches:
        fetch.join()
    assert len(unpacked) == 1
    assert found == [folder / "chromium"] * 3
    assert browser.chromium_path(folder) == folder / "chromium"
