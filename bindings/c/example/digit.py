#!/usr/bin/env python3
"""digit.py: classify a handwritten digit with a kiln engine through
libkiln.so, with ctypes and no packages.

    python3 digit.py LIBKILN.so ENGINE IMAGE.npy

ENGINE is digits_mlp built by `bin/cc build testdata/models/digits_mlp.onnx`;
IMAGE.npy is an 8x8 image as NumPy saves float32 (digit_2.npy here). Prints
what the C example (digit.c) prints: the scores and the class.
"""
import ast
import ctypes
import struct
import sys


def load(lib_path):
    lib = ctypes.CDLL(lib_path)
    c = ctypes
    lib.kiln_engine_load.argtypes = [c.c_char_p, c.c_char_p, c.c_size_t]
    lib.kiln_engine_load.restype = c.c_void_p
    lib.kiln_engine_free.argtypes = [c.c_void_p]
    for name in ("input", "output"):
        getattr(lib, f"kiln_engine_{name}_count").argtypes = [c.c_void_p]
        getattr(lib, f"kiln_engine_{name}_count").restype = c.c_int
        for what, restype in (("name", c.c_char_p), ("dtype", c.c_char_p), ("rank", c.c_int), ("bytes", c.c_size_t)):
            f = getattr(lib, f"kiln_engine_{name}_{what}")
            f.argtypes, f.restype = [c.c_void_p, c.c_int], restype
        f = getattr(lib, f"kiln_engine_{name}_shape")
        f.argtypes, f.restype = [c.c_void_p, c.c_int, c.POINTER(c.c_int64), c.c_int], c.c_int
    lib.kiln_context_new.argtypes = [c.c_void_p, c.c_int, c.c_char_p, c.c_size_t]
    lib.kiln_context_new.restype = c.c_void_p
    lib.kiln_context_run.argtypes = [c.c_void_p, c.POINTER(c.c_void_p), c.POINTER(c.c_void_p), c.c_char_p, c.c_size_t]
    lib.kiln_context_run.restype = c.c_int
    lib.kiln_context_free.argtypes = [c.c_void_p]
    return lib


def read_npy(path, want):
    """The float32 data of a .npy file, which must be want bytes."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit(f"{path}: not a .npy file")
    if data[6] == 1:
        (hlen,), start = struct.unpack("<H", data[8:10]), 10
    else:
        (hlen,), start = struct.unpack("<I", data[8:12]), 12
    header = ast.literal_eval(data[start:start + hlen].decode("latin1"))
    if header["descr"] != "<f4" or header["fortran_order"]:
        sys.exit(f"{path}: want float32 ('<f4') in C order, the header is {header}")
    body = data[start + hlen:]
    if len(body) != want:
        sys.exit(f"{path}: {len(body)} bytes of data, the engine's input takes {want}")
    return body


def main():
    if len(sys.argv) != 4:
        sys.exit(f"usage: {sys.argv[0]} LIBKILN.so ENGINE IMAGE.npy")
    lib = load(sys.argv[1])
    err = ctypes.create_string_buffer(512)
    engine = lib.kiln_engine_load(sys.argv[2].encode(), err, len(err))
    if not engine:
        sys.exit(f"digit.py: {err.value.decode()}")
    try:
        if lib.kiln_engine_input_count(engine) != 1 or lib.kiln_engine_input_dtype(engine, 0) != b"float" \
                or lib.kiln_engine_output_dtype(engine, 0) != b"float":
            sys.exit("digit.py: want an engine with one float input and a float output")
        rank = lib.kiln_engine_input_rank(engine, 0)
        dims = (ctypes.c_int64 * rank)()
        lib.kiln_engine_input_shape(engine, 0, dims, rank)
        print(f'engine {sys.argv[2]}: input "{lib.kiln_engine_input_name(engine, 0).decode()}" '
              f'float[{",".join(str(d) for d in dims)}], output "{lib.kiln_engine_output_name(engine, 0).decode()}"')
        pixels = ctypes.create_string_buffer(read_npy(sys.argv[3], lib.kiln_engine_input_bytes(engine, 0)))
        nout = lib.kiln_engine_output_count(engine)
        outs = [ctypes.create_string_buffer(lib.kiln_engine_output_bytes(engine, i)) for i in range(nout)]
        context = lib.kiln_context_new(engine, 1, err, len(err))
        if not context:
            sys.exit(f"digit.py: {err.value.decode()}")
        try:
            inputs = (ctypes.c_void_p * 1)(ctypes.cast(pixels, ctypes.c_void_p))
            outputs = (ctypes.c_void_p * nout)(*[ctypes.cast(o, ctypes.c_void_p) for o in outs])
            if lib.kiln_context_run(context, inputs, outputs, err, len(err)) != 0:
                sys.exit(f"digit.py: {err.value.decode()}")
        finally:
            lib.kiln_context_free(context)
        raw = outs[0].raw
        scores = struct.unpack(f"<{len(raw) // 4}f", raw)
        # %.9g as the C example prints: a float32 read back exactly.
        print("scores " + " ".join("%.9g" % s for s in scores))
        print(f"class {max(range(len(scores)), key=lambda i: (scores[i], -i))}")
    finally:
        lib.kiln_engine_free(engine)


if __name__ == "__main__":
    main()
