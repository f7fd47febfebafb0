/*
 * digit: classify a handwritten digit with a kiln engine through libkiln.
 *
 *   digit ENGINE IMAGE.npy
 *
 * ENGINE is digits_mlp built by `bin/cc build testdata/models/digits_mlp.onnx`
 * (one float input of 64 pixels, 0 to 1; one output of 10 class scores);
 * IMAGE.npy is an 8x8 image as NumPy saves float32 (digit_2.npy here).
 * Prints the scores and the class: the largest score's index.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"

/* read_npy reads a little-endian float32 .npy file of exactly want bytes. */
static void *read_npy(const char *path, size_t want) {
	FILE *f = fopen(path, "rb");
	if (!f) { perror(path); return NULL; }
	unsigned char magic[10];
	if (fread(magic, 1, 10, f) != 10 || memcmp(magic, "\x93NUMPY", 6) != 0) {
		fprintf(stderr, "%s: not a .npy file\n", path);
		fclose(f);
		return NULL;
	}
	size_t hlen = magic[8] | magic[9] << 8;
	if (magic[6] != 1) { /* versions 2 and 3 have a 4-byte header length */
		unsigned char more[2];
		if (fread(more, 1, 2, f) != 2) { fclose(f); return NULL; }
		hlen |= (size_t)more[0] << 16 | (size_t)more[1] << 24;
	}
	char *header = calloc(1, hlen + 1);
	void *data = malloc(want + 1);
	if (!header || !data || fread(header, 1, hlen, f) != hlen) {
		fprintf(stderr, "%s: short header\n", path);
		goto fail;
	}
	if (!strstr(header, "'descr': '<f4'") || !strstr(header, "'fortran_order': False")) {
		fprintf(stderr, "%s: want float32 ('<f4') in C order, the header is %s\n", path, header);
		goto fail;
	}
	size_t got = fread(data, 1, want + 1, f);
	if (got != want) {
		fprintf(stderr, "%s: %zu bytes of data, the engine's input takes %zu\n", path, got, want);
		goto fail;
	}
	free(header);
	fclose(f);
	return data;
fail:
	free(header);
	free(data);
	fclose(f);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: %s ENGINE IMAGE.npy\n", argv[0]);
		return 2;
	}
	char err[512];
	kiln_engine *engine = kiln_engine_load(argv[1], err, sizeof err);
	if (!engine) {
		fprintf(stderr, "digit: %s\n", err);
		return 1;
	}
	if (kiln_engine_input_count(engine) != 1 || kiln_engine_output_count(engine) < 1 ||
	    strcmp(kiln_engine_input_dtype(engine, 0), "float") != 0 ||
	    strcmp(kiln_engine_output_dtype(engine, 0), "float") != 0) {
		fprintf(stderr, "digit: want an engine with one float input and a float output\n");
		kiln_engine_free(engine);
		return 1;
	}
	int64_t dims[8];
	int rank = kiln_engine_input_rank(engine, 0);
	kiln_engine_input_shape(engine, 0, dims, 8);
	printf("engine %s: input \"%s\" float[", argv[1], kiln_engine_input_name(engine, 0));
	for (int i = 0; i < rank && i < 8; i++) printf(i ? ",%lld" : "%lld", (long long)dims[i]);
	printf("], output \"%s\"\n", kiln_engine_output_name(engine, 0));

	void *pixels = read_npy(argv[2], kiln_engine_input_bytes(engine, 0));
	size_t nscores = kiln_engine_output_bytes(engine, 0) / sizeof(float);
	float *scores = malloc(kiln_engine_output_bytes(engine, 0));
	/* Every output needs a buffer, even those the example does not print. */
	int nout = kiln_engine_output_count(engine);
	void **outputs = calloc(nout, sizeof *outputs);
	outputs[0] = scores;
	for (int i = 1; i < nout; i++) outputs[i] = malloc(kiln_engine_output_bytes(engine, i));
	int status = 1;
	kiln_context *context = NULL;
	if (!pixels || !scores) goto done;
	context = kiln_context_new(engine, 1, err, sizeof err);
	if (!context) {
		fprintf(stderr, "digit: %s\n", err);
		goto done;
	}
	const void *inputs[] = {pixels};
	if (kiln_context_run(context, inputs, outputs, err, sizeof err) != 0) {
		fprintf(stderr, "digit: %s\n", err);
		goto done;
	}
	size_t best = 0;
	printf("scores");
	for (size_t i = 0; i < nscores; i++) {
		printf(" %.9g", scores[i]);
		if (scores[i] > scores[best]) best = i;
	}
	printf("\nclass %zu\n", best);
	status = 0;
done:
	kiln_context_free(context);
	kiln_engine_free(engine);
	for (int i = 1; i < nout; i++) free(outputs[i]);
	free(outputs);
	free(scores);
	free(pixels);
	return status;
}
