"""What every generated program shares: kernel signatures (declarations, arguments bound
by name), programs and their launches, the loaders, and the small source helpers."""

from __future__ import annotations

import pytest
import torch

from gsparse import runtime
from gsparse.kernels import source
from gsparse.kernels.source import (
    OPERAND,
    PRELUDE,
    RUNTIME_LOADER,
    Program,
    Signature,
    device_code,
    device_index,
    elementwise_expr,
    identity_expr,
    indent,
)

from recording import RecordingLoader

SCALE = Signature("scale", [("const float* __restrict__", "x"), ("float* __restrict__", "out"),
                            ("long long", "n"), ("float", "alpha")])


# --- signatures -------------------------------------------------------------------------------


def test_declaration_prints_the_parameters_in_order() -> None:
    assert SCALE.declaration(bounds=(256,)) == (
        'extern "C" __global__ void __launch_bounds__(256)\n'
        "scale(const float* __restrict__ x, float* __restrict__ out, long long n, float alpha)")
    assert SCALE.declaration().startswith('extern "C" __global__ void\nscale(')
    assert Signature("empty", []).declaration() == 'extern "C" __global__ void\nempty()'


def test_long_declarations_wrap_at_100_columns_under_the_opening_parenthesis() -> None:
    wide = Signature("k", [("const float* __restrict__", f"p{i}") for i in range(6)])
    lines = wide.declaration(bounds=(128, 2)).splitlines()
    assert lines[0] == 'extern "C" __global__ void __launch_bounds__(128, 2)'
    assert lines[1].startswith("k(const float* __restrict__ p0, ") and len(lines) == 3
    assert lines[2].startswith("  const float* __restrict__ p3") and lines[2].endswith("p5)")
    assert all(len(line) <= 100 for line in lines)


def test_signatures_refuse_repeated_names_and_unknown_scalar_types() -> None:
    with pytest.raises(ValueError, match=r"kernel 'd' declares a parameter twice: \['a', 'a'\]"):
        Signature("d", [("int", "a"), ("int", "a")])
    with pytest.raises(ValueError, match="parameter 'a' of 'd' has type 'short': a pointer or one of"):
        Signature("d", [("short", "a")])


def test_arguments_are_bound_by_name_and_converted_to_the_declared_types() -> None:
    x = torch.zeros(3)
    args = SCALE.arguments({"alpha": 2, "n": 5, "out": None, "x": x})
    assert args[0] is x and args[1] is None
    assert args[2:] == [runtime.i64(5), runtime.f32(2.0)]
    assert SCALE.arguments({"x": OPERAND, "out": OPERAND, "n": runtime.i64(7), "alpha": 1.5})[2] == \
        runtime.i64(7)
    narrow = Signature("k", [("int", "n"), ("double", "scale")])
    assert narrow.arguments({"n": 3, "scale": 1}) == [runtime.i32(3), runtime.f64(1.0)]


@pytest.mark.parametrize(("values", "error", "message"), [
    ({"x": None, "out": None, "n": 5}, TypeError, r"kernel 'scale': no value for \['alpha'\]"),
    ({"x": None, "out": None, "n": 5, "alpha": 1, "m": 2}, TypeError,
     r"kernel 'scale' has no parameters \['m'\]; it takes \['x', 'out', 'n', 'alpha'\]"),
    ({"x": None, "out": None, "n": runtime.i32(5), "alpha": 1}, TypeError,
     "kernel 'scale': parameter 'n' is a long long, got a int32_t scalar"),
    ({"x": 3, "out": None, "n": 1, "alpha": 1}, TypeError,
     r"pointer parameter 'x' \(const float\* __restrict__\) takes a tensor, None or OPERAND, got int"),
    ({"x": None, "out": None, "n": None, "alpha": 1}, TypeError,
     r"scalar parameter 'n' \(long long\) takes a number, got None"),
    ({"x": None, "out": None, "n": torch.ones(1), "alpha": 1}, TypeError, "scalar parameter 'n'"),
    ({"x": None, "out": None, "n": 1.5, "alpha": 1}, TypeError, "integer"),  # never truncated
    ({"x": None, "out": None, "n": 2**63, "alpha": 1}, ValueError, "int64_t argument must be in"),
])
def test_arguments_say_what_is_wrong(values: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        SCALE.arguments(values)


def test_converted_sizes_are_remembered_by_value_and_type() -> None:
    narrow = Signature("k", [("int", "n"), ("float", "scale")])
    first = narrow.arguments({"n": 40_961, "scale": 3})
    again = narrow.arguments({"n": 40_961, "scale": 3})
    assert first == again and first[0] is again[0]  # one conversion for the plans of new graphs
    for refused in (40_961.0, True, [40_961]):  # equal or hashable or not, still refused
        with pytest.raises(TypeError, match="kernel 'k': parameter 'n' \\(int\\)"):
            narrow.arguments({"n": refused, "scale": 3})
    assert narrow.arguments({"n": 1, "scale": 1.0})[1] == runtime.f32(1.0)


# --- programs and their launches ---------------------------------------------------------------


def _program() -> Program:
    return Program(f"{SCALE.declaration(bounds=(256,))} {{ }}", {"scale": SCALE}, "scale | test")


def test_prepare_binds_by_name_and_each_call_fills_in_the_operands() -> None:
    program, loader = _program(), RecordingLoader()
    launch = program.prepare("scale", 0, (4,), 256, loader=loader, shared_bytes=64,
                             out=OPERAND, x=OPERAND, n=1000, alpha=0.5)
    assert launch.operands == ("x", "out")  # in parameter order
    assert loader.loaded == ["scale"] and loader.prepared == ["scale"]
    a, b, c = torch.ones(3), torch.ones(3), torch.ones(3)
    launch(out=b, x=a)
    launch(x=c, out=None)
    first, second = loader.launches["scale"]
    assert first.args == {"x": a, "out": b, "n": 1000, "alpha": 0.5}
    assert first.c_types == {"n": "int64_t", "alpha": "float"}
    assert (first.grid, first.block, first.shared_bytes) == ((4,), 256, 64)
    assert second.args["x"] is c and second.args["out"] is None


def test_a_scalar_operand_is_filled_in_by_each_call() -> None:
    """Sizes as operands: a launch prepared once serves inputs of any size (with a grid per
    call)."""
    program, loader = _program(), RecordingLoader()
    assert SCALE.arguments({"x": OPERAND, "out": None, "n": OPERAND, "alpha": 1})[2] == \
        runtime.ScalarOperand("int64_t")
    launch = program.prepare("scale", 0, 1, 256, loader=loader, x=OPERAND, out=None, n=OPERAND,
                             alpha=0.5)
    assert launch.operands == ("x", "n")
    x = torch.ones(3)
    launch(x=x, n=3)
    [record] = loader.launches["scale"]
    assert record.args == {"x": x, "out": None, "n": 3, "alpha": 0.5}
    assert record.c_types == {"n": "int64_t", "alpha": "float"}


def test_a_launch_takes_exactly_its_operands() -> None:
    launch = _program().prepare("scale", 0, 1, 256, loader=RecordingLoader(), x=OPERAND,
                                out=OPERAND, n=1, alpha=1)
    for operands in ({"x": None}, {"x": None, "out": None, "alpha": None}, {"x": None, "y": None}):
        with pytest.raises(TypeError, match=r"this launch takes the operands \['x', 'out'\]"):
            launch(**operands)


def test_prepare_checks_the_arguments_before_loading_anything() -> None:
    loader = RecordingLoader()
    with pytest.raises(TypeError, match="no value for"):
        _program().prepare("scale", 0, 1, 256, loader=loader, x=OPERAND)
    assert loader.loaded == []


def test_the_runtime_loader_looks_a_kernel_up_once_per_program_and_device(monkeypatch) -> None:
    # runtime.get_kernel hashes the whole source: a repeated lookup must not pay for it again.
    looked_up = []

    def get_kernel(source_text, name, *, context="", device=None):
        looked_up.append((name, device, context))
        return object()

    monkeypatch.setattr(runtime, "get_kernel", get_kernel)
    program = _program()
    first = RUNTIME_LOADER.kernel(program, "scale", 0)
    assert RUNTIME_LOADER.kernel(program, "scale", 0) is first
    assert RUNTIME_LOADER.kernel(program, "scale", 1) is not first
    assert looked_up == [("scale", 0, "scale | test"), ("scale", 1, "scale | test")]
    assert set(program.loaded) == {("scale", 0), ("scale", 1)}
    RUNTIME_LOADER.kernel(_program(), "scale", 0)  # another program: its own lookup
    assert len(looked_up) == 3


# --- helpers ---------------------------------------------------------------------------------


def test_device_index_of_tensors_off_the_gpu_is_minus_one() -> None:
    assert device_index(torch.device("cpu")) == -1
    assert device_index(torch.device("cuda", 3)) == 3


def test_source_helpers() -> None:
    assert elementwise_expr("a + b") == "a[i] + b[i]"
    assert elementwise_expr("a") == "a[i]"
    assert identity_expr(0.0) == "A(0)"
    assert identity_expr(float("-inf")) == "A(-__int_as_float(0x7f800000))"
    assert identity_expr(float("inf")) == "A(__int_as_float(0x7f800000))"
    assert indent("a\n\n  b", 4) == "    a\n\n      b"


def test_shipped_device_code_is_read_from_the_package() -> None:
    assert PRELUDE == device_code("gsparse.kernels", "prelude.cuh")
    assert "__device__ __forceinline__ T from_acc(float x);" in PRELUDE
    assert "store(i, " in device_code("gsparse.kernels.softmax.codegen", "backward_pass.cu")
    assert source.SCALAR_TYPES[torch.bfloat16] == "__nv_bfloat16"
    assert source.ACCUMULATOR_TYPES[torch.float16] == "float"
    assert source.INDEX_TYPES == {torch.int32: "int", torch.int64: "long long"}
