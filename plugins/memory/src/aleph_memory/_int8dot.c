/* aleph_memory._int8dot: the vector index's two native kernels (see aleph_memory/_twopass.py).
 *
 * approx(query16, rows8, scales, factor, out)
 *     out[i] = scales[i] * (factor * (q16 . rows8[i])): the first pass of the nearest-rows search, an exact
 *     integer dot product of an int16 query with each int8 row (row-major, n x d), scaled back to float. It reads a
 *     quarter of the bytes of the float32 product, which is memory-bound. AVX2 when the CPU has it (chosen at run
 *     time with __builtin_cpu_supports), portable C otherwise; both give the same integers, hence the same floats.
 *
 * exact(query, rows32, positions, out)
 *     out[j] = sum over k = 0 .. d-1, in that order, of query[k] * rows32[positions[j]][k]: float32 products and a
 *     float32 running sum starting at 0, each operation rounded (the build passes -ffp-contract=off, so no fused
 *     multiply-add). aleph_memory._twopass.exact_scores computes the same sum with numpy when this module is not
 *     built, bit for bit: a row's score does not depend on which path or which other rows were asked for.
 *
 * quantise(rows32, codes8, scales, errors, norms)
 *     Each row's int8 copy: scale s = max|x| / 127 (float32 division), codes rint(x / s) clipped to +-127, the error
 *     ||x - s c|| and the norm bound max(||x||, s ||c||), both summed in double and rounded up to float32. A row
 *     with a value that is not finite gets codes 0, scale 0 and infinite bounds. The same as _twopass.quantise.
 *
 * All release the GIL while they run and check every buffer's size and every position first.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

static int use_avx2 = 0;

/* ---- approx: int16 query . int8 rows ---------------------------------------------------------------- */

static void
approx_portable(const int16_t *q, const int8_t *rows, const float *scales, float factor, float *out, Py_ssize_t n,
                Py_ssize_t d)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        const int8_t *row = rows + i * d;
        int32_t acc = 0;
        for (Py_ssize_t k = 0; k < d; k++)
            acc += (int32_t)q[k] * (int32_t)row[k];
        out[i] = scales[i] * (factor * (float)acc);
    }
}

#if HAVE_X86
__attribute__((target("avx2"))) static inline int32_t
hsum_epi32(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}

__attribute__((target("avx2"))) static void
approx_avx2(const int16_t *q, const int8_t *rows, const float *scales, float factor, float *out, Py_ssize_t n,
            Py_ssize_t d)
{
    Py_ssize_t body = d - d % 16;
    Py_ssize_t i = 0;
    /* Two rows at a time: two independent chains of multiply-adds over the same query chunks. */
    for (; i + 2 <= n; i += 2) {
        const int8_t *r0 = rows + i * d, *r1 = r0 + d;
        __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
        for (Py_ssize_t k = 0; k < body; k += 16) {
            __m256i qq = _mm256_loadu_si256((const __m256i *)(q + k));
            __m256i x0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(r0 + k)));
            __m256i x1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(r1 + k)));
            a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(qq, x0));
            a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(qq, x1));
        }
        int32_t s0 = hsum_epi32(a0), s1 = hsum_epi32(a1);
        for (Py_ssize_t k = body; k < d; k++) {
            s0 += (int32_t)q[k] * (int32_t)r0[k];
            s1 += (int32_t)q[k] * (int32_t)r1[k];
        }
        out[i] = scales[i] * (factor * (float)s0);
        out[i + 1] = scales[i + 1] * (factor * (float)s1);
    }
    if (i < n)
        approx_portable(q, rows + i * d, scales + i, factor, out + i, n - i, d);
}
#endif

/* ---- exact: float32 query . float32 rows, in a fixed order -------------------------------------------- */

static void
exact_rows(const float *q, const float *rows, const int64_t *pos, float *out, Py_ssize_t m, Py_ssize_t d)
{
    Py_ssize_t j = 0;
    /* Four rows at a time: four independent running sums (each one's order is still k = 0 .. d-1). */
    for (; j + 4 <= m; j += 4) {
        const float *r0 = rows + pos[j] * d, *r1 = rows + pos[j + 1] * d;
        const float *r2 = rows + pos[j + 2] * d, *r3 = rows + pos[j + 3] * d;
        float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
        for (Py_ssize_t k = 0; k < d; k++) {
            float qk = q[k];
            s0 += qk * r0[k];
            s1 += qk * r1[k];
            s2 += qk * r2[k];
            s3 += qk * r3[k];
        }
        out[j] = s0;
        out[j + 1] = s1;
        out[j + 2] = s2;
        out[j + 3] = s3;
    }
    for (; j < m; j++) {
        const float *r = rows + pos[j] * d;
        float s = 0.0f;
        for (Py_ssize_t k = 0; k < d; k++)
            s += q[k] * r[k];
        out[j] = s;
    }
}

/* ---- quantise: each row's int8 copy and its bounds ----------------------------------------------------- */

static float
rounded_up(double v)
{
    float f = (float)v;
    if ((double)f < v)
        f = nextafterf(f, INFINITY);
    return f;
}

static void
quantise_rows(const float *rows, int8_t *codes, float *scales, float *errors, float *norms, Py_ssize_t n,
              Py_ssize_t d)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        const float *x = rows + i * d;
        int8_t *c = codes + i * d;
        float peak = 0.0f;
        int finite = 1;
        for (Py_ssize_t k = 0; k < d; k++) {
            float a = fabsf(x[k]);
            if (!isfinite(a))
                finite = 0;
            else if (a > peak)
                peak = a;
        }
        if (!finite) {
            memset(c, 0, (size_t)d);
            scales[i] = 0.0f;
            errors[i] = INFINITY;
            norms[i] = INFINITY;
            continue;
        }
        float s = peak / 127.0f;
        double e2 = 0.0, x2 = 0.0, c2 = 0.0;
        for (Py_ssize_t k = 0; k < d; k++) {
            float q = 0.0f;
            if (s > 0.0f) {
                q = rintf(x[k] / s);
                q = q > 127.0f ? 127.0f : (q < -127.0f ? -127.0f : q);
            }
            c[k] = (int8_t)q;
            double r = (double)x[k] - (double)s * (double)q;
            e2 += r * r;
            x2 += (double)x[k] * (double)x[k];
            c2 += (double)q * (double)q;
        }
        double norm = sqrt(x2), coded = (double)s * sqrt(c2);
        scales[i] = s;
        /* Double sums of at most a few thousand squares: their relative error is far below the 1e-9 added. */
        errors[i] = rounded_up(sqrt(e2) * (1 + 1e-9));
        norms[i] = rounded_up((norm > coded ? norm : coded) * (1 + 1e-9));
    }
}

/* ---- Python wrappers ------------------------------------------------------------------------------------ */

static int
get_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd", what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    if ((uintptr_t)view->buf % (uintptr_t)itemsize != 0) {
        PyErr_Format(PyExc_ValueError, "%s: the buffer is not aligned to its %zd-byte items", what, itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *
py_approx(PyObject *self, PyObject *args)
{
    PyObject *oq, *orows, *oscales, *oout;
    float factor;
    Py_buffer q, rows, scales, out;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOfO:approx", &oq, &orows, &oscales, &factor, &oout))
        return NULL;
    if (get_buffer(oq, &q, 0, 2, "query") < 0)
        return NULL;
    if (get_buffer(orows, &rows, 0, 1, "rows") < 0)
        goto release_q;
    if (get_buffer(oscales, &scales, 0, 4, "scales") < 0)
        goto release_rows;
    if (get_buffer(oout, &out, 1, 4, "out") < 0)
        goto release_scales;
    Py_ssize_t d = q.len / 2, n = scales.len / 4;
    if (d < 1 || rows.len != n * d || out.len != n * 4) {
        PyErr_Format(PyExc_ValueError, "approx: %zd rows of %zd bytes need %zd row bytes and %zd out floats (got %zd, %zd)",
                     n, d, n * d, n, rows.len, out.len / 4);
        goto release_out;
    }
    int64_t qmax = 0;
    for (Py_ssize_t k = 0; k < d; k++) {
        int64_t a = ((const int16_t *)q.buf)[k];
        qmax = a < 0 ? (-a > qmax ? -a : qmax) : (a > qmax ? a : qmax);
    }
    if (qmax * 128 * (int64_t)d > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "approx: a query of %zd values up to %lld could overflow 32-bit sums", d,
                     (long long)qmax);
        goto release_out;
    }
    Py_BEGIN_ALLOW_THREADS
#if HAVE_X86
    if (use_avx2)
        approx_avx2((const int16_t *)q.buf, (const int8_t *)rows.buf, (const float *)scales.buf, factor,
                    (float *)out.buf, n, d);
    else
#endif
        approx_portable((const int16_t *)q.buf, (const int8_t *)rows.buf, (const float *)scales.buf, factor,
                        (float *)out.buf, n, d);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release_out:
    PyBuffer_Release(&out);
release_scales:
    PyBuffer_Release(&scales);
release_rows:
    PyBuffer_Release(&rows);
release_q:
    PyBuffer_Release(&q);
    return result;
}

static PyObject *
py_exact(PyObject *self, PyObject *args)
{
    PyObject *oq, *orows, *opos, *oout;
    Py_buffer q, rows, pos, out;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOO:exact", &oq, &orows, &opos, &oout))
        return NULL;
    if (get_buffer(oq, &q, 0, 4, "query") < 0)
        return NULL;
    if (get_buffer(orows, &rows, 0, 4, "rows") < 0)
        goto release_q;
    if (get_buffer(opos, &pos, 0, 8, "positions") < 0)
        goto release_rows;
    if (get_buffer(oout, &out, 1, 4, "out") < 0)
        goto release_pos;
    Py_ssize_t d = q.len / 4, m = pos.len / 8;
    if (d < 1 || rows.len % (d * 4) != 0 || out.len != m * 4) {
        PyErr_Format(PyExc_ValueError, "exact: rows of %zd floats and %zd out floats expected", d, m);
        goto release_out;
    }
    Py_ssize_t n = rows.len / (d * 4);
    const int64_t *p = (const int64_t *)pos.buf;
    for (Py_ssize_t j = 0; j < m; j++) {
        if (p[j] < 0 || p[j] >= n) {
            PyErr_Format(PyExc_IndexError, "exact: position %lld outside the %zd rows", (long long)p[j], n);
            goto release_out;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    exact_rows((const float *)q.buf, (const float *)rows.buf, p, (float *)out.buf, m, d);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release_out:
    PyBuffer_Release(&out);
release_pos:
    PyBuffer_Release(&pos);
release_rows:
    PyBuffer_Release(&rows);
release_q:
    PyBuffer_Release(&q);
    return result;
}

static PyObject *
py_use_kernel(PyObject *self, PyObject *args)
{
    const char *name;
    if (!PyArg_ParseTuple(args, "s:use_kernel", &name))
        return NULL;
    int before = use_avx2;
    if (strcmp(name, "portable") == 0) {
        use_avx2 = 0;
    } else if (strcmp(name, "avx2") == 0) {
#if HAVE_X86
        if (!__builtin_cpu_supports("avx2")) {
            PyErr_SetString(PyExc_ValueError, "use_kernel: this CPU has no AVX2");
            return NULL;
        }
        use_avx2 = 1;
#else
        PyErr_SetString(PyExc_ValueError, "use_kernel: AVX2 is an x86 kernel");
        return NULL;
#endif
    } else {
        PyErr_Format(PyExc_ValueError, "use_kernel: 'portable' or 'avx2' expected, got %R", PyTuple_GET_ITEM(args, 0));
        return NULL;
    }
    return PyUnicode_FromString(before ? "avx2" : "portable");
}

static PyObject *
py_kernel(PyObject *self, PyObject *unused)
{
    return PyUnicode_FromString(use_avx2 ? "avx2" : "portable");
}

static PyObject *
py_quantise(PyObject *self, PyObject *args)
{
    PyObject *orows, *ocodes, *oscales, *oerrors, *onorms;
    Py_buffer rows, codes, scales, errors, norms;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "OOOOO:quantise", &orows, &ocodes, &oscales, &oerrors, &onorms))
        return NULL;
    if (get_buffer(orows, &rows, 0, 4, "rows") < 0)
        return NULL;
    if (get_buffer(ocodes, &codes, 1, 1, "codes") < 0)
        goto release_rows;
    if (get_buffer(oscales, &scales, 1, 4, "scales") < 0)
        goto release_codes;
    if (get_buffer(oerrors, &errors, 1, 4, "errors") < 0)
        goto release_scales;
    if (get_buffer(onorms, &norms, 1, 4, "norms") < 0)
        goto release_errors;
    Py_ssize_t n = scales.len / 4;
    Py_ssize_t d = n ? rows.len / 4 / n : 0;
    if ((n && (d < 1 || rows.len != n * d * 4)) || (!n && rows.len) || codes.len != n * d || errors.len != n * 4 ||
        norms.len != n * 4) {
        PyErr_Format(PyExc_ValueError, "quantise: %zd rows need as many codes rows, errors and norms", n);
        goto release_norms;
    }
    Py_BEGIN_ALLOW_THREADS
    quantise_rows((const float *)rows.buf, (int8_t *)codes.buf, (float *)scales.buf, (float *)errors.buf,
                  (float *)norms.buf, n, d);
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
release_norms:
    PyBuffer_Release(&norms);
release_errors:
    PyBuffer_Release(&errors);
release_scales:
    PyBuffer_Release(&scales);
release_codes:
    PyBuffer_Release(&codes);
release_rows:
    PyBuffer_Release(&rows);
    return result;
}

static PyMethodDef methods[] = {
    {"quantise", py_quantise, METH_VARARGS,
     "quantise(rows, codes, scales, errors, norms): each float32 row's int8 codes, scale, error and norm bound."},
    {"use_kernel", py_use_kernel, METH_VARARGS,
     "use_kernel(name): approx's kernel from now on, 'avx2' or 'portable' (for tests); returns the previous one."},
    {"kernel", py_kernel, METH_NOARGS, "kernel(): the name of approx's kernel, 'avx2' or 'portable'."},
    {"approx", py_approx, METH_VARARGS,
     "approx(query16, rows8, scales, factor, out): out[i] = scales[i] * (factor * (query16 . rows8[i]))."},
    {"exact", py_exact, METH_VARARGS,
     "exact(query, rows, positions, out): out[j] = the float32 sum, in order, of query[k] * rows[positions[j]][k]."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_int8dot", "The vector index's native kernels.", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__int8dot(void)
{
#if HAVE_X86
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
    return PyModule_Create(&module);
}
