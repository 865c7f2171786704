/* The file source's hot path in C: a run of the common log-file lines of a block, cut apart.
 *
 * An optional extension: files.py uses it when it is built and cuts every line itself when
 * it is not (or SENTINEL_READER=python); both hand out the same lines
 * (tests/sources/test_fileread_exact.py runs both).
 *
 * Why: a busy SGLang server writes hundreds of thousands of lines, nearly all of one exact
 * shape; cutting each apart with bytes methods costs a dozen Python operations a line, about as
 * much as the rules and startups downstream. `run` cuts a run of them in one call and returns
 * their texts, times and end offsets; files.py hands them out one by one.
 *
 * The common line, and nothing else (any other line ends the run; files.py parses it exactly):
 *   json-file (moby's compact form, the fields in its order):
 *     {"log":"TEXT\n","stream":"stdout|stderr","time":"YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ"}
 *     TEXT's every backslash starts a \" (moby's escape of a quote), read as a quote, and
 *     every quote is one of those.
 *   CRI: YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ OUTPUT F TEXT
 * The time is read as files.parse_time_us reads it (microseconds; calendar.timegm's days, so
 * a day past the month's end runs on into the next; a month outside 1-12 or year 0 ends the
 * run, as Python's date refuses them).
 */
#define _GNU_SOURCE 1 /* memmem */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#define FMT_DOCKER 0
#define FMT_CRI 1

static const char SEP_ERR[] = "\\n\",\"stream\":\"stderr\",\"time\":\"";
static const char SEP_OUT[] = "\\n\",\"stream\":\"stdout\",\"time\":\"";
#define SEP_LEN 30  /* strlen(SEP_ERR) */
#define TS_LEN 30   /* YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ */
#define HEAD_LEN 8  /* {"log":" */
/* A json-file line's last bytes after TEXT: the separator, the time and "} */
#define TAIL_LEN (SEP_LEN + TS_LEN + 2)

static int digits(const char *p, int n, long long *out) {
        long long v = 0;
        for (int k = 0; k < n; k++) {
                if (p[k] < '0' || p[k] > '9')
                        return 0;
                v = v * 10 + (p[k] - '0');
        }
        *out = v;
        return 1;
}

/* Days from 1970-01-01 of year y, month m (1-12), day 1 (H. Hinnant's days_from_civil). */
static long long days_from_civil(long long y, long long m) {
        y -= m <= 2;
        long long era = y / 400;
        long long yoe = y - era * 400;
        long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5;
        long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

/* The time of YYYY-MM-DDTHH:MM:SS.NNNNNNNNNZ in unix microseconds; 0 when not that form. */
static int parse_ts(const char *p, long long *us) {
        long long y, mo, d, h, mi, s, frac, ns3;
        if (p[4] != '-' || p[7] != '-' || p[10] != 'T' || p[13] != ':' || p[16] != ':' ||
            p[19] != '.' || p[29] != 'Z')
                return 0;
        if (!digits(p, 4, &y) || !digits(p + 5, 2, &mo) || !digits(p + 8, 2, &d) ||
            !digits(p + 11, 2, &h) || !digits(p + 14, 2, &mi) || !digits(p + 17, 2, &s) ||
            !digits(p + 20, 6, &frac) || !digits(p + 26, 3, &ns3))
                return 0;
        if (y < 1 || mo < 1 || mo > 12)
                return 0;
        long long days = days_from_civil(y, mo) + d - 1;
        *us = (days * 86400 + h * 3600 + mi * 60 + s) * 1000000 + frac;
        return 1;
}

/* TEXT of a json-file line [p, e) (e at its newline) in the common form, unescaped; NULL and
 * no error when it is not that form. */
static PyObject *docker_text(const char *p, const char *e, long long *us) {
        Py_ssize_t len = e - p;
        if (len < HEAD_LEN + TAIL_LEN || memcmp(p, "{\"log\":\"", HEAD_LEN) != 0)
                return NULL;
        const char *sep = e - TAIL_LEN;
        if (memcmp(sep, SEP_ERR, SEP_LEN) != 0 && memcmp(sep, SEP_OUT, SEP_LEN) != 0)
                return NULL;
        if (e[-2] != '"' || e[-1] != '}' || !parse_ts(e - 2 - TS_LEN, us))
                return NULL;
        const char *t = p + HEAD_LEN;
        Py_ssize_t n = sep - t, quotes = 0;
        for (const char *q = memchr(t, '\\', n); q != NULL; q = memchr(q, '\\', sep - q)) {
                if (q + 1 >= sep || q[1] != '"')
                        return NULL; /* another escape: JSON's to read */
                quotes++;
                q += 2;
                if (q >= sep)
                        break;
        }
        /* Every quote is one of those: a bare one is no JSON (two records run together where a
         * crash left a hole, files.py reads the one after it). */
        Py_ssize_t marks = 0;
        for (const char *q = memchr(t, '"', n); q != NULL; q = memchr(q + 1, '"', sep - q - 1))
                if (++marks > quotes)
                        return NULL;
        if (quotes == 0)
                return PyBytes_FromStringAndSize(t, n);
        PyObject *out = PyBytes_FromStringAndSize(NULL, n - quotes);
        if (out == NULL)
                return NULL;
        char *w = PyBytes_AS_STRING(out);
        for (const char *q = t; q < sep; q++) {
                if (*q == '\\')
                        q++;
                *w++ = *q;
        }
        return out;
}

/* TEXT of a CRI line [p, e) in the common form; NULL and no error when it is not. */
static PyObject *cri_text(const char *p, const char *e, long long *us) {
        if (e - p < TS_LEN + 1 || p[TS_LEN] != ' ' || !parse_ts(p, us))
                return NULL;
        const char *out = p + TS_LEN + 1;
        const char *sp = memchr(out, ' ', e - out);
        if (sp == NULL || e - sp < 3 || sp[1] != 'F' || sp[2] != ' ')
                return NULL;
        return PyBytes_FromStringAndSize(sp + 3, e - (sp + 3));
}

static int append_steal(PyObject *list, PyObject *item) {
        if (item == NULL)
                return -1;
        int r = PyList_Append(list, item);
        Py_DECREF(item);
        return r;
}

/* run(data, start, fmt, limit, stop) -> (texts, times, ends)
 *
 * The whole lines of `data` from index `start` on, while they are in the common form (at most
 * `limit`; one whose text contains `stop`, when not empty, ends the run before it): their
 * texts, times (unix microseconds) and the index after each one's newline. */
static PyObject *run(PyObject *Py_UNUSED(module), PyObject *args) {
        Py_buffer data, stop;
        Py_ssize_t start, limit;
        int fmt;
        if (!PyArg_ParseTuple(args, "y*niny*", &data, &start, &fmt, &limit, &stop))
                return NULL;
        PyObject *texts = PyList_New(0), *times = PyList_New(0), *ends = PyList_New(0);
        PyObject *result = NULL;
        if (texts == NULL || times == NULL || ends == NULL)
                goto done;
        if (start < 0 || start > data.len || (fmt != FMT_DOCKER && fmt != FMT_CRI)) {
                PyErr_SetString(PyExc_ValueError, "run: start out of range or unknown format");
                goto done;
        }
        const char *buf = data.buf, *end = buf + data.len, *p = buf + start;
        Py_ssize_t n = 0;
        while (n < limit && p < end) {
                const char *nl = memchr(p, '\n', end - p);
                if (nl == NULL)
                        break;
                long long us = 0;
                PyObject *text = fmt == FMT_DOCKER ? docker_text(p, nl, &us) : cri_text(p, nl, &us);
                if (text == NULL) {
                        if (PyErr_Occurred())
                                goto done;
                        break;
                }
                if (stop.len > 0 &&
                    memmem(PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text), stop.buf, stop.len)) {
                        Py_DECREF(text);
                        break;
                }
                if (append_steal(texts, text) < 0 ||
                    append_steal(times, PyLong_FromLongLong(us)) < 0 ||
                    append_steal(ends, PyLong_FromSsize_t(nl + 1 - buf)) < 0)
                        goto done;
                n++;
                p = nl + 1;
        }
        result = PyTuple_Pack(3, texts, times, ends);
done:
        Py_XDECREF(texts);
        Py_XDECREF(times);
        Py_XDECREF(ends);
        PyBuffer_Release(&data);
        PyBuffer_Release(&stop);
        return result;
}

static PyMethodDef methods[] = {
        {"run", run, METH_VARARGS, "A run of the common lines of a block: (texts, times, ends)."},
        {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
        PyModuleDef_HEAD_INIT, "_fileread", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fileread(void) {
        PyObject *m = PyModule_Create(&module);
        if (m == NULL)
                return NULL;
        if (PyModule_AddIntConstant(m, "FMT_DOCKER", FMT_DOCKER) < 0 ||
            PyModule_AddIntConstant(m, "FMT_CRI", FMT_CRI) < 0) {
                Py_DECREF(m);
                return NULL;
        }
        return m;
}
