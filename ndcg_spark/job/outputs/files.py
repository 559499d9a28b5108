"""Small files and folders on the output's file system (:class:`Files`, on Hadoop's FileSystem or
the local one), and the paths of a run as that file system names them (:func:`qualify`), with
what Spark Connect cannot reach (:func:`check_connect`)."""

from __future__ import annotations

import os
import re
import shutil
from typing import Dict, List, Optional, Protocol
from urllib.parse import urlparse

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.targets import shown
from ndcg_spark.reading import ROLES
from ndcg_spark.spark_support import is_connect


def input_paths(spark, config) -> Dict[str, str]:
    """The input tables given as paths (not catalog tables), qualified as the output is; one whose
    file system cannot be reached is left out (reading it says why, exit 3)."""
    inputs = config.inputs
    named = [(role, getattr(inputs, role)) for role in ROLES]
    named += [("candidate", path) for path in getattr(config, "candidates", ())]
    paths = {}
    for role, value in named:
        if value and is_path(value):
            try:
                paths[f"{role} {value}"] = qualify(spark, value)
            except Exception:  # noqa: BLE001 - e.g. no FileSystem for its scheme here
                continue
    return paths


def is_path(source: str) -> bool:
    """Whether an input names a path (anything with a slash or a URI scheme, or that exists),
    not a catalog table."""
    return "/" in source or "://" in source or os.path.exists(source)


def check_connect(spark, config) -> None:
    """Over Spark Connect, refuse what the job could not do as documented (exit 2).

    The server resolves a relative path against its own working directory, and the client,
    which writes ``summary.json`` and ``report.html`` with its own file system (it has no
    Hadoop API), can reach only a local output: a relative path, or an output URI other than
    ``file:``, is refused. With no session yet (``spark`` None), ``config.remote`` says whether the
    run will be over Spark Connect: checked before the session starts.
    """
    if not (is_connect(spark) if spark is not None else config.remote):
        return
    inputs, output = config.inputs, config.output.path
    paths = [(key, getattr(inputs, key)) for key in ROLES]
    paths += [("candidate", path) for path in getattr(config, "candidates", ())] + [("output", output)]
    if output is None:  # catalog tables: written and read by the server alone
        paths.pop()
    for key, value in paths:
        if not value or (key != "output" and not is_path(value)):
            continue
        if "://" not in value and not value.startswith("file:") and not os.path.isabs(value):
            raise ConfigError(
                f"{key} {value!r} is a relative path: over Spark Connect it would resolve on the server; "
                "give an absolute path or a URI"
            )
    scheme = output.split("://", 1)[0] if output and "://" in output else "file"
    if output is not None and scheme != "file":
        raise ConfigError(
            f"output {output!r}: over Spark Connect the client writes summary.json and report.html with its "
            "own file system, which cannot reach a " + scheme + ":// URI; run the job with spark-submit "
            "(classic mode), give a path the client and the server share, or write catalog tables (--output-table)"
        )


def qualify(spark, path: str) -> str:
    """``path`` made absolute and qualified with its file system (``file:/data/out``,
    ``hdfs://nn:8020/data/out``), as Spark's writer resolves it: once, before anything is written,
    so that the job's own records (journal, lock, manifest) name one place whatever the working
    directory of a later run. Over Spark Connect, a local absolute path (:func:`check_connect`)."""
    if is_connect(spark):
        local = urlparse(path).path if path.startswith("file:") else path
        return os.path.normpath(os.path.abspath(local))
    jvm = spark._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration())
    return str(fs.makeQualified(hadoop_path).toString()).rstrip("/") or "/"


class Files(Protocol):
    """Small files and folders of one output, on the file system its tables are written to.

    Paths are the output's, qualified as :func:`qualify` makes them. :func:`files_for` picks the
    implementation once: :class:`HadoopFiles` in classic mode, :class:`LocalFiles` otherwise.
    """

    root: str

    @property
    def shown(self) -> str:
        """The output as messages name it: a local path without its ``file:`` scheme."""

    def path(self, *parts: str) -> str:
        """``root/part/...`` as the tables' writer takes it."""

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list(self, path: str) -> List[str]:
        """The names in folder ``path`` (none when it does not exist)."""

    def delete(self, path: str) -> None:
        """Remove a file or a whole folder, if it is there."""

    def remove_if_empty(self, path: str) -> None:
        """Remove folder ``path`` if it is there and empty (a non-empty one is left as it is)."""

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` to ``target`` (which must not exist), making ``target``'s parent."""

    def modified(self, path: str) -> Optional[float]:
        """The modification time of ``path`` in seconds since the epoch, or None when it is not there."""

    def read_text(self, path: str) -> Optional[str]:
        """The text of a small file, or None when it does not exist."""

    def write_text(self, path: str, text: str) -> None:
        """Write a small file whole: as ``.NAME.tmp`` beside it, then moved over any old one, so
        a reader never sees a part of it."""

    def create_new(self, path: str, text: str) -> bool:
        """Create ``path`` with ``text`` only if it does not exist; whether it was created.

        On the local file system an exclusive create (``O_EXCL``), atomic between processes; on
        HDFS Hadoop's create without overwrite, atomic in the NameNode; on S3 a conditional put
        (``If-None-Match: *``) where the connector has it (:attr:`exclusive`). Elsewhere on an
        object store a look then a put: two runs started at the same instant could both succeed.
        """

    @property
    def exclusive(self) -> bool:
        """Whether :meth:`create_new` is atomic between processes."""

    def move_into(self, source: str, target: str) -> None:
        """Move every file of folder ``source`` into folder ``target`` (a file there of the same
        name is replaced), then remove ``source``: finishes a folder rename that an object
        store, copying file by file, was doing when its run died."""

    def abort_uploads(self, path: str) -> int:
        """Abort the unfinished multipart uploads under ``path`` (an object store's; a killed
        writer leaves them, invisible to listings but stored); how many."""

    def data_files(self, path: str) -> List[str]:
        """The data files of a written table folder (Spark's ``part-*`` files), recursively."""


def files_for(spark, root: str) -> Files:
    """The files of output ``root``: through the session's Hadoop FileSystem API in classic mode;
    the local file system with no session (a local output read without Spark) or over Spark
    Connect, whose client has no Hadoop API (:func:`check_connect` made sure the output is a
    local path the server shares)."""
    if spark is None or is_connect(spark):
        return LocalFiles(root)
    return HadoopFiles(spark, root)


#: The schemes of object stores (S3A, Google Cloud Storage's connector): a file is an object
#: written whole on close, a folder a prefix, a rename a copy of each object then a delete.
OBJECT_STORES = ("s3a", "gs")
#: Hadoop's option (3.4.2 on) for a create that the store refuses when the file is there.
CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite"


def _capable(fs, path, capability: str) -> bool:
    try:
        return bool(fs.hasPathCapability(path, capability))
    except Exception:  # noqa: BLE001 - a Hadoop without path capabilities has none of these
        return False


def _merge(files: Files, source: str, target: str, names: List[str]) -> None:
    """Move the files ``names`` (relative to ``source``) into ``target``, then remove ``source``."""
    for name in names:
        files.delete(f"{target}/{name}")
        files.rename(f"{source}/{name}", f"{target}/{name}")
    files.delete(source)


class _Output:
    def __init__(self, root: str):
        self.root = root

    @property
    def shown(self) -> str:
        return shown(self.root)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])


def _create_exclusive(local: str, text: str) -> bool:
    os.makedirs(os.path.dirname(local), exist_ok=True)
    try:
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return True


class LocalFiles(_Output):
    """:class:`Files` on the local file system, through Python's own calls."""

    @staticmethod
    def _local(path: str) -> str:
        return urlparse(path).path if path.startswith("file:") else path

    def exists(self, path: str) -> bool:
        return os.path.exists(self._local(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._local(path))

    def list(self, path: str) -> List[str]:
        folder = self._local(path)
        return sorted(os.listdir(folder)) if os.path.isdir(folder) else []

    def delete(self, path: str) -> None:
        local = self._local(path)
        if os.path.isdir(local):
            shutil.rmtree(local)
        elif os.path.lexists(local):
            os.remove(local)

    def remove_if_empty(self, path: str) -> None:
        try:
            os.rmdir(self._local(path))
        except OSError:
            pass

    def rename(self, source: str, target: str) -> None:
        os.makedirs(os.path.dirname(self._local(target)), exist_ok=True)
        os.rename(self._local(source), self._local(target))

    def modified(self, path: str) -> Optional[float]:
        try:
            return os.stat(self._local(path)).st_mtime
        except OSError:  # gone meanwhile
            return None

    def read_text(self, path: str) -> Optional[str]:
        try:
            with open(self._local(path), encoding="utf-8") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def write_text(self, path: str, text: str) -> None:
        folder, name = path.rsplit("/", 1)
        tmp = f"{folder}/.{name}.tmp"
        os.makedirs(self._local(folder), exist_ok=True)
        with open(self._local(tmp), "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(self._local(tmp), self._local(path))

    def create_new(self, path: str, text: str) -> bool:
        return _create_exclusive(self._local(path), text)

    exclusive = True

    def move_into(self, source: str, target: str) -> None:
        _merge(self, source, target, self.data_files(source) + self._hidden(source))

    def _hidden(self, path: str) -> List[str]:
        base = self._local(path)
        return sorted(
            os.path.relpath(os.path.join(folder, n), base)
            for folder, _, names in os.walk(base)
            for n in names
            if n.startswith(("_", "."))
        )

    def abort_uploads(self, path: str) -> int:
        return 0

    def data_files(self, path: str) -> List[str]:
        base, found = self._local(path), []
        for folder, _, names in os.walk(base):
            rel = os.path.relpath(folder, base)
            found += [n if rel == "." else f"{rel}/{n}" for n in names if not n.startswith(("_", "."))]
        return sorted(found)


class HadoopFiles(_Output):
    """:class:`Files` through the session's Hadoop FileSystem API, so they land beside the tables
    on any Hadoop-compatible file system (``hdfs://``, ``s3a://``, a path on the default file
    system). On the local file system the raw one, so no ``.crc`` side files appear."""

    def __init__(self, spark, root: str):
        super().__init__(root)
        self._jvm = spark._jvm
        self._path = self._jvm.org.apache.hadoop.fs.Path
        fs = self._path(root).getFileSystem(spark._jsc.hadoopConfiguration())
        self.local = fs.getScheme() == "file"
        self._fs = fs.getRawFileSystem() if self.local else fs
        #: An object store: a file is one object, whole once its stream closes; a rename a copy.
        self.object_store = fs.getScheme() in OBJECT_STORES
        # S3A from Hadoop 3.4.2 with fs.s3a.create.conditional.enabled: a create that fails when
        # the object is there, decided by the store (If-None-Match: *), not by a look before.
        self._conditional = self.object_store and _capable(fs, self._path(root), CONDITIONAL_CREATE)

    @property
    def exclusive(self) -> bool:
        return not self.object_store or self._conditional

    def exists(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path)))

    def is_dir(self, path: str) -> bool:
        return bool(self._fs.exists(self._path(path))) and bool(self._fs.getFileStatus(self._path(path)).isDirectory())

    def list(self, path: str) -> List[str]:
        if not self._fs.exists(self._path(path)):
            return []
        return sorted(status.getPath().getName() for status in self._fs.listStatus(self._path(path)))

    def delete(self, path: str) -> None:
        self._fs.delete(self._path(path), True)

    def remove_if_empty(self, path: str) -> None:
        # Looked at before the delete: a delete refused raises, and Py4J's walk over the Java
        # exception costs some forty calls to the JVM where these cost three.
        p = self._path(path)
        try:
            if self._fs.exists(p) and len(self._fs.listStatus(p)) == 0:
                self._fs.delete(p, False)
        except Exception:  # noqa: BLE001 - Py4J wraps the IOException of a folder filled meanwhile
            pass

    def rename(self, source: str, target: str) -> None:
        target_path = self._path(target)
        self._fs.mkdirs(target_path.getParent())
        if not self._fs.rename(self._path(source), target_path):
            raise OSError(f"could not rename {source} to {target}")

    def modified(self, path: str) -> Optional[float]:
        try:
            return self._fs.getFileStatus(self._path(path)).getModificationTime() / 1000.0
        except Exception:  # noqa: BLE001 - gone meanwhile (Hadoop's FileNotFoundException)
            return None

    def read_text(self, path: str) -> Optional[str]:
        p = self._path(path)
        if not self._fs.exists(p):
            return None
        stream = self._fs.open(p)
        try:
            reader = self._jvm.java.io.BufferedReader(self._jvm.java.io.InputStreamReader(stream, "UTF-8"))
            lines = []
            line = reader.readLine()
            while line is not None:
                lines.append(line)
                line = reader.readLine()
            return "\n".join(lines) + ("\n" if lines else "")
        finally:
            stream.close()

    def write_text(self, path: str, text: str) -> None:
        if self.object_store:
            # One put: the object appears whole when the stream closes, replacing the old one
            # in one step (a rename there would be a copy, and the old file gone meanwhile).
            self._write(self._path(path), text, overwrite=True)
            return
        # Hadoop's rename does not replace a file: the old one is deleted just before, so a
        # reader sees the old file, then none, then the complete new one.
        folder, name = path.rsplit("/", 1)
        tmp = f"{folder}/.{name}.tmp"
        self._fs.mkdirs(self._path(folder))
        self._write(self._path(tmp), text, overwrite=True)
        if self._fs.exists(self._path(path)):
            self._fs.delete(self._path(path), False)
        if not self._fs.rename(self._path(tmp), self._path(path)):
            raise OSError(f"could not rename {tmp} to {path}")

    def create_new(self, path: str, text: str) -> bool:
        if self.local:
            # O_EXCL is atomic between processes; the raw local file system's create is not.
            return _create_exclusive(self._path(path).toUri().getPath(), text)
        p = self._path(path)
        if not self.object_store:
            self._fs.mkdirs(p.getParent())
        try:
            if self._conditional:
                builder = self._fs.createFile(p).overwrite(False).must(CONDITIONAL_CREATE, True)
                self._close_written(builder.build(), text)
            else:
                self._write(p, text, overwrite=False)
        except Exception as exc:  # noqa: BLE001 - Py4J wraps FileAlreadyExistsException
            # S3's refused condition: 412, which S3A raises as RemoteFileChangedException.
            if re.search(r"FileAlreadyExists|RemoteFileChanged|PreconditionFailed|\b412\b", str(exc)):
                return False
            if self._fs.exists(p):
                return False
            raise
        return True

    def _write(self, path, text: str, overwrite: bool) -> None:
        self._close_written(self._fs.create(path, overwrite), text)

    @staticmethod
    def _close_written(stream, text: str) -> None:
        try:
            stream.write(bytearray(text.encode("utf-8")))
        finally:
            stream.close()

    def move_into(self, source: str, target: str) -> None:
        names, iterator = [], self._fs.listFiles(self._path(source), True)
        prefix = self._fs.makeQualified(self._path(source)).toString().rstrip("/") + "/"
        while iterator.hasNext():
            name = iterator.next().getPath().toString()
            names.append(name[len(prefix) :] if name.startswith(prefix) else name)
        _merge(self, source, target, sorted(names))

    def abort_uploads(self, path: str) -> int:
        p = self._path(path)
        if not self.object_store or not _capable(self._fs, p, "fs.capability.multipart.uploader"):
            return 0
        uploader = self._fs.createMultipartUploader(p).build()
        try:
            return int(uploader.abortUploadsUnderPath(p).get())
        finally:
            uploader.close()

    def data_files(self, path: str) -> List[str]:
        found = []
        iterator = self._fs.listFiles(self._path(path), True)
        prefix = self._fs.makeQualified(self._path(path)).toString().rstrip("/") + "/"
        while iterator.hasNext():
            name = iterator.next().getPath().toString()
            rel = name[len(prefix) :] if name.startswith(prefix) else name
            if not rel.split("/")[-1].startswith(("_", ".")):
                found.append(rel)
        return sorted(found)
