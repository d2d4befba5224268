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
#include <string.h>

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

/* The length json's encode_basestring (ensure_ascii=False) gives a UTF-8 string, quotes included. */
static Py_ssize_t
json_length(const char *s, Py_ssize_t n)
{
    Py_ssize_t out = n + 2;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t')
            out += 1;
        else if (c < 0x20)
            out += 5;
    }
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
    for (Py_ssize_t i = 0; i < f->len; i++) {
        unsigned char c = (unsigned char)f->data[i];
        switch (c) {
        case '"': *p++ = '\\'; *p++ = '"'; break;
        case '\\': *p++ = '\\'; *p++ = '\\'; break;
        case '\b': *p++ = '\\'; *p++ = 'b'; break;
        case '\f': *p++ = '\\'; *p++ = 'f'; break;
        case '\n': *p++ = '\\'; *p++ = 'n'; break;
        case '\r': *p++ = '\\'; *p++ = 'r'; break;
        case '\t': *p++ = '\\'; *p++ = 't'; break;
        default:
            if (c < 0x20) {
                memcpy(p, "\\u00", 4);
                p[4] = HEX[c >> 4];
                p[5] = HEX[c & 15];
                p += 6;
            } else {
                *p++ = (char)c;
            }
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

static char *
put_text(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
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

/* ---- row_line ------------------------------------------------------------------------------------- */

enum { A_AGENT, A_SEQ, A_PREV, A_FP, A_KEY, A_AT, A_ACTION, A_TARGET, A_OUTCOME, A_DETAIL, A_ARGS_FP,
       A_PRINCIPAL, A_RESULT_FP, A_RULE, N_ARGS };

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
    const unsigned char *prev = NULL;
    PyObject *prev_obj = args[A_PREV];
    if (prev_obj != Py_None) {
        if (!PyBytes_CheckExact(prev_obj) || PyBytes_GET_SIZE(prev_obj) != 32) {
            PyErr_SetString(PyExc_TypeError, "row_line: prev must be 32 bytes or None");
            return NULL;
        }
        prev = (const unsigned char *)PyBytes_AS_STRING(prev_obj);
    }
    Field agent, fp, action, target, outcome, detail, args_fp, principal, result_fp, rule;
    if (!(field_of(args[A_AGENT], -1, 0, &agent) && field_of(args[A_FP], -1, 0, &fp)
          && field_of(args[A_ACTION], -1, 0, &action) && field_of(args[A_TARGET], MAX_TARGET, 0, &target)
          && field_of(args[A_OUTCOME], -1, 0, &outcome) && field_of(args[A_DETAIL], MAX_DETAIL, 0, &detail)
          && field_of(args[A_ARGS_FP], MAX_SHORT, 1, &args_fp)
          && field_of(args[A_PRINCIPAL], MAX_SHORT, 1, &principal)
          && field_of(args[A_RESULT_FP], MAX_SHORT, 1, &result_fp)
          && field_of(args[A_RULE], MAX_SHORT, 1, &rule))) {
        Py_RETURN_NONE;
    }
    if (agent.len > 0x7fffffff || fp.len > 0x7fffffff || action.len > 0x7fffffff || outcome.len > 0x7fffffff)
        Py_RETURN_NONE;

    /* The row hash (v2 layout). */
    unsigned char digest[32];
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
    mark_of((const MarkKey *)args[A_KEY], digest, mark);

    /* The JSON line, in LedgerRow's key order. */
    char seq_text[24], at_text[24];
    int seq_len = snprintf(seq_text, sizeof seq_text, "%lld", seq);
    int at_len = snprintf(at_text, sizeof at_text, "%lld", at_ms);
    Py_ssize_t size = 512 + seq_len + at_len + agent.json + fp.json + action.json + target.json + outcome.json
                      + detail.json + args_fp.json + principal.json + result_fp.json + rule.json;
    PyObject *line = PyBytes_FromStringAndSize(NULL, size);
    if (line == NULL)
        return NULL;
    char *start = PyBytes_AS_STRING(line), *p = start;
    p = put_text(p, "{\"agent_id\": ");
    p = put_json(p, &agent);
    p = put_text(p, ", \"seq\": ");
    memcpy(p, seq_text, (size_t)seq_len);
    p += seq_len;
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
    memcpy(p, at_text, (size_t)at_len);
    p += at_len;
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

static PyMethodDef module_methods[] = {
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
    if (PyType_Ready(&MarkKeyType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&MarkKeyType);
    if (PyModule_AddObject(m, "MarkKey", (PyObject *)&MarkKeyType) < 0) {
        Py_DECREF(&MarkKeyType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
