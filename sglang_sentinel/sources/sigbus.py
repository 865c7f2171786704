"""Surviving SIGBUS from a journal file truncated under libsystemd's mmap, as journalctl does.

libsystemd maps journal files; reading a page past the end of a file that shrank under it
raises SIGBUS, which kills a process that does not handle it. journalctl and journald install a
handler (systemd's sigbus_install()) that maps an anonymous zero page over the faulting page and
notes the fault: the read then sees zeros, which libsystemd takes for a corrupt object and skips.
This is the same handler through ctypes (no compiled extension): it runs only on a fault raised
by the reading thread itself, so the interpreter is in a consistent state when it runs.
"""

from __future__ import annotations

import ctypes
import mmap
import signal
import threading
from typing import Any

_SA_SIGINFO = 4
_SA_NODEFER = 0x40000000
_MAP_FIXED = 0x10


class _SigInfo(ctypes.Structure):
    # Linux siginfo_t: si_signo, si_errno, si_code, padding to 8 bytes, then the union whose
    # first member for SIGBUS is the faulting address.
    _fields_ = [
        ("si_signo", ctypes.c_int),
        ("si_errno", ctypes.c_int),
        ("si_code", ctypes.c_int),
        ("pad", ctypes.c_int),
        ("si_addr", ctypes.c_void_p),
    ]


_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(_SigInfo), ctypes.c_void_p)


class _SigAction(ctypes.Structure):
    # glibc's struct sigaction on Linux (x86-64, aarch64): handler, 1024-bit mask, flags,
    # restorer.
    _fields_ = [
        ("sa_sigaction", _HANDLER),
        ("sa_mask", ctypes.c_ulong * 16),
        ("sa_flags", ctypes.c_int),
        ("sa_restorer", ctypes.c_void_p),
    ]


class _State:
    """The handler and its fault count; one per process (a signal handler is process-wide)."""

    def __init__(self) -> None:
        self.faults = 0
        self.installed = False
        self.lock = threading.Lock()
        self.libc: Any = None
        self.handler: Any = None


_state = _State()


def _on_sigbus(signum: int, info: Any, context: int) -> None:
    libc = _state.libc
    addr = int(info.contents.si_addr or 0)
    page = addr & ~(mmap.PAGESIZE - 1)
    libc.mmap(
        page,
        mmap.PAGESIZE,
        mmap.PROT_READ | mmap.PROT_WRITE,
        mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED,
        -1,
        0,
    )
    _state.faults += 1


def install() -> bool:
    """Install the handler once per process; False where it cannot be (then SIGBUS kills)."""
    with _state.lock:
        if _state.installed:
            return True
        try:
            libc = _libc()
            libc.mmap.restype = ctypes.c_void_p
            libc.mmap.argtypes = [
                ctypes.c_void_p,
                ctypes.c_size_t,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_long,
            ]
            _state.libc = libc
            _state.handler = _HANDLER(_on_sigbus)  # kept referenced for the process's life
            action = _SigAction()
            action.sa_sigaction = _state.handler
            action.sa_flags = _SA_SIGINFO | _SA_NODEFER
            if libc.sigaction(signal.SIGBUS, ctypes.byref(action), None) != 0:
                return False
        except (OSError, AttributeError):
            return False
        _state.installed = True
        return True


def _libc() -> ctypes.CDLL:
    try:
        # glibc's name, which is what find_library finds there; it runs `ldconfig -p` in a
        # child process (and its import loads subprocess), a cost every scan would pay.
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        from ctypes.util import find_library

        return ctypes.CDLL(find_library("c") or "libc.so.6", use_errno=True)


def faults() -> int:
    """SIGBUS faults survived so far in this process."""
    return _state.faults
