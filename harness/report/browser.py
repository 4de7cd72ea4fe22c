"""A headless Chromium to look at the reports as a person does: render a page, read it back.

Only the screenshots (``harness.screenshots``) and the rendering test use
it; nothing else in the harness does. The browser is no download of its own:
it is the Chromium that the npm package ``@sparticuz/chromium`` ships inside its
tarball (brotli-compressed, built to run on a bare Linux), fetched from the npm
registry at a pinned version (by ``npm pack``; without Node.js, straight from
the registry and unpacked by the ``brotli`` wheel), checked against its pinned
SHA-512, and unpacked into ``build/browser/`` (``make browser``, or
``python -m harness.report.browser fetch``). Playwright (the ``screenshots``
extra, from PyPI) drives it through its ``executable_path``.

``render`` opens a page (a path or URL), optionally clicks, and returns what a
set of CSS selectors shows: the text of each match, so a test can assert on
what a reader sees rather than on the HTML written.
"""

from __future__ import annotations

import base64
import ctypes.util
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page

__all__ = [
    "BROWSER_DIR",
    "CHROMIUM_PACKAGE",
    "BrowserMissing",
    "Rendered",
    "chromium_path",
    "fetch",
    "open_page",
    "render",
]

CHROMIUM_PACKAGE = "@sparticuz/chromium@153.0.0"
"""The npm package whose tarball holds the Chromium (153.0.8010.0), pinned."""
CHROMIUM_INTEGRITY = (
    "sha512-jiGWqSvPMdu4+P9TilYqAR7yEGPEHINx+lCvE/NqNO/"
    "EHYzF/x1hUiI5T6ioVIt7dEy7n88byyT0vk+dnsgQwA=="
)
"""The tarball's SHA-512, as the npm registry states it (``npm view ... dist.integrity``)."""
BROWSER_DIR = Path(__file__).resolve().parents[2] / "build" / "browser"
"""Where ``fetch`` unpacks it (``build/`` is not in git)."""
ARGS = (
    "--no-sandbox",  # root in a container: Chromium's sandbox needs what it has not
    "--no-zygote",
    "--disable-gpu",
    "--disable-background-networking",  # nothing to reach: no update, no sync, no probes
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--font-render-hinting=none",
)


class BrowserMissing(RuntimeError):
    """The browser was not fetched (``make browser``), or Playwright is not installed."""


def chromium_path(folder: Path = BROWSER_DIR) -> Path:
    """The unpacked Chromium, or ``BrowserMissing`` saying how to get it. It is there once
    its package is named in ``package.txt``, written last: a fetch under way is not done."""
    binary = folder / "chromium"
    if not binary.is_file() or not _unpacked(folder):
        raise BrowserMissing(
            f"no headless Chromium at {binary}: run `make browser` (it fetches "
            f"{CHROMIUM_PACKAGE} from the npm registry into {folder})"
        )
    return binary


def _unpacked(folder: Path) -> bool:
    marker = folder / "package.txt"
    return marker.is_file() and marker.read_text("utf-8").strip() == CHROMIUM_PACKAGE


def _integrity(tarball: Path) -> str:
    digest = hashlib.sha512(tarball.read_bytes()).digest()
    return "sha512-" + base64.b64encode(digest).decode()


# Node's zlib unpacks brotli; without Node, the ``brotli`` wheel of the screenshots extra.
_UNBROTLI = (
    "const fs=require('fs'),z=require('zlib');"
    "fs.writeFileSync(process.argv[2],z.brotliDecompressSync(fs.readFileSync(process.argv[1])))"
)
REGISTRY = os.environ.get("npm_config_registry", "https://registry.npmjs.org/")  # noqa: SIM112
"""The npm registry a machine without npm fetches the tarball from (npm's own variable)."""


def _has_node() -> bool:
    return shutil.which("npm") is not None and shutil.which("node") is not None


def _pack(work: Path) -> Path:
    """The package's tarball in ``work``: by ``npm pack`` (which honours npm's own
    settings), or straight from the registry when this machine has no Node.js."""
    if _has_node():
        subprocess.run(
            ["npm", "pack", CHROMIUM_PACKAGE, "--silent", "--pack-destination", str(work)],
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
        )
        (tarball,) = work.glob("*.tgz")
        return tarball
    import urllib.request

    scope_name, version = CHROMIUM_PACKAGE.rsplit("@", 1)
    url = f"{REGISTRY.rstrip('/')}/{scope_name}/-/{scope_name.split('/')[-1]}-{version}.tgz"
    tarball = work / f"{scope_name.split('/')[-1]}-{version}.tgz"
    with urllib.request.urlopen(url, timeout=600) as answer, tarball.open("wb") as out:
        shutil.copyfileobj(answer, out)
    return tarball


def _unbrotli(source: Path, target: Path) -> None:
    if _has_node():
        subprocess.run(["node", "-e", _UNBROTLI, str(source), str(target)], check=True, timeout=300)
        return
    try:
        import brotli  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        raise BrowserMissing(
            "`make browser` needs Node.js or the brotli wheel (pip install -e '.[screenshots]')"
        ) from None
    target.write_bytes(brotli.decompress(source.read_bytes()))


def fetch(folder: Path = BROWSER_DIR) -> Path:
    """Fetch and unpack the pinned Chromium into ``folder``; nothing to do when it is there.
    One fetch at a time (a lock beside the folder): tests run at once may all ask for it."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if _unpacked(folder):
            return chromium_path(folder)
        _unpack(folder)
        (folder / "package.txt").write_text(CHROMIUM_PACKAGE + "\n", "utf-8")
    return chromium_path(folder)


def _unpack(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        tarball = _pack(work)
        if (got := _integrity(tarball)) != CHROMIUM_INTEGRITY:
            raise BrowserMissing(f"{tarball.name}: integrity {got}, not the pinned one")
        with tarfile.open(tarball) as archive:
            archive.extractall(work, filter="data")
        bin_dir = work / "package" / "bin"
        _unbrotli(bin_dir / "chromium.br", folder / "chromium")
        (folder / "chromium").chmod(0o755)
        # Its GL libraries (SwiftShader) sit beside the binary, where it looks for them.
        shaders = work / "swiftshader.tar"
        _unbrotli(bin_dir / "swiftshader.tar.br", shaders)
        with tarfile.open(shaders) as archive:
            archive.extractall(folder, filter="data")
        # NSS, NSPR and expat, for a machine without them (used only then: ``_env``).
        libraries = work / "al2023.tar"
        _unbrotli(bin_dir / "al2023.tar.br", libraries)
        with tarfile.open(libraries) as archive:
            archive.extractall(folder, filter="data")


def _env(folder: Path) -> dict[str, str | float | bool] | None:
    """The browser's environment: the machine's, plus the libraries that came with it
    when the machine has no NSS of its own."""
    if ctypes.util.find_library("nss3") is not None:
        return None
    paths = [str(folder / "lib"), *filter(None, [os.environ.get("LD_LIBRARY_PATH")])]
    return {**os.environ, "LD_LIBRARY_PATH": os.pathsep.join(paths)}


@contextmanager
def open_page(
    target: str | Path, *, width: int = 1280, height: int = 900, folder: Path = BROWSER_DIR
) -> Iterator[Page]:
    """A page of the headless Chromium showing ``target`` (a file path or a URL)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise BrowserMissing(
            "Playwright is not installed: pip install -e '.[screenshots]' (or `make browser`)"
        ) from None
    binary = chromium_path(folder)
    url = target.resolve().as_uri() if isinstance(target, Path) else target
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(binary), args=list(ARGS), env=_env(folder), timeout=60_000
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            page.goto(url)
            yield page
        finally:
            browser.close()


@dataclass(frozen=True, slots=True)
class Rendered:
    """What a page showed: the title, and per selector the visible text of each match."""

    title: str
    found: dict[str, list[str]] = field(default_factory=dict)


def render(
    target: str | Path,
    queries: Mapping[str, str] | Sequence[str],
    *,
    clicks: Sequence[str] = (),
    folder: Path = BROWSER_DIR,
) -> Rendered:
    """Open ``target``, click each of ``clicks`` (CSS selectors) in turn, then read each
    query (a CSS selector; a mapping names them): the inner text of every visible match."""
    named = dict(queries) if isinstance(queries, Mapping) else {q: q for q in queries}
    with open_page(target, folder=folder) as page:
        for selector in clicks:
            page.click(selector)
        found = {
            name: [
                match.inner_text() for match in page.query_selector_all(css) if match.is_visible()
            ]
            for name, css in named.items()
        }
        return Rendered(page.title(), found)


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["fetch"]:
        print("usage: python -m harness.report.browser fetch", file=sys.stderr)
        return 2
    try:
        print(f"headless Chromium ({CHROMIUM_PACKAGE}): {fetch()}")
    except (BrowserMissing, subprocess.SubprocessError) as exc:
        print(f"no browser fetched: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
