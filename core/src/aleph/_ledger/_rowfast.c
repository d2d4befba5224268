/* aleph._ledger._rowfast: a ledger row's hash, mark and JSON line in one call (the native hot path).
 *
 * Builds exactly the bytes the pure-Python path builds (aleph._ledger._rowpy.row_line): the v2 row hash
 * (SHA-256, layout in aleph._ledger._format), the writer's mark (HMAC-SHA256 of the hash, 32 hex) and the
 * JSON line json.dumps(row, ensure_ascii=False) would write, key order included. It handles the common row
 * only: every text field an exact str, valid UTF-8 (no lone surrogates) and within its clipping limit, no
 * refs, not signed. Anything else returns None and the caller takes the Python path, which clips, replaces
 * and signs. tests/core/test_rowfast.py compares both implementations byte for byte on many rows.
 *
 * SHA-256 is OpenSSL's libcrypto (the library Python's hashlib uses), through its low-level SHA256_CTX so
 * the HMAC key blocks are hashed once per key and copied per row.
 */
#define PY_SSIZE_T_CLEAN
#define OPENSSL_API_COMPAT 0x10100000L
#define OPENSSL_SUPPRESS_DEPRECATED
#include <Python.h>
#include <openssl/sha.h>
#include <structmember.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define MAX_TARGET 256
#define MAX_DETAIL 4096
#define MAX_SHORT 256
#define HASH_DOMAIN "aleph-agent-ledger-v2"

static const char HEX[] = "0123456789abcdef";

/* ---- MarkKey: the writer's HMAC key, its two key blocks hashed once ------------------------------ */

typedef struct {
    PyObject_HEAD
    SHA256_CTX inner;
    SHA256_CTX outer;
} MarkKey;

static int
MarkKey_init(MarkKey *self, PyObject *args, PyObject *kwds)
{
    Py_buffer key;
    unsigned char block[64], pad[64];
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "MarkKey takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "y*:MarkKey", &key))
        return -1;
    memset(block, 0, sizeof block);
    if (key.len > 64) {
        SHA256((const unsigned char *)key.buf, (size_t)key.len, block); /* RFC 2104: a long key is hashed */
    } else {
        memcpy(block, key.buf, (size_t)key.len);
    }
    PyBuffer_Release(&key);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x36;
    SHA256_Init(&self->inner);
    SHA256_Update(&self->inner, pad, 64);
    for (int i = 0; i < 64; i++)
        pad[i] = block[i] ^ 0x5c;
    SHA256_Init(&self->outer);
    SHA256_Update(&self->outer, pad, 64);
    memset(block, 0, sizeof block);
    memset(pad, 0, sizeof pad);
    return 0;
}

static void
mark_of(const MarkKey *key, const unsigned char digest[32], char out[32])
{
    unsigned char inner[32], outer[32];
    SHA256_CTX ctx = key->inner;
    SHA256_Update(&ctx, digest, 32);
    SHA256_Final(inner, &ctx);
    ctx = key->outer;
    SHA256_Update(&ctx, inner, 32);
    SHA256_Final(outer, &ctx);
    for (int i = 0; i < 16; i++) {
        out[2 * i] = HEX[outer[i] >> 4];
        out[2 * i + 1] = HEX[outer[i] & 15];
    }
}

static PyObject *
MarkKey_mark(MarkKey *self, PyObject *arg)
{
    char out[32];
    Py_buffer digest;
    if (PyObject_GetBuffer(arg, &digest, PyBUF_SIMPLE) < 0)
        return NULL;
    if (digest.len != 32) {
        PyBuffer_Release(&digest);
        PyErr_SetString(PyExc_ValueError, "a row hash is 32 bytes");
        return NULL;
    }
    mark_of(self, (const unsigned char *)digest.buf, out);
    PyBuffer_Release(&digest);
    return PyUnicode_FromStringAndSize(out, 32);
}

static PyMethodDef MarkKey_methods[] = {
    {"mark", (PyCFunction)MarkKey_mark, METH_O, "The 32-hex writer's mark of a 32-byte row hash."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject MarkKeyType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "aleph._ledger._rowfast.MarkKey",
    .tp_basicsize = sizeof(MarkKey),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "HMAC-SHA256 key blocks of a writer's mark key, hashed once.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)MarkKey_init,
    .tp_methods = MarkKey_methods,
};

/* ---- text fields ---------------------------------------------------------------------------------- */

typedef struct {
    const char *data; /* UTF-8; NULL for None */
    Py_ssize_t len;   /* bytes */
    Py_ssize_t json;  /* bytes of its JSON string literal, quotes included (0 for None) */
} Field;

/* Bytes json's encode_basestring (ensure_ascii=False) writes for each byte of UTF-8 text: 1 for most,
 * 2 for a short escape (\" \\ \b \f \n \r \t), 6 for another control character (\u00XX). */
static unsigned char JSON_WIDTH[256];

static void
json_width_init(void)
{
    for (int c = 0; c < 256; c++)
        JSON_WIDTH[c] = c < 0x20 ? 6 : 1;
    JSON_WIDTH['"'] = JSON_WIDTH['\\'] = 2;
    JSON_WIDTH['\b'] = JSON_WIDTH['\f'] = JSON_WIDTH['\n'] = JSON_WIDTH['\r'] = JSON_WIDTH['\t'] = 2;
}

/* The length of a UTF-8 string's JSON literal, quotes included. */
static Py_ssize_t
json_length(const char *s, Py_ssize_t n)
{
    Py_ssize_t out = 2;
    for (Py_ssize_t i = 0; i < n; i++)
        out += JSON_WIDTH[(unsigned char)s[i]];
    return out;
}

/* 1: filled; 0: not the fast path's (a str subclass, too long, a lone surrogate); -1 never (no errors raised). */
static int
field_of(PyObject *value, Py_ssize_t limit, int optional, Field *f)
{
    if (value == Py_None && optional) {
        f->data = NULL;
        f->len = 0;
        f->json = 0;
        return 1;
    }
    if (!PyUnicode_CheckExact(value))
        return 0;
    if (limit >= 0 && PyUnicode_GET_LENGTH(value) > limit)
        return 0;
    f->data = PyUnicode_AsUTF8AndSize(value, &f->len);
    if (f->data == NULL) { /* lone surrogates: the Python path replaces them */
        PyErr_Clear();
        return 0;
    }
    f->json = json_length(f->data, f->len);
    return 1;
}

static char *
put_json(char *p, const Field *f)
{
    *p++ = '"';
    if (f->json == f->len + 2) { /* nothing to escape (the common case): one copy */
        memcpy(p, f->data, (size_t)f->len);
        p += f->len;
        *p++ = '"';
        return p;
    }
    for (Py_ssize_t i = 0; i < f->len; i++) {
        unsigned char c = (unsigned char)f->data[i];
        if (JSON_WIDTH[c] == 1) {
            *p++ = (char)c;
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        default:
            memcpy(p, "u00", 3);
            p[3] = HEX[c >> 4];
            p[4] = HEX[c & 15];
            p += 5;
        }
    }
    *p++ = '"';
    return p;
}

static char *
put_json_or_null(char *p, const Field *f)
{
    if (f->data == NULL) {
        memcpy(p, "null", 4);
        return p + 4;
    }
    return put_json(p, f);
}

/* A string literal copied without strlen. */
#define put_text(p, literal) (memcpy((p), (literal), sizeof(literal) - 1), (p) + sizeof(literal) - 1)

/* A non-negative or negative integer in decimal, as int.__repr__ writes it; returns the end. */
static char *
put_int(char *p, long long v)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        tmp[n++] = (char)('0' + (u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *
put_hex(char *p, const unsigned char *b, int n)
{
    for (int i = 0; i < n; i++) {
        *p++ = HEX[b[i] >> 4];
        *p++ = HEX[b[i] & 15];
    }
    return p;
}

static void
hash_lp(SHA256_CTX *ctx, const Field *f)
{
    unsigned char n[4];
    uint32_t len = (uint32_t)f->len;
    n[0] = (unsigned char)(len >> 24);
    n[1] = (unsigned char)(len >> 16);
    n[2] = (unsigned char)(len >> 8);
    n[3] = (unsigned char)len;
    SHA256_Update(ctx, n, 4);
    SHA256_Update(ctx, f->data, (size_t)f->len);
}

static void
hash_opt(SHA256_CTX *ctx, const Field *f)
{
    static const unsigned char none = 0, some = 1;
    if (f->data == NULL) {
        SHA256_Update(ctx, &none, 1);
    } else {
        SHA256_Update(ctx, &some, 1);
        hash_lp(ctx, f);
    }
}

static void
hash_i64(SHA256_CTX *ctx, long long v)
{
    unsigned char b[8];
    unsigned long long u = (unsigned long long)v;
    for (int i = 7; i >= 0; i--) {
        b[i] = (unsigned char)u;
        u >>= 8;
    }
    SHA256_Update(ctx, b, 8);
}

/* ---- one row -------------------------------------------------------------------------------------- */

/* The fields a row is built from, in row_line's argument order after at_ms. */
enum { F_ACTION, F_TARGET, F_OUTCOME, F_DETAIL, F_ARGS_FP, F_PRINCIPAL, F_RESULT_FP, F_RULE, N_FIELDS };

/* The line of a marked row (a new bytes object) and its hash in digest; Py_None (a new reference) when the
 * row is not the fast path's; NULL with an exception on a memory error. */
static PyObject *
make_line(PyObject *agent_obj, long long seq, const unsigned char *prev, PyObject *fp_obj, const MarkKey *key,
          long long at_ms, PyObject *const *f, unsigned char digest[32])
{
    Field agent, fp, action, target, outcome, detail, args_fp, principal, result_fp, rule;
    if (!(field_of(agent_obj, -1, 0, &agent) && field_of(fp_obj, -1, 0, &fp)
          && field_of(f[F_ACTION], -1, 0, &action) && field_of(f[F_TARGET], MAX_TARGET, 0, &target)
          && field_of(f[F_OUTCOME], -1, 0, &outcome) && field_of(f[F_DETAIL], MAX_DETAIL, 0, &detail)
          && field_of(f[F_ARGS_FP], MAX_SHORT, 1, &args_fp)
          && field_of(f[F_PRINCIPAL], MAX_SHORT, 1, &principal)
          && field_of(f[F_RESULT_FP], MAX_SHORT, 1, &result_fp)
          && field_of(f[F_RULE], MAX_SHORT, 1, &rule))) {
        Py_RETURN_NONE;
    }
    if (agent.len > 0x7fffffff || fp.len > 0x7fffffff || action.len > 0x7fffffff || outcome.len > 0x7fffffff)
        Py_RETURN_NONE;

    /* The row hash (v2 layout). */
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, HASH_DOMAIN, sizeof HASH_DOMAIN - 1);
    hash_lp(&ctx, &agent);
    hash_i64(&ctx, seq);
    hash_i64(&ctx, at_ms);
    hash_lp(&ctx, &action);
    hash_lp(&ctx, &outcome);
    hash_lp(&ctx, &target);
    hash_opt(&ctx, &args_fp);
    hash_lp(&ctx, &detail);
    hash_lp(&ctx, &fp);
    hash_opt(&ctx, &principal);
    hash_opt(&ctx, &result_fp);
    hash_opt(&ctx, &rule);
    static const unsigned char zero[32] = {0};
    SHA256_Update(&ctx, prev != NULL ? prev : zero, 32);
    SHA256_Final(digest, &ctx);
    char mark[32];
    mark_of(key, digest, mark);

    /* The JSON line, in LedgerRow's key order (its size bounded first: the fixed text is under 400 bytes). */
    Py_ssize_t size = 400 + 2 * 24 + 2 * 66 + agent.json + fp.json + action.json + target.json + outcome.json
                      + detail.json + args_fp.json + principal.json + result_fp.json + rule.json;
    PyObject *line = PyBytes_FromStringAndSize(NULL, size);
    if (line == NULL)
        return NULL;
    char *start = PyBytes_AS_STRING(line), *p = start;
    p = put_text(p, "{\"agent_id\": ");
    p = put_json(p, &agent);
    p = put_text(p, ", \"seq\": ");
    p = put_int(p, seq);
    p = put_text(p, ", \"prev_hash\": ");
    if (prev == NULL) {
        p = put_text(p, "null");
    } else {
        *p++ = '"';
        p = put_hex(p, prev, 32);
        *p++ = '"';
    }
    p = put_text(p, ", \"hash\": \"");
    p = put_hex(p, digest, 32);
    p = put_text(p, "\", \"signature\": \"\", \"signer_fp\": ");
    p = put_json(p, &fp);
    p = put_text(p, ", \"action\": ");
    p = put_json(p, &action);
    p = put_text(p, ", \"target\": ");
    p = put_json(p, &target);
    p = put_text(p, ", \"outcome\": ");
    p = put_json(p, &outcome);
    p = put_text(p, ", \"args_fp\": ");
    p = put_json_or_null(p, &args_fp);
    p = put_text(p, ", \"detail\": ");
    p = put_json(p, &detail);
    p = put_text(p, ", \"at_ms\": ");
    p = put_int(p, at_ms);
    p = put_text(p, ", \"principal\": ");
    p = put_json_or_null(p, &principal);
    p = put_text(p, ", \"result_fp\": ");
    p = put_json_or_null(p, &result_fp);
    p = put_text(p, ", \"rule\": ");
    p = put_json_or_null(p, &rule);
    p = put_text(p, ", \"mark\": \"");
    memcpy(p, mark, 32);
    p += 32;
    p = put_text(p, "\"}\n");
    if (_PyBytes_Resize(&line, p - start) < 0)
        return NULL;
    return line;
}

/* prev as a pointer (NULL for None); -1 with TypeError when it is neither 32 bytes nor None. */
static int
prev_of(PyObject *obj, const unsigned char **prev)
{
    *prev = NULL;
    if (obj == Py_None)
        return 0;
    if (!PyBytes_CheckExact(obj) || PyBytes_GET_SIZE(obj) != 32) {
        PyErr_SetString(PyExc_TypeError, "prev must be 32 bytes or None");
        return -1;
    }
    *prev = (const unsigned char *)PyBytes_AS_STRING(obj);
    return 0;
}

enum { A_AGENT, A_SEQ, A_PREV, A_FP, A_KEY, A_AT, A_FIELDS, N_ARGS = A_FIELDS + N_FIELDS };

static PyObject *
row_line(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != N_ARGS) {
        PyErr_Format(PyExc_TypeError, "row_line takes %d arguments (%zd given)", N_ARGS, nargs);
        return NULL;
    }
    if (!PyObject_TypeCheck(args[A_KEY], &MarkKeyType)) {
        PyErr_SetString(PyExc_TypeError, "row_line: key must be a MarkKey");
        return NULL;
    }
    long long seq = PyLong_AsLongLong(args[A_SEQ]);
    if (seq == -1 && PyErr_Occurred())
        return NULL;
    long long at_ms = PyLong_AsLongLong(args[A_AT]);
    if (at_ms == -1 && PyErr_Occurred())
        return NULL;
    const unsigned char *prev;
    if (prev_of(args[A_PREV], &prev) < 0)
        return NULL;
    unsigned char digest[32];
    PyObject *line = make_line(args[A_AGENT], seq, prev, args[A_FP], (const MarkKey *)args[A_KEY], at_ms,
                               args + A_FIELDS, digest);
    if (line == NULL || line == Py_None)
        return line;
    PyObject *hash = PyBytes_FromStringAndSize((const char *)digest, 32);
    if (hash == NULL) {
        Py_DECREF(line);
        return NULL;
    }
    PyObject *out = PyTuple_New(2);
    if (out == NULL) {
        Py_DECREF(line);
        Py_DECREF(hash);
        return NULL;
    }
    PyTuple_SET_ITEM(out, 0, line);
    PyTuple_SET_ITEM(out, 1, hash);
    return out;
}

/* ---- Lease: a chain file's flock kept across rows while this process writes alone ------------------ */

typedef struct {
    PyObject_HEAD
    long long seq;           /* the chain's head: its seq, */
    long long size;          /* the file's size after it, */
    PyObject *head;          /* and its hash (32 bytes, or None before row 1) */
    PyObject *agent;         /* bound by bind(): the agent, its signer's fingerprint and MarkKey */
    PyObject *fp;
    PyObject *key;
    int fd;                  /* the chain file (not owned) */
    int held;                /* this process holds the chain's flock between rows */
    int allowed;             /* it may keep it after a row (no other writer seen since the last seal) */
    unsigned long long seen; /* the request count when it took the lock */
    Py_buffer want;          /* 8 bytes of <chain>.lease, mapped shared: how many times writers asked for it */
    int has_want;
} Lease;

static unsigned long long
want_of(const Lease *self)
{
    if (!self->has_want)
        return 0;
    return __atomic_load_n((const unsigned long long *)self->want.buf, __ATOMIC_ACQUIRE);
}

static int
Lease_init(Lease *self, PyObject *args, PyObject *kwds)
{
    PyObject *want = Py_None;
    int fd;
    if (kwds != NULL && PyDict_GET_SIZE(kwds) > 0) {
        PyErr_SetString(PyExc_TypeError, "Lease takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "i|O:Lease", &fd, &want))
        return -1;
    if (self->has_want) {
        PyBuffer_Release(&self->want);
        self->has_want = 0;
    }
    self->fd = fd;
    self->held = 0;
    self->allowed = 0;
    self->seen = 0;
    self->seq = 0;
    self->size = 0;
    Py_INCREF(Py_None);
    Py_XSETREF(self->head, Py_None);
    if (want != Py_None) {
        if (PyObject_GetBuffer(want, &self->want, PyBUF_SIMPLE) < 0)
            return -1;
        if (self->want.len < 8 || ((uintptr_t)self->want.buf & 7) != 0) {
            PyBuffer_Release(&self->want);
            PyErr_SetString(PyExc_ValueError, "Lease: the request counter must be 8 aligned bytes");
            return -1;
        }
        self->has_want = 1;
        self->allowed = 1;
    }
    return 0;
}

static void
Lease_dealloc(Lease *self)
{
    Py_XDECREF(self->head);
    Py_XDECREF(self->agent);
    Py_XDECREF(self->fp);
    Py_XDECREF(self->key);
    if (self->has_want)
        PyBuffer_Release(&self->want);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Lease_release(Lease *self, PyObject *unused)
{
    (void)unused;
    if (self->held) {
        self->held = 0;
        if (flock(self->fd, LOCK_UN) != 0)
            return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *
Lease_detach(Lease *self, PyObject *unused)
{
    (void)unused;
    if (self->has_want) {
        PyBuffer_Release(&self->want);
        self->has_want = 0;
    }
    self->allowed = 0;
    Py_RETURN_NONE;
}

static PyObject *
Lease_requests(Lease *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(want_of(self));
}

static PyObject *
Lease_bind(Lease *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyUnicode_CheckExact(args[0]) || !PyUnicode_CheckExact(args[1])
        || !PyObject_TypeCheck(args[2], &MarkKeyType)) {
        PyErr_SetString(PyExc_TypeError, "bind(agent_id: str, signer_fp: str, key: MarkKey)");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_XSETREF(self->agent, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(self->fp, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(self->key, args[2]);
    Py_RETURN_NONE;
}

/* append(action, target, outcome, detail, args_fp, principal, result_fp, rule) -> the row's seq once it is
 * written after the head (which it becomes); else a negative int saying why nothing was written:
 *   -1 another process holds the chain's lock; -2 another process appended since our last row;
 *   -3 the row needs the Python path (clipping, not bound); -4 the write failed or was short (cut back). */
static PyObject *
Lease_append(Lease *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != N_FIELDS) {
        PyErr_Format(PyExc_TypeError, "append takes %d arguments (%zd given)", N_FIELDS, nargs);
        return NULL;
    }
    const unsigned char *prev;
    if (self->agent == NULL || self->head == NULL || prev_of(self->head, &prev) < 0) {
        PyErr_Clear();
        return PyLong_FromLong(-3);
    }
    if (!self->held) {
        if (flock(self->fd, LOCK_EX | LOCK_NB) != 0)
            return PyLong_FromLong(-1); /* EWOULDBLOCK (or an error): the Python path waits, or says why */
        self->held = 1;
        self->seen = want_of(self);
        if (lseek(self->fd, 0, SEEK_END) != (off_t)self->size) {
            self->held = 0;
            flock(self->fd, LOCK_UN);
            return PyLong_FromLong(-2);
        }
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now); /* what time.time_ns() reads */
    long long at_ms = ((long long)now.tv_sec * 1000000000LL + now.tv_nsec) / 1000000LL;
    unsigned char digest[32];
    PyObject *line = make_line(self->agent, self->seq + 1, prev, self->fp, (const MarkKey *)self->key, at_ms, args,
                               digest);
    if (line == NULL || line == Py_None) {
        self->held = 0; /* the Python path takes the lock again (the same open file: at once) */
        flock(self->fd, LOCK_UN);
        if (line == NULL)
            return NULL;
        Py_DECREF(line);
        return PyLong_FromLong(-3);
    }
    PyObject *hash = PyBytes_FromStringAndSize((const char *)digest, 32);
    if (hash == NULL) {
        Py_DECREF(line);
        self->held = 0;
        flock(self->fd, LOCK_UN);
        return NULL;
    }
    const char *data = PyBytes_AS_STRING(line);
    Py_ssize_t length = PyBytes_GET_SIZE(line);
    ssize_t written;
    /* With the GIL held: a row of a few hundred bytes into the page cache takes about a microsecond, and the
     * caller waits for it anyway. Letting the GIL go here handed it to the committer thread on every row while
     * a pass was under way, and the caller then waited for it back: 15.5 against 11.7 us a ledgered call
     * (bench/bench_chokepoint.py, batches that hold the committer's passes). */
    written = write(self->fd, data, (size_t)length);
    Py_DECREF(line);
    if (written != length) {
        Py_DECREF(hash);
        if (written > 0) /* leave no partial row: the Python path writes it again, or cuts back and says why */
            (void)!ftruncate(self->fd, (off_t)self->size);
        self->held = 0;
        flock(self->fd, LOCK_UN);
        return PyLong_FromLong(-4);
    }
    self->seq += 1;
    self->size += length;
    Py_XSETREF(self->head, hash);
    if (!self->allowed || want_of(self) != self->seen) {
        /* Another writer asked for the chain: give it up now, and after each row until the committer allows
         * the lease again (a process that took it straight back could keep the asker waiting). */
        self->allowed = 0;
        self->held = 0;
        flock(self->fd, LOCK_UN);
    }
    return PyLong_FromLongLong(self->seq);
}

static PyObject *call_print(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

static PyObject *S_TOOL_CALL, *S_OK; /* "tool_call" and "ok", made once at import */

/* append_call(tool, arguments, principal, secret_cache, is_secret_key, clean, secret_json, limit) -> the seq of
 * the "tool_call" row of a call that ran ("ok", the summary as its detail, the arguments' fingerprint): what
 * call_print and append do one after the other, in one call from the chokepoint. The negative ints of append;
 * -3 also for arguments call_print does not take (the Python path builds that row). */
static PyObject *
Lease_append_call(Lease *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "append_call takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *const printer[7] = {args[0], args[1], args[3], args[4], args[5], args[6], args[7]};
    PyObject *printed = call_print(NULL, printer, 7);
    if (printed == NULL)
        return NULL;
    if (printed == Py_None) {
        Py_DECREF(printed);
        return PyLong_FromLong(-3);
    }
    PyObject *const fields[N_FIELDS] = {S_TOOL_CALL, args[0], S_OK, PyTuple_GET_ITEM(printed, 0),
                                        PyTuple_GET_ITEM(printed, 1), args[2], Py_None, Py_None};
    PyObject *seq = Lease_append(self, fields, N_FIELDS);
    Py_DECREF(printed);
    return seq;
}

static PyMethodDef Lease_methods[] = {
    {"append", (PyCFunction)(void (*)(void))Lease_append, METH_FASTCALL,
     "Write one marked row after the head; its seq, or a negative int saying why not (see _rowfast.c)."},
    {"append_call", (PyCFunction)(void (*)(void))Lease_append_call, METH_FASTCALL,
     "call_print, then append of the call's \"tool_call\" row; its seq, or a negative int (see _rowfast.c)."},
    {"bind", (PyCFunction)(void (*)(void))Lease_bind, METH_FASTCALL,
     "bind(agent_id, signer_fp, key): who the rows append() writes are by."},
    {"release", (PyCFunction)Lease_release, METH_NOARGS, "Give the chain's lock up if it is held."},
    {"detach", (PyCFunction)Lease_detach, METH_NOARGS, "Stop reading the request counter (before it is unmapped)."},
    {"requests", (PyCFunction)Lease_requests, METH_NOARGS, "How many times writers asked for the chain."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Lease_members[] = {
    {"held", T_INT, offsetof(Lease, held), 0, "This process holds the chain's flock between rows."},
    {"allowed", T_INT, offsetof(Lease, allowed), 0, "It may keep the lock after a row."},
    {"fd", T_INT, offsetof(Lease, fd), READONLY, "The chain file."},
    {"seq", T_LONGLONG, offsetof(Lease, seq), 0, "The seq of the chain's head."},
    {"size", T_LONGLONG, offsetof(Lease, size), 0, "The chain file's size after the head."},
    {"head", T_OBJECT, offsetof(Lease, head), 0, "The head's hash (32 bytes), or None."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject LeaseType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "aleph._ledger._rowfast.Lease",
    .tp_basicsize = sizeof(Lease),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A chain file's flock kept across rows while no other writer asks for it.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Lease_init,
    .tp_dealloc = (destructor)Lease_dealloc,
    .tp_methods = Lease_methods,
    .tp_members = Lease_members,
};

/* ---- a call's summary and argument fingerprint (aleph._chokepoint._callprint._flat, in C) --------- */

typedef struct {
    char *data;
    size_t len, cap;
} Buf;

static int
buf_put(Buf *b, const char *data, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *grown = PyMem_Realloc(b->data, cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

/* A str's JSON literal (encode_basestring, ensure_ascii=False) appended; 0 ok, 1 not UTF-8 (surrogates), -1 error. */
static int
buf_json(Buf *b, PyObject *text)
{
    Field f;
    if (!field_of(text, -1, 0, &f))
        return 1;
    char small[512];
    char *tmp = f.json <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)f.json);
    if (tmp == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    char *end = put_json(tmp, &f);
    int rc = buf_put(b, tmp, (size_t)(end - tmp));
    if (tmp != small)
        PyMem_Free(tmp);
    return rc;
}

/* _is_secret_key(key) through its cache; 1, 0, or -1 with an exception. */
static int
secret_key(PyObject *cache, PyObject *is_secret, PyObject *key)
{
    PyObject *known = PyDict_GetItemWithError(cache, key);
    if (known != NULL)
        return PyObject_IsTrue(known);
    if (PyErr_Occurred())
        return -1;
    PyObject *found = PyObject_CallOneArg(is_secret, key);
    if (found == NULL)
        return -1;
    int rc = PyObject_IsTrue(found);
    Py_DECREF(found);
    return rc;
}

/* " ".join(text.split()) cut to limit characters (plus "…"), of UTF-8 text: in place for ASCII text, through
 * str for the rest (whose whitespace str.split() knows). A new str, or NULL with an exception. */
static PyObject *
summary_of(char *text, Py_ssize_t n, Py_ssize_t limit)
{
    int ascii = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((unsigned char)text[i] >= 0x80) {
            ascii = 0;
            break;
        }
    }
    if (ascii) {
        /* str.split()'s ASCII whitespace: \t \n \v \f \r, \x1c-\x1f and the space. */
        Py_ssize_t out = 0;
        int gap = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)text[i];
            if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) {
                gap = 1;
                continue;
            }
            if (gap && out > 0)
                text[out++] = ' ';
            gap = 0;
            text[out++] = (char)c;
        }
        if (out <= limit)
            return PyUnicode_DecodeASCII(text, out, NULL);
        PyObject *head = PyUnicode_DecodeASCII(text, limit, NULL);
        if (head == NULL)
            return NULL;
        PyObject *ellipsis = PyUnicode_DecodeUTF8("\xe2\x80\xa6", 3, NULL); /* U+2026 */
        PyObject *cut = ellipsis == NULL ? NULL : PyUnicode_Concat(head, ellipsis);
        Py_DECREF(head);
        Py_XDECREF(ellipsis);
        return cut;
    }
    PyObject *whole = PyUnicode_DecodeUTF8(text, n, NULL), *sep = NULL, *words = NULL, *collapsed = NULL;
    PyObject *out = NULL;
    if (whole == NULL || (sep = PyUnicode_FromString(" ")) == NULL || (words = PyUnicode_Split(whole, NULL, -1)) == NULL
        || (collapsed = PyUnicode_Join(sep, words)) == NULL)
        goto done;
    if (PyUnicode_GET_LENGTH(collapsed) <= limit) {
        out = collapsed;
        Py_INCREF(out);
    } else {
        PyObject *head = PyUnicode_Substring(collapsed, 0, limit);
        PyObject *ellipsis = PyUnicode_DecodeUTF8("\xe2\x80\xa6", 3, NULL);
        if (head != NULL && ellipsis != NULL)
            out = PyUnicode_Concat(head, ellipsis);
        Py_XDECREF(head);
        Py_XDECREF(ellipsis);
    }
done:
    Py_XDECREF(whole);
    Py_XDECREF(sep);
    Py_XDECREF(words);
    Py_XDECREF(collapsed);
    return out;
}

/* call_print(tool, arguments, secret_cache, is_secret_key, clean, secret_json, limit) -> (summary, fingerprint),
 * or None for anything but a dict of str keys to str / int / bool / None values (or text UTF-8 cannot hold).
 * secret_json is the JSON literal that stands for a secret-named string in the fingerprint. */
static PyObject *
call_print(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "call_print takes 7 arguments");
        return NULL;
    }
    PyObject *tool = args[0], *arguments = args[1], *cache = args[2], *is_secret = args[3], *clean = args[4];
    PyObject *secret_json = args[5];
    Py_ssize_t limit = PyLong_AsSsize_t(args[6]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    if (!PyUnicode_CheckExact(tool) || !PyDict_CheckExact(arguments) || !PyDict_CheckExact(cache)
        || !PyUnicode_CheckExact(secret_json))
        Py_RETURN_NONE;
    PyObject *keys = NULL, *result = NULL, *summary = NULL, *fp = NULL;
    Buf body = {NULL, 0, 0}, line = {NULL, 0, 0};
    int declined = 0;
    keys = PyDict_Keys(arguments);
    if (keys == NULL)
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(keys, i))) {
            declined = 1;
            goto done;
        }
    }
    if (PyList_Sort(keys) < 0)
        goto done;
    Field tf;
    if (!field_of(tool, -1, 0, &tf)) {
        declined = 1;
        goto done;
    }
    if (buf_put(&line, tf.data, (size_t)tf.len) < 0 || buf_put(&line, ": ", 2) < 0)
        goto done;
    size_t head_len = line.len;
    if (buf_put(&body, tf.data, (size_t)tf.len) < 0 || buf_put(&body, "\x1f{", 2) < 0)
        goto done;
    int first = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        PyObject *value = PyDict_GetItemWithError(arguments, key);
        if (value == NULL) {
            if (!PyErr_Occurred())
                declined = 1; /* changed while read */
            goto done;
        }
        PyObject *shown = NULL; /* what the summary shows after "key=" (a new reference) */
        PyObject *canon = NULL; /* its canonical JSON (borrowed or NULL for none); canon_text for ints */
        const char *canon_text = NULL;
        if (PyUnicode_CheckExact(value)) {
            int secret = PyUnicode_GET_LENGTH(value) > 0 ? secret_key(cache, is_secret, key) : 0;
            if (secret < 0)
                goto done;
            if (secret) {
                shown = PyUnicode_FromString("***");
                canon = secret_json;
            } else {
                shown = PyObject_CallOneArg(clean, value);
                canon = value;
            }
        } else if (value == Py_None) {
            shown = PyUnicode_FromString("null");
        } else if (PyBool_Check(value) || PyLong_CheckExact(value)) {
            PyObject *repr;
            int overflow = 0;
            long long small = PyBool_Check(value) ? 0 : PyLong_AsLongLongAndOverflow(value, &overflow);
            if (PyBool_Check(value)) {
                repr = PyUnicode_FromString(value == Py_True ? "true" : "false");
            } else if (!overflow && !(small == -1 && PyErr_Occurred())) {
                char digits[24];
                char *end = put_int(digits, small); /* int.__repr__ of a machine-sized int, without the call */
                repr = PyUnicode_FromStringAndSize(digits, end - digits);
            } else {
                PyErr_Clear();
                repr = PyLong_Type.tp_repr(value);
            }
            if (repr == NULL)
                goto done;
            int secret = secret_key(cache, is_secret, key);
            if (secret < 0) {
                Py_DECREF(repr);
                goto done;
            }
            canon_text = PyUnicode_AsUTF8(repr);
            if (canon_text == NULL || buf_put(&body, first ? "" : ",", first ? 0 : 1) < 0) {
                Py_DECREF(repr);
                goto done;
            }
            first = 0;
            int rc = buf_json(&body, key);
            if (rc == 0 && (buf_put(&body, ":", 1) < 0 || buf_put(&body, canon_text, strlen(canon_text)) < 0))
                rc = -1;
            if (rc != 0) {
                declined = rc > 0;
                Py_DECREF(repr);
                goto done;
            }
            if (secret) {
                Py_DECREF(repr);
                shown = PyUnicode_FromString("***");
            } else {
                shown = repr;
            }
        } else {
            declined = 1;
            goto done;
        }
        if (shown == NULL)
            goto done;
        if (!PyUnicode_Check(shown)) {
            Py_DECREF(shown);
            declined = 1;
            goto done;
        }
        if (canon != NULL) {
            int rc = buf_put(&body, first ? "" : ",", first ? 0 : 1);
            first = 0;
            if (rc == 0)
                rc = buf_json(&body, key);
            if (rc == 0)
                rc = buf_put(&body, ":", 1);
            if (rc == 0 && canon == secret_json) { /* already a JSON literal */
                Py_ssize_t len;
                const char *raw = PyUnicode_AsUTF8AndSize(secret_json, &len);
                rc = raw == NULL ? -1 : buf_put(&body, raw, (size_t)len);
            } else if (rc == 0) {
                rc = buf_json(&body, canon);
            }
            if (rc != 0) {
                declined = rc > 0;
                Py_DECREF(shown);
                goto done;
            }
        }
        /* The summary's "key=shown", after a space from the one before. */
        Field kf, sf;
        int ok = field_of(key, -1, 0, &kf) && field_of(shown, -1, 0, &sf);
        if (!ok) {
            Py_DECREF(shown);
            declined = 1;
            goto done;
        }
        int rc = (line.len > head_len ? buf_put(&line, " ", 1) : 0);
        if (rc == 0)
            rc = buf_put(&line, kf.data, (size_t)kf.len);
        if (rc == 0)
            rc = buf_put(&line, "=", 1);
        if (rc == 0)
            rc = buf_put(&line, sf.data, (size_t)sf.len);
        Py_DECREF(shown);
        if (rc < 0)
            goto done;
    }
    if (buf_put(&body, "}", 1) < 0)
        goto done;
    if (line.len == head_len && buf_put(&line, "(no arguments)", 14) < 0)
        goto done;
    summary = summary_of(line.data, (Py_ssize_t)line.len, limit);
    if (summary == NULL)
        goto done;
    unsigned char digest[32];
    char hex[32];
    /* Through a SHA256_CTX, not the one-shot SHA256(): in OpenSSL 3 that one fetches the digest from the
     * provider on every call (a lookup under a read lock), which cost more than hashing these few bytes. */
    SHA256_CTX ctx;
    SHA256_Init(&ctx);
    SHA256_Update(&ctx, body.data, body.len);
    SHA256_Final(digest, &ctx);
    for (int i = 0; i < 16; i++) {
        hex[2 * i] = HEX[digest[i] >> 4];
        hex[2 * i + 1] = HEX[digest[i] & 15];
    }
    fp = PyUnicode_FromStringAndSize(hex, 32);
    if (fp == NULL)
        goto done;
    result = PyTuple_Pack(2, summary, fp);
done:
    PyMem_Free(body.data);
    PyMem_Free(line.data);
    Py_XDECREF(keys);
    Py_XDECREF(summary);
    Py_XDECREF(fp);
    if (result == NULL && declined && !PyErr_Occurred())
        Py_RETURN_NONE;
    return result;
}

static PyMethodDef module_methods[] = {
    {"call_print", (PyCFunction)(void (*)(void))call_print, METH_FASTCALL,
     "call_print(tool, arguments, secret_cache, is_secret_key, clean, secret_json, limit) -> (summary, "
     "fingerprint) of a flat call, or None (see aleph._chokepoint._callprint)."},
    {"row_line", (PyCFunction)(void (*)(void))row_line, METH_FASTCALL,
     "row_line(agent_id, seq, prev, signer_fp, key, at_ms, action, target, outcome, detail, args_fp, principal, "
     "result_fp, rule) -> (line, hash) of a marked row, or None when the row needs the Python path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "aleph._ledger._rowfast",
    .m_doc = "The ledger's native hot path: a row's hash, mark and JSON line in one call.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__rowfast(void)
{
    json_width_init();
    if (S_TOOL_CALL == NULL && (S_TOOL_CALL = PyUnicode_InternFromString("tool_call")) == NULL)
        return NULL;
    if (S_OK == NULL && (S_OK = PyUnicode_InternFromString("ok")) == NULL)
        return NULL;
    if (PyType_Ready(&MarkKeyType) < 0 || PyType_Ready(&LeaseType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddType(m, &MarkKeyType) < 0 || PyModule_AddType(m, &LeaseType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
