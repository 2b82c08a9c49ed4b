"""The cluster secret file: what a node uses when no ``secret`` is configured.

There is no empty key. A node with no ``secret`` reads a per-user secret file,
like Erlang's ``~/.erlang.cookie``:

* the path is ``ClusterConfig.secret_file`` when set, else the environment
  variable ``PYNENC_CPP_CLUSTER_SECRET_FILE``, else
  ``$XDG_CONFIG_HOME/pynenc-cpp/cluster-secret`` (``~/.config/pynenc-cpp/cluster-secret``);
* when it does not exist it is created on first use with 32 random bytes
  (URL-safe base64) and mode 0600, in a directory created with mode 0700; two
  processes creating it at once end with the same content (an atomic link);
* an existing file must be a regular file owned by the current user, readable by
  that user only (no group or other permission bits), and not empty; anything
  else raises :class:`SecretFileError` naming the path and the fix. The secret
  itself never appears in an error or a log line.

Every process of one user on one machine therefore shares a cluster secret
without configuration, and another user's processes do not have it. Nodes on
other machines need the same secret: copy the file (mode 0600) or set ``secret``.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

ENV_VAR = "PYNENC_CPP_CLUSTER_SECRET_FILE"
MAX_SECRET_BYTES = 4096


class SecretFileError(ValueError):
    """The cluster secret file is missing and cannot be created, or is unsafe or unusable."""


def default_secret_path() -> Path:
    """The secret file used when neither ``secret`` nor ``secret_file`` is configured."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME", "").strip()
    root = Path(base) if base else Path.home() / ".config"
    return root / "pynenc-cpp" / "cluster-secret"


def resolve_secret(secret: str, secret_file: str) -> str:
    """``secret`` when set, else the content of the secret file (created if missing)."""
    if secret:
        return secret
    path = Path(secret_file).expanduser() if secret_file else default_secret_path()
    return load_or_create_secret(path)


def load_or_create_secret(path: Path) -> str:
    """The secret kept in ``path``; creates the file (mode 0600) when it does not exist."""
    try:
        return _read_checked(path)
    except FileNotFoundError:
        pass
    _create(path)
    try:
        return _read_checked(path)
    except FileNotFoundError:
        raise SecretFileError(
            f"cluster secret file {path}: vanished right after creation"
        ) from None


def _read_checked(path: Path) -> str:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise SecretFileError(
                f"cluster secret file {path} is a symbolic link: point "
                f"secret_file (or {ENV_VAR}) at the file itself"
            ) from None
        raise SecretFileError(
            f"cluster secret file {path}: cannot open it ({exc.strerror}); "
            f"set secret, secret_file or {ENV_VAR}"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SecretFileError(f"cluster secret file {path} is not a regular file")
        if st.st_uid != os.geteuid():
            raise SecretFileError(
                f"cluster secret file {path} is owned by uid {st.st_uid}, not by the current "
                f"user (uid {os.geteuid()}): each user keeps their own secret file"
            )
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise SecretFileError(
                f"cluster secret file {path} has mode {mode:04o}: it must be readable by its "
                f"owner only (run: chmod 600 {path})"
            )
        data = os.read(fd, MAX_SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_SECRET_BYTES:
        raise SecretFileError(f"cluster secret file {path} is over {MAX_SECRET_BYTES} bytes")
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise SecretFileError(f"cluster secret file {path} is not UTF-8 text") from None
    if not text:
        raise SecretFileError(
            f"cluster secret file {path} is empty: delete it to have a new secret made, "
            "or write the cluster's secret into it"
        )
    return text


def _create(path: Path) -> None:
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise SecretFileError(
            f"cluster secret file {path}: cannot create its directory ({exc.strerror}); "
            f"set secret, secret_file or {ENV_VAR}"
        ) from None
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError as exc:
        raise SecretFileError(
            f"cluster secret file {path}: cannot create it ({exc.strerror}); "
            f"set secret, secret_file or {ENV_VAR}"
        ) from None
    try:
        try:
            os.write(fd, (secrets.token_urlsafe(32) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # atomic, and never replaces a file another process made
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
