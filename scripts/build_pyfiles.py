#!/usr/bin/env python3
"""Build ``dist/ndcg_spark.zip``, the archive ``spark-submit --py-files`` ships to the driver and executors.

    python scripts/build_pyfiles.py                 # -> dist/ndcg_spark.zip
    python scripts/build_pyfiles.py -o /tmp/x.zip   # elsewhere

The archive holds the package directory ``ndcg_spark/`` at its root (so ``import ndcg_spark``
works once the zip is on ``sys.path``): every file of the package, ``.py`` files and the data
file ``log4j2.properties`` alike, without ``__pycache__`` directories or compiled files. Entries
are sorted and stamped with a fixed date, so the same sources give a byte-identical zip.
Only the standard library is used; run it with any Python 3.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ndcg_spark"
EXCLUDED_DIRS = {"__pycache__"}
EXCLUDED_SUFFIXES = {".pyc", ".pyo"}
FIXED_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip entry can carry


def package_files(package_dir: Path) -> list[Path]:
    files = []
    for path in sorted(package_dir.rglob("*")):
        relative = path.relative_to(package_dir)
        if any(part in EXCLUDED_DIRS for part in relative.parts) or not path.is_file():
            continue
        if path.suffix in EXCLUDED_SUFFIXES:
            continue
        files.append(path)
    return files


def build(output: Path, root: Path = ROOT) -> list[str]:
    """Write the zip; returns the archive names written."""
    package_dir = root / PACKAGE
    if not (package_dir / "__init__.py").is_file():
        raise SystemExit(f"build_pyfiles: {package_dir} is not a Python package")
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".tmp")
    names = []
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in package_files(package_dir):
            name = path.relative_to(root).as_posix()
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
            names.append(name)
    tmp.replace(output)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        default=ROOT / "dist" / f"{PACKAGE}.zip",
        help="where to write the zip (default: dist/ndcg_spark.zip in the checkout)",
    )
    args = parser.parse_args(argv)
    names = build(args.output)
    print(f"wrote {args.output} ({len(names)} files: {', '.join(n.split('/', 1)[1] for n in names)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
