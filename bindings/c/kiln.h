/*
 * kiln.h — the C ABI of kiln's runtime (libkiln.so, built by `make lib`).
 *
 * An engine is a compiled model (a .kiln file from `cc build`); a context
 * runs it, one inference at a time, on its own threads and activation
 * memory. An engine is safe to use from several threads at once; a context
 * is not (make one per thread).
 *
 *     char err[256];
 *     kiln_engine *e = kiln_engine_load("model.kiln", err, sizeof err);
 *     if (!e) { fprintf(stderr, "%s\n", err); ... }
 *     kiln_context *c = kiln_context_new(e, 1, err, sizeof err);
 *     const void *in[] = {pixels};  void *out[] = {scores};
 *     if (kiln_context_run(c, in, out, err, sizeof err) != 0) ...
 *     kiln_context_free(c);
 *     kiln_engine_free(e);
 *
 * Inputs and outputs are buffers in the engine's declared order (index 0
 * to count-1), each holding the tensor's elements in row-major order, in
 * the binding's dtype, at its shape (a dynamic dim at the maximum the
 * engine was built for), kiln_engine_*_bytes bytes long.
 *
 * Functions that can fail take err and errlen: on failure they write a
 * NUL-terminated message (cut to errlen bytes) naming the problem, and
 * return NULL or a nonzero status. err may be NULL.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_engine kiln_engine;
typedef struct kiln_context kiln_context;

#ifndef KILN_CGO /* libkiln's own build declares these from its Go code */

/* Loads and verifies an engine file (checksums, target, CPU features). */
kiln_engine *kiln_engine_load(const char *path, char *err, size_t errlen);
void kiln_engine_free(kiln_engine *engine);

/* The engine's inputs and outputs: how many, and each one's name, dtype
 * (ONNX's name: "float", "int64", "uint8", ...), rank, shape and size in
 * bytes. Names and dtypes live as long as the engine. An index out of
 * range gives NULL, -1 or 0. */
int kiln_engine_input_count(const kiln_engine *engine);
int kiln_engine_output_count(const kiln_engine *engine);
const char *kiln_engine_input_name(const kiln_engine *engine, int i);
const char *kiln_engine_output_name(const kiln_engine *engine, int i);
const char *kiln_engine_input_dtype(const kiln_engine *engine, int i);
const char *kiln_engine_output_dtype(const kiln_engine *engine, int i);
int kiln_engine_input_rank(const kiln_engine *engine, int i);
int kiln_engine_output_rank(const kiln_engine *engine, int i);
/* Writes up to maxdims dims to dims; returns the rank (or -1). */
int kiln_engine_input_shape(const kiln_engine *engine, int i, int64_t *dims, int maxdims);
int kiln_engine_output_shape(const kiln_engine *engine, int i, int64_t *dims, int maxdims);
size_t kiln_engine_input_bytes(const kiln_engine *engine, int i);
size_t kiln_engine_output_bytes(const kiln_engine *engine, int i);

/* A context running the engine on threads threads (0: all cores). */
kiln_context *kiln_context_new(kiln_engine *engine, int threads, char *err, size_t errlen);
/* Runs one inference: 0 on success. */
int kiln_context_run(kiln_context *context, const void *const *inputs, void *const *outputs, char *err, size_t errlen);
void kiln_context_free(kiln_context *context);

#endif /* KILN_CGO */

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
