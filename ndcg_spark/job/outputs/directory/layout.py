"""An output directory's layout: where each run's tables, files, marker, lock and staging folder
live (:class:`Place`), the layout its first run records, and the guards that refuse a run that
does not fit it, or an output that is not ours, before anything is read."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.targets import Partition, shown
from ndcg_spark.job.outputs.contract import COMMANDS, STATE
from ndcg_spark.job.outputs.files import Files
from ndcg_spark.job.result import strict_json

#: The files published beside the marker.
COMPANION_FILES = ("report.html",)
#: Names an output directory may hold (anything else: the directory is not ours to write into).
OUR_NAMES = {"per_user", "summary", "rejected", "comparison", "_manifests", STATE, *COMPANION_FILES}
OUR_NAMES |= {marker for _, marker in COMMANDS.values()} | {f".{m}.tmp" for m in ("summary.json", "report.html")}


@dataclass(frozen=True)
class Place:
    """One run's place in an output directory: the paths of its tables, files and marker."""

    files: Files
    command: str
    partition: Optional[Partition]

    @property
    def name(self) -> str:
        """``key=value`` for a partition, ``output`` for the whole directory."""
        return self.partition.directory if self.partition else "output"

    @property
    def tables(self) -> Sequence[str]:
        return COMMANDS[self.command][0]

    @property
    def marker(self) -> str:
        return f"{self.marker_dir}/{COMMANDS[self.command][1]}"

    @property
    def marker_dir(self) -> str:
        """``DIR``, or ``DIR/_manifests/key=value`` for a partition (the report lives there too)."""
        if self.partition is None:
            return self.files.root.rstrip("/")
        return self.files.path("_manifests", self.partition.directory)

    def table(self, name: str) -> str:
        """The live path of table ``name``: ``DIR/name`` or ``DIR/name/key=value``."""
        if self.partition is None:
            return self.files.path(name)
        return self.files.path(name, self.partition.directory)

    @property
    def lock_path(self) -> str:
        return self.files.path(STATE, "locks", f"{self.name}.lock")

    @property
    def staging_root(self) -> str:
        return self.files.path(STATE, "staging", self.name)


# ----------------------------------------------------------------------------- layout


def layout_of(place: Place) -> Dict[str, Any]:
    return {"command": place.command, "partition_key": place.partition.key if place.partition else None}


def recorded_layout(files: Files) -> Optional[Dict[str, Any]]:
    """The layout written by the output's first run; for an output written before layouts were
    recorded, the one its markers show; None for a new output."""
    text = files.read_text(files.path(STATE, "layout.json"))
    if text is not None:
        return json.loads(text)
    names = set(files.list(files.root))
    for command, (_, marker) in COMMANDS.items():
        if marker in names:
            return {"command": command, "partition_key": None}
    for directory in files.list(files.path("_manifests")):
        markers = set(files.list(files.path("_manifests", directory)))
        for command, (_, marker) in COMMANDS.items():
            if marker in markers and "=" in directory:
                return {"command": command, "partition_key": directory.split("=", 1)[0]}
    return None


def check_layout(place: Place) -> None:
    """Refuse (exit 2, nothing touched) a run that does not fit the output it writes into."""
    files = place.files
    if files.exists(files.root) and not files.is_dir(files.root):
        raise ConfigError(f"output {files.shown} is a file, not a directory")
    names = files.list(files.root)
    strange = [n for n in names if n not in OUR_NAMES]
    if not strange and names and not is_ours(files):
        # Our names only, but neither our state nor a marker of ours: someone else's files.
        strange = names
    if strange:
        raise ConfigError(
            f"output {files.shown} already holds other data ({', '.join(strange[:3])}); "
            "choose an empty directory or a previous ndcg-spark output"
        )
    check_fits(place, recorded_layout(files))


def is_ours(files: Files) -> bool:
    """Whether a folder holding only names we write is an output of ours: it has our state
    folder, or a marker that reads as ours (a manifest with the run's settings)."""
    if files.is_dir(files.path(STATE)):
        return True
    markers = [files.path(marker) for _, marker in COMMANDS.values()]
    for directory in files.list(files.path("_manifests")):
        markers += [files.path("_manifests", directory, marker) for _, marker in COMMANDS.values()]
    for path in markers:
        try:
            manifest = json.loads(files.read_text(path) or "")
        except ValueError:
            continue
        if isinstance(manifest, dict) and isinstance(manifest.get("settings"), dict) and "run" in manifest:
            return True
    return False


def check_inputs(root: str, inputs: Dict[str, str]) -> None:
    """Refuse (exit 2, nothing written) an output that is an input, lies inside an input's folder,
    or holds an input: Spark would read the output's folders as part of the input (or the reverse)."""
    out = root.rstrip("/") + "/"
    for name, path in inputs.items():
        inp = path.rstrip("/") + "/"
        if out.startswith(inp) or inp.startswith(out):
            where = "is" if out == inp else "is inside" if out.startswith(inp) else "holds"
            raise ConfigError(
                f"output {shown(root)} {where} the {name.split(' ', 1)[0]} input {shown(path)}: a job's output must not be "
                "inside an input's folder, nor an input inside the output; choose another output"
            )


def check_fits(place: Place, layout: Optional[Dict[str, Any]]) -> None:
    if layout is None:
        return
    root, key = place.files.root, layout.get("partition_key")
    if layout.get("command") != place.command:
        raise ConfigError(
            f"output {shown(root)} holds the results of 'ndcg-spark {layout.get('command')}', not of "
            f"'ndcg-spark {place.command}'; choose another output"
        )
    mine = place.partition.key if place.partition else None
    if mine == key:
        return
    if key is None:
        raise ConfigError(
            f"output {shown(root)} is not partitioned; run without --run-date/--partition, or choose another"
        )
    if mine is None:
        raise ConfigError(
            f"output {shown(root)} is partitioned by {key}: give --run-date or --partition {key}=VALUE "
            "(a run of the whole output would replace every partition)"
        )
    raise ConfigError(f"output {shown(root)} is partitioned by {key}, not by {mine}; choose another output")


def record_layout(place: Place) -> None:
    """Write the layout once; a run that lost the race to a run of another layout is refused."""
    files = place.files
    path = files.path(STATE, "layout.json")
    if not files.create_new(path, strict_json(layout_of(place), indent=2) + "\n"):
        check_fits(place, json.loads(files.read_text(path)))
