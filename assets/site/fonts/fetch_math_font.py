"""Fetch the math font the site serves (Noto Sans Math, SIL Open Font License 1.1), pinned, and verify it.

Chromium draws MathML with the reader's math font; on a machine without one, a column vector's brackets stay
one line tall. The site therefore serves its own: the woff2 and its licence are committed beside this script
and listed in _quarto.yml's resources; reading.scss declares the @font-face.

    python3 assets/site/fonts/fetch_math_font.py          # re-fetch with npm (registry.npmjs.org) and verify
    python3 assets/site/fonts/fetch_math_font.py --check  # offline: the committed files are the pinned ones

Standard library only, plus `npm` for the fetch. A download whose sha256 is not the pinned one is refused and
nothing is written.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "@fontsource/noto-sans-math"
VERSION = "5.3.0"
TARBALL_SHA256 = "8f6894fffd5863699e279c669d6eae9d3a1218cc9e20aed84efb64a98aee03d8"
# member of the npm tarball -> (file written here, its sha256)
FILES = {
    "package/files/noto-sans-math-latin-400-normal.woff2": (
        "noto-sans-math-400.woff2", "c39a9444f95747345dcbde1032ec0ea2af1db63dccf53a31b38a957bdcf4a01f"),
    "package/LICENSE": ("OFL.txt", "14526a1947ee905c1d4e9d8f4bbd1356d2c19362e62e1387ae35a8c797efe5e0"),
}
TARBALL_MAX_BYTES = 5_000_000
HERE = Path(__file__).resolve().parent


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch() -> dict[str, bytes]:
    """The pinned files' bytes from the npm registry, each verified; raises SystemExit naming a mismatch."""
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent"], cwd=folder, check=True,
                       stdout=subprocess.DEVNULL, timeout=300)
        tarballs = list(Path(folder).glob("*.tgz"))
        if len(tarballs) != 1 or tarballs[0].stat().st_size > TARBALL_MAX_BYTES:
            raise SystemExit(f"npm pack {PACKAGE}@{VERSION} did not give one tarball under {TARBALL_MAX_BYTES} bytes")
        data = tarballs[0].read_bytes()
    if sha256(data) != TARBALL_SHA256:
        raise SystemExit(f"{PACKAGE}@{VERSION}: tarball sha256 {sha256(data)}, pinned {TARBALL_SHA256}; nothing written")
    files = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in FILES:
            content = archive.extractfile(member).read()
            if sha256(content) != FILES[member][1]:
                raise SystemExit(f"{member}: sha256 {sha256(content)}, pinned {FILES[member][1]}; nothing written")
            files[member] = content
    return files


def check() -> list[str]:
    problems = []
    for member, (name, _) in FILES.items():
        path = HERE / name
        if not path.is_file():
            problems.append(f"{name} is missing: run {Path(__file__).name} to fetch it")
        elif sha256(path.read_bytes()) != FILES[member][1]:
            problems.append(f"{name} is not {PACKAGE}@{VERSION}'s {member} (sha256 differs)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify the committed files offline; fetch nothing")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or f"{PACKAGE}@{VERSION}: committed files verified")
        return 1 if problems else 0
    for member, content in fetch().items():
        (HERE / FILES[member][0]).write_bytes(content)
        print(f"wrote {FILES[member][0]} ({len(content):,} bytes) from {PACKAGE}@{VERSION}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
