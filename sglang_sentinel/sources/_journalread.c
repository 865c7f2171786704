/* The journal reader's hot path in C, against libsystemd's public API (sd-journal.h).
 *
 * An optional extension: journal.py uses it when it is built and falls back to
 * python-systemd's Reader when it is not; both read the same fields of every entry
 * (tests/sources/test_journalread.py). The Reader type here opens its own sd_journal handle and offers
 * the subset of python-systemd's Reader methods the journal source calls, with the same
 * results and errors (OSError with the errno, KeyError for a missing field), plus `read_run`.
 *
 * Why: sd_journal_get_data() walks the entry's fields from the first one on every call, and
 * MESSAGE, a new data object, usually comes last. Reading MESSAGE and the invocation id with two
 * calls pays two walks; one sd_journal_enumerate_data() walk gives both. `read_run` does that for
 * a run of entries of one invocation in one call, which is nearly every line of a busy unit.
 *
 * A walk decompresses every compressed field it passes (journald compresses fields of 512 bytes
 * or more: a long _CMDLINE), as sd_journal_get_data() does too (it decompresses a prefix of each
 * to compare the name). `walk_threshold` lowers the data threshold during the walk, so that
 * libsystemd decompresses at most that much of a field (a MESSAGE that long is then read again
 * whole); measured on systemd 252 with zstd, that is no faster (1.03x the time at 512 bytes;
 * at 64 nearly every MESSAGE is read twice), so it is off (0) unless set.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-journal.h>

#define WALK_THRESHOLD 0

/* read_run's status: why the run ended (a negative value: -errno of sd_journal_next). */
#define RUN_LIMIT 0  /* `limit` entries read; the reader is on the last of them */
#define RUN_END 1    /* no entry after the last one read */
#define RUN_CHECK 2  /* the last entry's realtime is stop_at or end_at: the caller tests its cursor */
#define RUN_UNREAD 3 /* the reader is on an entry not in the run (another invocation, or one the
                        walk could not read): the caller reads it the per-field way */

typedef struct {
        PyObject_HEAD
        sd_journal *j;
        size_t threshold; /* the data threshold the caller set (0: none) */
        size_t walk;      /* the data threshold of read_run's walk (0: the caller's) */
} Reader;

static PyObject *set_error(int r) {
        if (r == -ENOMEM)
                return PyErr_NoMemory();
        errno = -r;
        return PyErr_SetFromErrno(PyExc_OSError);
}

static int open_check(Reader *self) {
        if (self->j == NULL) {
                PyErr_SetString(PyExc_ValueError, "the journal reader is closed");
                return -1;
        }
        return 0;
}

#define CHECK_OPEN(self)                  \
        do {                              \
                if (open_check(self) < 0) \
                        return NULL;      \
        } while (0)

static void Reader_dealloc(Reader *self) {
        if (self->j != NULL)
                sd_journal_close(self->j);
        Py_TYPE(self)->tp_free((PyObject *) self);
}

/* Reader(flags=0, path=None, files=None): as python-systemd's Reader opens a journal. */
static int Reader_init(Reader *self, PyObject *args, PyObject *kwds) {
        static char *kwlist[] = {"flags", "path", "files", NULL};
        int flags = 0, r;
        PyObject *path = Py_None, *files = Py_None;

        if (!PyArg_ParseTupleAndKeywords(args, kwds, "|iOO:Reader", kwlist, &flags, &path, &files))
                return -1;
        if (self->j != NULL) {
                sd_journal_close(self->j);
                self->j = NULL;
        }
        if (path != Py_None && files != Py_None) {
                PyErr_SetString(PyExc_ValueError, "path and files cannot be specified simultaneously");
                return -1;
        }
        if (path != Py_None) {
                PyObject *bytes = NULL;
                if (!PyUnicode_FSConverter(path, &bytes))
                        return -1;
                Py_BEGIN_ALLOW_THREADS
                r = sd_journal_open_directory(&self->j, PyBytes_AS_STRING(bytes), flags);
                Py_END_ALLOW_THREADS
                Py_DECREF(bytes);
        } else if (files != Py_None) {
                PyObject *seq = PySequence_Fast(files, "files must be a sequence of paths");
                Py_ssize_t n, i;
                PyObject **owned;
                const char **paths;
                if (seq == NULL)
                        return -1;
                n = PySequence_Fast_GET_SIZE(seq);
                owned = PyMem_Calloc((size_t) n + 1, sizeof(PyObject *));
                paths = PyMem_Calloc((size_t) n + 1, sizeof(char *));
                if (owned == NULL || paths == NULL) {
                        PyMem_Free(owned);
                        PyMem_Free(paths);
                        Py_DECREF(seq);
                        PyErr_NoMemory();
                        return -1;
                }
                r = 0;
                for (i = 0; i < n; i++) {
                        if (!PyUnicode_FSConverter(PySequence_Fast_GET_ITEM(seq, i), &owned[i])) {
                                r = -1;
                                break;
                        }
                        paths[i] = PyBytes_AS_STRING(owned[i]);
                }
                if (r == 0) {
                        Py_BEGIN_ALLOW_THREADS
                        r = sd_journal_open_files(&self->j, paths, flags);
                        Py_END_ALLOW_THREADS
                        if (r < 0) {
                                set_error(r);
                                r = -2;
                        }
                }
                for (i = 0; i < n; i++)
                        Py_XDECREF(owned[i]);
                PyMem_Free(owned);
                PyMem_Free(paths);
                Py_DECREF(seq);
                if (r < 0)
                        return -1;
        } else {
                Py_BEGIN_ALLOW_THREADS
                r = sd_journal_open(&self->j, flags);
                Py_END_ALLOW_THREADS
        }
        if (r < 0) {
                self->j = NULL;
                set_error(r);
                return -1;
        }
        /* libsystemd's default, as python-systemd leaves it */
        self->threshold = 64 * 1024;
        self->walk = WALK_THRESHOLD;
        r = sd_journal_set_data_threshold(self->j, self->threshold);
        if (r < 0) {
                set_error(r);
                return -1;
        }
        return 0;
}

static PyObject *Reader_close(Reader *self, PyObject *Py_UNUSED(ignored)) {
        if (self->j != NULL)
                sd_journal_close(self->j);
        self->j = NULL;
        Py_RETURN_NONE;
}

static PyObject *Reader_fileno(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int fd;
        CHECK_OPEN(self);
        fd = sd_journal_get_fd(self->j);
        if (fd < 0)
                return set_error(fd);
        return PyLong_FromLong(fd);
}

static PyObject *Reader_get_events(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_get_events(self->j);
        if (r < 0)
                return set_error(r);
        return PyLong_FromLong(r);
}

/* The timeout as python-systemd's get_timeout_ms gives it: ms from now, -1 for none. */
static PyObject *Reader_get_timeout_ms(Reader *self, PyObject *Py_UNUSED(ignored)) {
        uint64_t t, n;
        struct timespec ts;
        int r;
        CHECK_OPEN(self);
        r = sd_journal_get_timeout(self->j, &t);
        if (r < 0)
                return set_error(r);
        if (t == (uint64_t) -1)
                return PyLong_FromLong(-1);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        n = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
        return PyLong_FromLong(t > n ? (long) ((t - n + 999) / 1000) : 0);
}

static PyObject *Reader_process(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        Py_BEGIN_ALLOW_THREADS
        r = sd_journal_process(self->j);
        Py_END_ALLOW_THREADS
        if (r < 0)
                return set_error(r);
        return PyLong_FromLong(r);
}

static int add_one_match(Reader *self, const char *data, Py_ssize_t len) {
        int r = sd_journal_add_match(self->j, data, (size_t) len);
        if (r == -EINVAL) {
                PyErr_SetString(PyExc_ValueError, "Invalid match");
                return -1;
        }
        if (r < 0) {
                set_error(r);
                return -1;
        }
        return 0;
}

/* add_match("FIELD=value", ..., FIELD=value, ...), as python-systemd's Reader.add_match. */
static PyObject *Reader_add_match(Reader *self, PyObject *args, PyObject *kwds) {
        Py_ssize_t i, len;
        PyObject *key, *value;
        const char *data;
        CHECK_OPEN(self);
        for (i = 0; i < PyTuple_GET_SIZE(args); i++) {
                PyObject *arg = PyTuple_GET_ITEM(args, i);
                if (PyUnicode_Check(arg))
                        data = PyUnicode_AsUTF8AndSize(arg, &len);
                else if (PyBytes_Check(arg)) {
                        data = PyBytes_AS_STRING(arg);
                        len = PyBytes_GET_SIZE(arg);
                } else {
                        PyErr_SetString(PyExc_TypeError, "a match is a str or bytes");
                        return NULL;
                }
                if (data == NULL || add_one_match(self, data, len) < 0)
                        return NULL;
        }
        i = 0;
        while (kwds != NULL && PyDict_Next(kwds, &i, &key, &value)) {
                PyObject *line;
                if (PyBytes_Check(value)) {
                        PyObject *k = PyUnicode_AsUTF8String(key);
                        if (k == NULL)
                                return NULL;
                        line = PyBytes_FromFormat("%s=", PyBytes_AS_STRING(k));
                        Py_DECREF(k);
                        if (line != NULL)
                                PyBytes_Concat(&line, value);
                } else {
                        PyObject *text = PyUnicode_FromFormat("%U=%S", key, value);
                        line = text != NULL ? PyUnicode_AsUTF8String(text) : NULL;
                        Py_XDECREF(text);
                }
                if (line == NULL)
                        return NULL;
                if (add_one_match(self, PyBytes_AS_STRING(line), PyBytes_GET_SIZE(line)) < 0) {
                        Py_DECREF(line);
                        return NULL;
                }
                Py_DECREF(line);
        }
        Py_RETURN_NONE;
}

static PyObject *Reader_add_disjunction(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_add_disjunction(self->j);
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

static PyObject *Reader_add_conjunction(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_add_conjunction(self->j);
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

static PyObject *Reader_flush_matches(Reader *self, PyObject *Py_UNUSED(ignored)) {
        CHECK_OPEN(self);
        sd_journal_flush_matches(self->j);
        Py_RETURN_NONE;
}

static PyObject *Reader_seek_head(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_seek_head(self->j);
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

static PyObject *Reader_seek_tail(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_seek_tail(self->j);
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

/* seek_realtime(seconds): a float in seconds (or an int in µs), as python-systemd's. */
static PyObject *Reader_seek_realtime(Reader *self, PyObject *arg) {
        unsigned long long usec;
        int r;
        CHECK_OPEN(self);
        if (PyLong_Check(arg))
                usec = PyLong_AsUnsignedLongLong(arg);
        else {
                double seconds = PyFloat_AsDouble(arg);
                if (seconds == -1.0 && PyErr_Occurred())
                        return NULL;
                usec = (unsigned long long) (long long) (seconds * 1000000);
        }
        if (PyErr_Occurred())
                return NULL;
        r = sd_journal_seek_realtime_usec(self->j, usec);
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

static PyObject *Reader_seek_cursor(Reader *self, PyObject *arg) {
        const char *cursor;
        int r;
        CHECK_OPEN(self);
        cursor = PyUnicode_AsUTF8(arg);
        if (cursor == NULL)
                return NULL;
        r = sd_journal_seek_cursor(self->j, cursor);
        if (r == -EINVAL) {
                PyErr_SetString(PyExc_ValueError, "Invalid cursor");
                return NULL;
        }
        if (r < 0)
                return set_error(r);
        Py_RETURN_NONE;
}

static PyObject *Reader_test_cursor(Reader *self, PyObject *arg) {
        const char *cursor;
        int r;
        CHECK_OPEN(self);
        cursor = PyUnicode_AsUTF8(arg);
        if (cursor == NULL)
                return NULL;
        r = sd_journal_test_cursor(self->j, cursor);
        if (r < 0)
                return set_error(r);
        return PyBool_FromLong(r);
}

static PyObject *Reader_get_cursor(Reader *self, PyObject *Py_UNUSED(ignored)) {
        char *cursor = NULL;
        PyObject *out;
        int r;
        CHECK_OPEN(self);
        r = sd_journal_get_cursor(self->j, &cursor);
        if (r < 0)
                return set_error(r);
        out = PyUnicode_FromString(cursor);
        free(cursor);
        return out;
}

static PyObject *Reader_next(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_next(self->j);
        if (r < 0)
                return set_error(r);
        return PyBool_FromLong(r);
}

static PyObject *Reader_previous(Reader *self, PyObject *Py_UNUSED(ignored)) {
        int r;
        CHECK_OPEN(self);
        r = sd_journal_previous(self->j);
        if (r < 0)
                return set_error(r);
        return PyBool_FromLong(r);
}

static PyObject *Reader_get_realtime(Reader *self, PyObject *Py_UNUSED(ignored)) {
        uint64_t t;
        int r;
        CHECK_OPEN(self);
        r = sd_journal_get_realtime_usec(self->j, &t);
        if (r < 0)
                return set_error(r);
        return PyLong_FromUnsignedLongLong(t);
}

/* (µs, the 16 bytes of the boot id), as python-systemd's _get_monotonic (a plain tuple). */
static PyObject *Reader_get_monotonic(Reader *self, PyObject *Py_UNUSED(ignored)) {
        uint64_t t;
        sd_id128_t boot;
        int r;
        CHECK_OPEN(self);
        r = sd_journal_get_monotonic_usec(self->j, &t, &boot);
        if (r < 0)
                return set_error(r);
        return Py_BuildValue("(Ky#)", (unsigned long long) t, (const char *) boot.bytes,
                             (Py_ssize_t) sizeof(boot.bytes));
}

/* _get(field) -> bytes after "FIELD="; KeyError when the entry has no such field. */
static PyObject *Reader_get(Reader *self, PyObject *arg) {
        const char *field;
        const void *data;
        size_t len;
        const char *eq;
        int r;
        CHECK_OPEN(self);
        field = PyUnicode_AsUTF8(arg);
        if (field == NULL)
                return NULL;
        r = sd_journal_get_data(self->j, field, &data, &len);
        if (r == -ENOENT) {
                PyErr_SetObject(PyExc_KeyError, arg);
                return NULL;
        }
        if (r == -EINVAL) {
                PyErr_SetString(PyExc_ValueError, "field name is not valid");
                return NULL;
        }
        if (r < 0)
                return set_error(r);
        eq = memchr(data, '=', len);
        if (eq == NULL) {
                PyErr_SetString(PyExc_OSError, "journal gave us a field without '='");
                return NULL;
        }
        eq++;
        return PyBytes_FromStringAndSize(eq, (Py_ssize_t) ((const char *) data + len - eq));
}

static PyObject *Reader_get_threshold(Reader *self, void *Py_UNUSED(closure)) {
        return PyLong_FromSize_t(self->threshold);
}

static int Reader_set_threshold(Reader *self, PyObject *value, void *Py_UNUSED(closure)) {
        size_t sz;
        int r;
        if (value == NULL || !PyLong_Check(value)) {
                PyErr_SetString(PyExc_TypeError, "data threshold must be an int");
                return -1;
        }
        if (open_check(self) < 0)
                return -1;
        sz = PyLong_AsSize_t(value);
        if (sz == (size_t) -1 && PyErr_Occurred())
                return -1;
        r = sd_journal_set_data_threshold(self->j, sz);
        if (r < 0) {
                set_error(r);
                return -1;
        }
        self->threshold = sz;
        return 0;
}

#define MESSAGE_FIELD "MESSAGE="
#define INVOCATION_FIELD "_SYSTEMD_INVOCATION_ID="

#define INVOCATION_MAX 64 /* an invocation id is 32 hex digits; a longer value never matches */
#define PY_ERROR (-10000)  /* a Python exception is set */

/* One walk over the current entry, at the data threshold `walk_threshold` (the caller's is
 * restored after): its first MESSAGE as bytes in *msg (NULL when absent) and its first
 * _SYSTEMD_INVOCATION_ID copied to inv (*inv_len -1 when absent, longer than INVOCATION_MAX:
 * cut). A MESSAGE the walk's threshold may have cut is read again whole. 0, -errno when
 * libsystemd failed, PY_ERROR. */
static int walk(Reader *self, size_t walk_threshold, PyObject **msg, char *inv, Py_ssize_t *inv_len) {
        sd_journal *j = self->j;
        const void *data;
        size_t len;
        int r, cut = 0;
        const size_t mlen = sizeof(MESSAGE_FIELD) - 1, ilen = sizeof(INVOCATION_FIELD) - 1;
        int lowered = walk_threshold != self->threshold;

        *msg = NULL;
        *inv_len = -1;
        if (lowered)
                sd_journal_set_data_threshold(j, walk_threshold);
        sd_journal_restart_data(j);
        while ((r = sd_journal_enumerate_data(j, &data, &len)) > 0) {
                const char *d = data;
                if (*msg == NULL && len >= mlen && d[0] == 'M' && memcmp(d, MESSAGE_FIELD, mlen) == 0) {
                        /* copied at once: the next enumerate_data may reuse the buffer */
                        *msg = PyBytes_FromStringAndSize(d + mlen, (Py_ssize_t) (len - mlen));
                        if (*msg == NULL) {
                                r = PY_ERROR;
                                break;
                        }
                        cut = lowered && len >= walk_threshold;
                        if (*inv_len >= 0)
                                break;
                } else if (*inv_len < 0 && len >= ilen && d[0] == '_' &&
                           memcmp(d, INVOCATION_FIELD, ilen) == 0) {
                        *inv_len = (Py_ssize_t) (len - ilen);
                        if (*inv_len > INVOCATION_MAX)
                                *inv_len = INVOCATION_MAX + 1; /* cut: compares unequal */
                        memcpy(inv, d + ilen, (size_t) (*inv_len > INVOCATION_MAX ? INVOCATION_MAX : *inv_len));
                        if (*msg != NULL)
                                break;
                }
        }
        if (lowered)
                sd_journal_set_data_threshold(j, self->threshold);
        if (r >= 0 && cut) {
                r = sd_journal_get_data(j, "MESSAGE", &data, &len);
                if (r >= 0) {
                        Py_DECREF(*msg);
                        *msg = PyBytes_FromStringAndSize((const char *) data + mlen, (Py_ssize_t) (len - mlen));
                        if (*msg == NULL)
                                r = PY_ERROR;
                }
        }
        if (r < 0) {
                Py_CLEAR(*msg);
                return r;
        }
        return 0;
}

static size_t walk_threshold_of(Reader *self) {
        if (self->walk == 0)
                return self->threshold;
        return self->threshold == 0 || self->threshold > self->walk ? self->walk : self->threshold;
}

/* read_run(context, limit, stop_at, end_at) -> (messages, realtimes, status)
 *
 * Reads on from the current entry while each next entry's _SYSTEMD_INVOCATION_ID equals
 * `context` (bytes): the raw MESSAGE (b"" when absent) and realtime of each, at most `limit`.
 * It stops after an entry whose realtime equals `stop_at` or `end_at` (RUN_CHECK), and before
 * one of another invocation (RUN_UNREAD: the reader is on it, unread). See RUN_* above.
 */
static PyObject *Reader_read_run(Reader *self, PyObject *args) {
        const char *context;
        Py_ssize_t context_len, limit, n = 0;
        long long stop_at, end_at;
        PyObject *messages = NULL, *realtimes = NULL;
        int status = RUN_LIMIT, r;
        size_t walk_threshold;

        if (!PyArg_ParseTuple(args, "y#nLL:read_run", &context, &context_len, &limit, &stop_at, &end_at))
                return NULL;
        CHECK_OPEN(self);
        messages = PyList_New(0);
        realtimes = PyList_New(0);
        if (messages == NULL || realtimes == NULL)
                goto fail;
        walk_threshold = walk_threshold_of(self);
        while (n < limit) {
                uint64_t rt;
                PyObject *msg, *item;
                char inv[INVOCATION_MAX];
                Py_ssize_t inv_len;

                r = sd_journal_next(self->j);
                if (r < 0) {
                        status = r;
                        break;
                }
                if (r == 0) {
                        status = RUN_END;
                        break;
                }
                if (sd_journal_get_realtime_usec(self->j, &rt) < 0) {
                        status = RUN_UNREAD;
                        break;
                }
                r = walk(self, walk_threshold, &msg, inv, &inv_len);
                if (r == PY_ERROR)
                        goto fail;
                if (r < 0 || inv_len != context_len || memcmp(inv, context, (size_t) inv_len) != 0) {
                        Py_XDECREF(msg);
                        status = RUN_UNREAD;
                        break;
                }
                if (msg == NULL && (msg = PyBytes_FromStringAndSize("", 0)) == NULL)
                        goto fail;
                if (PyList_Append(messages, msg) < 0) {
                        Py_DECREF(msg);
                        goto fail;
                }
                Py_DECREF(msg);
                item = PyLong_FromUnsignedLongLong(rt);
                if (item == NULL || PyList_Append(realtimes, item) < 0) {
                        Py_XDECREF(item);
                        goto fail;
                }
                Py_DECREF(item);
                n++;
                if ((long long) rt == stop_at || (long long) rt == end_at) {
                        status = RUN_CHECK;
                        break;
                }
        }
        return Py_BuildValue("(NNi)", messages, realtimes, status);
fail:
        Py_XDECREF(messages);
        Py_XDECREF(realtimes);
        return NULL;
}

/* fields() -> (MESSAGE, _SYSTEMD_INVOCATION_ID) of the current entry as read_run reads them
 * (each None when absent): what tests/sources/test_journalread.py compares with _get(). */
static PyObject *Reader_fields(Reader *self, PyObject *Py_UNUSED(ignored)) {
        PyObject *msg;
        char inv[INVOCATION_MAX];
        Py_ssize_t inv_len;
        int r;
        CHECK_OPEN(self);
        r = walk(self, walk_threshold_of(self), &msg, inv, &inv_len);
        if (r == PY_ERROR)
                return NULL;
        if (r < 0)
                return set_error(r);
        if (msg == NULL) {
                msg = Py_None;
                Py_INCREF(msg);
        }
        if (inv_len < 0)
                return Py_BuildValue("(NO)", msg, Py_None);
        if (inv_len > INVOCATION_MAX) {
                /* read_run never takes one that long for a run: the whole value, the slow way */
                const void *data;
                size_t len;
                r = sd_journal_get_data(self->j, "_SYSTEMD_INVOCATION_ID", &data, &len);
                if (r < 0) {
                        Py_DECREF(msg);
                        return set_error(r);
                }
                return Py_BuildValue("(Ny#)", msg, (const char *) data + sizeof(INVOCATION_FIELD) - 1,
                                     (Py_ssize_t) (len - (sizeof(INVOCATION_FIELD) - 1)));
        }
        return Py_BuildValue("(Ny#)", msg, inv, inv_len);
}

static PyMethodDef Reader_methods[] = {
        {"close", (PyCFunction) Reader_close, METH_NOARGS, NULL},
        {"fileno", (PyCFunction) Reader_fileno, METH_NOARGS, NULL},
        {"get_events", (PyCFunction) Reader_get_events, METH_NOARGS, NULL},
        {"get_timeout_ms", (PyCFunction) Reader_get_timeout_ms, METH_NOARGS, NULL},
        {"process", (PyCFunction) Reader_process, METH_NOARGS, NULL},
        {"add_match", (PyCFunction) (void (*)(void)) Reader_add_match, METH_VARARGS | METH_KEYWORDS, NULL},
        {"add_disjunction", (PyCFunction) Reader_add_disjunction, METH_NOARGS, NULL},
        {"add_conjunction", (PyCFunction) Reader_add_conjunction, METH_NOARGS, NULL},
        {"flush_matches", (PyCFunction) Reader_flush_matches, METH_NOARGS, NULL},
        {"seek_head", (PyCFunction) Reader_seek_head, METH_NOARGS, NULL},
        {"seek_tail", (PyCFunction) Reader_seek_tail, METH_NOARGS, NULL},
        {"seek_realtime", (PyCFunction) Reader_seek_realtime, METH_O, NULL},
        {"seek_cursor", (PyCFunction) Reader_seek_cursor, METH_O, NULL},
        {"test_cursor", (PyCFunction) Reader_test_cursor, METH_O, NULL},
        {"_get_cursor", (PyCFunction) Reader_get_cursor, METH_NOARGS, NULL},
        {"_next", (PyCFunction) Reader_next, METH_NOARGS, NULL},
        {"_previous", (PyCFunction) Reader_previous, METH_NOARGS, NULL},
        {"_get_realtime", (PyCFunction) Reader_get_realtime, METH_NOARGS, NULL},
        {"_get_monotonic", (PyCFunction) Reader_get_monotonic, METH_NOARGS, NULL},
        {"_get", (PyCFunction) Reader_get, METH_O, NULL},
        {"read_run", (PyCFunction) Reader_read_run, METH_VARARGS, NULL},
        {"fields", (PyCFunction) Reader_fields, METH_NOARGS, NULL},
        {NULL, NULL, 0, NULL},
};

static PyObject *Reader_get_walk(Reader *self, void *Py_UNUSED(closure)) {
        return PyLong_FromSize_t(self->walk);
}

static int Reader_set_walk(Reader *self, PyObject *value, void *Py_UNUSED(closure)) {
        size_t sz;
        if (value == NULL || !PyLong_Check(value)) {
                PyErr_SetString(PyExc_TypeError, "walk threshold must be an int");
                return -1;
        }
        sz = PyLong_AsSize_t(value);
        if (sz == (size_t) -1 && PyErr_Occurred())
                return -1;
        self->walk = sz;
        return 0;
}

static PyGetSetDef Reader_getset[] = {
        {"walk_threshold", (getter) Reader_get_walk, (setter) Reader_set_walk,
         "read_run's data threshold while it walks an entry (0: the data threshold)", NULL},
        {"data_threshold", (getter) Reader_get_threshold, (setter) Reader_set_threshold, NULL, NULL},
        {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ReaderType = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "sglang_sentinel.sources._journalread.Reader",
        .tp_basicsize = sizeof(Reader),
        .tp_dealloc = (destructor) Reader_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "A journal reader with its own sd_journal handle (see the module's comment).",
        .tp_methods = Reader_methods,
        .tp_getset = Reader_getset,
        .tp_init = (initproc) Reader_init,
        .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
        PyModuleDef_HEAD_INIT, "_journalread", NULL, -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__journalread(void) {
        PyObject *m;
        if (PyType_Ready(&ReaderType) < 0)
                return NULL;
        m = PyModule_Create(&module);
        if (m == NULL)
                return NULL;
        Py_INCREF(&ReaderType);
        if (PyModule_AddObject(m, "Reader", (PyObject *) &ReaderType) < 0 ||
            PyModule_AddIntConstant(m, "RUN_LIMIT", RUN_LIMIT) < 0 ||
            PyModule_AddIntConstant(m, "RUN_END", RUN_END) < 0 ||
            PyModule_AddIntConstant(m, "RUN_CHECK", RUN_CHECK) < 0 ||
            PyModule_AddIntConstant(m, "RUN_UNREAD", RUN_UNREAD) < 0 ||
            PyModule_AddIntConstant(m, "WALK_THRESHOLD", WALK_THRESHOLD) < 0) {
                Py_DECREF(&ReaderType);
                Py_DECREF(m);
                return NULL;
        }
        return m;
}
