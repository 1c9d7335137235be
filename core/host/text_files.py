"""Text files as they are on disk: which encoding a file is in (UTF-8 with or without BOM, UTF-16
with BOM, Windows-1252 / Latin-1), whether it is text at all, and atomic writes that keep a file's
encoding, line endings and mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from core.state_home import make_user_dirs, user_file_mode

__all__ = ["BinaryFileError", "TextFile", "binary_kind", "decode_text", "encode_text", "read_text_file", "write_atomic"]


class BinaryFileError(UnicodeError):
    """The file is not text; the message says what it looks like (a UnicodeError: it does not decode)."""


@dataclass(frozen=True, slots=True)
class TextFile:
    """A text file's content and the encoding to write it back in."""

    text: str
    encoding: str = "utf-8"  # utf-8, utf-8-sig, utf-16-le, utf-16-be, cp1252 or latin-1


_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


_MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x1f\x8b", "gzip data"),
    (b"SQLite format 3", "an SQLite database"),
)


# Bytes that plain text holds: printable ASCII, high bytes, tab, newlines, form feed, escape.
_TEXT_BYTES = bytes([7, 8, 9, 10, 12, 13, 27, *range(32, 127), *range(128, 256)])


def binary_kind(head: bytes) -> str | None:
    """What the first bytes of a file look like when it is not text, else None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with a BOM is text full of NULs
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if b"\x00" in head:
        return "binary data"
    if head and len(head.translate(None, _TEXT_BYTES)) > len(head) * 0.3:
        return "binary data"
    return None


def decode_text(data: bytes) -> TextFile:
    """Text and encoding of a file's bytes; raises BinaryFileError for non-text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return TextFile(data[len(bom) :].decode(encoding.replace("-sig", "")), encoding)
            except UnicodeDecodeError:
                raise BinaryFileError(f"binary data (a {encoding} byte-order mark, then bytes that are not {encoding})") from None
    if kind := binary_kind(data[:8192]):
        raise BinaryFileError(kind)
    try:
        return TextFile(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    # Windows-1252 shows curly quotes where Latin-1 shows control codes; both round-trip bytes.
    try:
        return TextFile(data.decode("cp1252"), "cp1252")
    except UnicodeDecodeError:
        return TextFile(data.decode("latin-1"), "latin-1")


def encode_text(text: str, encoding: str) -> bytes:
    """Bytes for ``text`` in ``encoding`` (BOM included where the encoding has one)."""
    if encoding == "utf-16-le":
        return b"\xff\xfe" + text.encode("utf-16-le")
    if encoding == "utf-16-be":
        return b"\xfe\xff" + text.encode("utf-16-be")
    return text.encode(encoding)


def read_text_file(path: Path) -> TextFile:
    """Read and decode a file from disk (no newline translation)."""
    with open(path, "rb") as handle:
        return decode_text(handle.read())


def write_atomic(path: Path, content: str | bytes, encoding: str = "utf-8", mode: int | None = None) -> None:
    """Write via a temporary file and rename, keeping the file's mode (or setting ``mode``)."""
    data = content if isinstance(content, bytes) else encode_text(content, encoding)
    path = Path(os.path.realpath(path))  # through a symlink to its target, never replacing the link
    make_user_dirs(path.parent)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = None
    final_mode = mode if mode is not None else user_file_mode()  # mkstemp makes 0600
    if _write_unnamed(path, data, final_mode):
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, final_mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _write_unnamed(path: Path, data: bytes, mode: int) -> bool:
    """Write ``data`` to ``path`` through a file with no name until it is whole (Linux O_TMPFILE):
    killed while writing, we leave nothing behind; only the instant between giving it a name and
    renaming it over ``path`` shows one. False where the file system cannot (then mkstemp)."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or not os.path.isdir("/proc/self/fd"):
        return False
    try:
        fd = os.open(path.parent, flag | os.O_WRONLY, 0o600)
    except OSError:
        return False
    tmp: str | None = None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
            os.fchmod(handle.fileno(), mode)
            for _ in range(100):
                candidate = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
                try:
                    os.link(f"/proc/self/fd/{handle.fileno()}", candidate, follow_symlinks=True)
                except FileExistsError:
                    continue
                except OSError:
                    return False  # no linking an unnamed file here (/proc hidden, say): mkstemp
                tmp = candidate
                break
            else:
                raise FileExistsError(f"no free temporary name beside {path}")
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    return True
