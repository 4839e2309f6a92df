"""Number formats against their published limits, rounding against torch's casts and a bit-level
TF32 reference, loss scaling against torch.amp.GradScaler, FP8 per-tensor scaling."""

from __future__ import annotations

import json
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.params import ParamsError, parse
from app.sim.precision.params import PrecisionParams
from app.sim.precision.loss_scaling import dynamic_loss_scaling, fp8_quantise, update_scale
from app.sim.precision.number_formats import (FORMATS, KEYS, encode, fractions, fractions_per_row,
                                    ieee_max, round_to)
from app.sim.precision.simulate import SAMPLES, histogram, histograms, make_gradients, simulate


def params(**query) -> PrecisionParams:
    return parse(PrecisionParams, {k: str(v) for k, v in query.items()})


# IEEE 754; NVIDIA A100 whitepaper (TF32); Micikevicius et al. 2022, Table 1 (FP8)
PUBLISHED = [
    ("fp32", 3.4028234663852886e38, 2.0**-126, 2.0**-149, 2.0**-23),
    ("tf32", (2 - 2.0**-10) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10),
    ("fp16", 65504.0, 2.0**-14, 2.0**-24, 2.0**-10),
    ("bf16", 3.3895313892515355e38, 2.0**-126, 2.0**-133, 2.0**-7),
    ("fp8_e4m3", 448.0, 2.0**-6, 2.0**-9, 2.0**-3),
    ("fp8_e5m2", 57344.0, 2.0**-14, 2.0**-16, 2.0**-2),
]


@pytest.mark.parametrize("key,largest,normal,subnormal,eps", PUBLISHED)
def test_format_limits_are_the_published_ones(key, largest, normal, subnormal, eps):
    f = FORMATS[key]
    assert (f.max, f.min_normal, f.min_subnormal, f.eps) == (largest, normal, subnormal, eps)
    if f.dtype is not None:
        info = ml_dtypes.finfo(f.dtype)
        assert (float(info.tiny), float(info.smallest_subnormal)) == (normal, subnormal)
    assert round_to([largest], f)[0] == largest
    assert round_to([subnormal], f)[0] == subnormal
    assert round_to([subnormal * 0.49], f)[0] == 0  # below half the smallest subnormal


@pytest.mark.parametrize("key", ["fp32", "fp16", "bf16", "fp8_e5m2"])
def test_ieee_formula_agrees_with_ml_dtypes(key):
    """The formula that gives TF32's largest value, checked on the IEEE-style formats."""
    f = FORMATS[key]
    assert ieee_max(f.exponent_bits, f.mantissa_bits) == f.max


def sample_values(seed: int, n: int = 20000) -> np.ndarray:
    """fp32 values over the whole range: normals, subnormals, exact ties, powers of two."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**31 - 2**23, size=n, dtype=np.uint32)  # every finite positive
    x = bits.view(np.float32).astype(np.float64)
    ties = (np.arange(1, 200) + 0.5) * 2.0 ** -10  # halfway between fp16 numbers near 1
    return np.concatenate([x, -x[:500], ties, 2.0 ** np.arange(-149, 128), [0.0]])


@pytest.mark.parametrize("key,torch_dtype", [("fp16", "float16"), ("bf16", "bfloat16"),
                                             ("fp8_e4m3", "float8_e4m3fn"),
                                             ("fp8_e5m2", "float8_e5m2")])
def test_rounding_matches_torch_casts(key, torch_dtype):
    torch = pytest.importorskip("torch")
    fmt = FORMATS[key]
    x = sample_values(1)
    x = x[np.abs(x) <= fmt.max].astype(np.float32)
    expected = torch.tensor(x).to(getattr(torch, torch_dtype)).to(torch.float64).numpy()
    np.testing.assert_array_equal(round_to(x, fmt), expected)


def tf32_by_bits(x: np.ndarray) -> np.ndarray:
    """Independent reference: round the fp32 bit pattern to 10 fraction bits, ties to even."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) & ~np.uint64(0x1FFF)).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


@pytest.mark.parametrize("seed", range(3))
def test_tf32_rounding_matches_the_bit_reference(seed):
    x = sample_values(seed)
    x = x[np.abs(x) < FORMATS["tf32"].max].astype(np.float32)
    np.testing.assert_array_equal(round_to(x, FORMATS["tf32"]), tf32_by_bits(x))


def test_tf32_overflows_past_its_largest_value():
    largest = FORMATS["tf32"].max
    assert round_to([largest], FORMATS["tf32"])[0] == largest
    assert math.isinf(round_to([np.finfo(np.float32).max], FORMATS["tf32"])[0])


def decode(bits: str, key: str) -> float:
    """Value of a bit pattern, from the format's field widths alone."""
    f = FORMATS[key]
    sign = -1.0 if bits[0] == "1" else 1.0
    e = int(bits[1:1 + f.exponent_bits], 2)
    m = int(bits[1 + f.exponent_bits:], 2) / 2 ** f.mantissa_bits
    if e == 0:
        return sign * 2.0 ** (1 - f.bias) * m
    return sign * 2.0 ** (e - f.bias) * (1 + m)


BITS = [(1.0, "fp32", "0 01111111 00000000000000000000000", "normal"),
        (-2.0, "bf16", "1 10000000 0000000", "normal"),
        (0.1, "fp16", "0 01011 1001100110", "normal"),
        (448.0, "fp8_e4m3", "0 1111 110", "normal"),
        (57344.0, "fp8_e5m2", "0 11110 11", "normal"),
        (2.0**-24, "fp16", "0 00000 0000000001", "subnormal"),
        (1e-9, "fp16", "0 00000 0000000000", "zero"),
        (0.1, "tf32", "0 01111011 1001100110", "normal")]


@pytest.mark.parametrize("value,key,bits,kind", BITS)
def test_bit_patterns(value, key, bits, kind):
    enc = encode(value, FORMATS[key])
    assert f"{enc.sign} {enc.exponent} {enc.mantissa}" == bits
    assert enc.kind == kind
    assert decode(bits.replace(" ", ""), key) == enc.rounded


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("value", [0.1, -3.14159, 1e-5, 7e-8, 300.0, 1 / 3])
def test_encoding_decodes_to_the_rounded_value(key, value):
    enc = encode(value, FORMATS[key])
    if enc.kind == "overflow":
        assert abs(value) > FORMATS[key].max
        return
    assert decode(enc.sign + enc.exponent + enc.mantissa, key) == enc.rounded
    assert enc.error == enc.rounded - value
    if enc.kind == "normal":  # round to nearest: at most half a spacing
        assert enc.relative_error <= FORMATS[key].eps / 2 * (1 + 1e-12)


def test_fractions_count_what_rounding_does():
    g = make_gradients(1, -5, 1.5, 3)[0]
    for key in KEYS:
        f = FORMATS[key]
        share = fractions(g, f)
        r = round_to(g, f)
        assert share["underflow"] == np.mean(r == 0)
        assert share["subnormal"] == np.mean((r != 0) & (np.abs(r) < f.min_normal))


def test_update_rule_matches_torch():
    torch = pytest.importorskip("torch")
    flags = [False, True, False, False, False, True, True, False, False, False, False, False]
    scale, tracker = torch.tensor([2.0**16]), torch.tensor([0], dtype=torch.int32)
    ours, our_tracker = 2.0**16, 0
    for flag in flags:
        torch._amp_update_scale_(scale, tracker, torch.tensor([float(flag)]), 2.0, 0.5, 3)
        ours, our_tracker = update_scale(ours, our_tracker, flag, 3)
        assert ours == scale.item() and our_tracker == tracker.item()


@pytest.mark.parametrize("center,spread,interval,seed", [(-4.5, 1.2, 4, 0), (-2, 1, 2, 1),
                                                         (-7, 0.5, 10, 2)])
def test_loss_scaling_follows_grad_scaler(center, spread, interval, seed):
    """torch.amp.GradScaler fed the same FP16 gradients skips the same steps and ends with
    the same scale."""
    torch = pytest.importorskip("torch")
    grads = make_gradients(30, center, spread, seed)
    ours = dynamic_loss_scaling(list(grads), 2.0**16, interval)
    param = torch.zeros(grads.shape[1], requires_grad=True)
    opt = torch.optim.SGD([param], lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16, growth_interval=interval)
    for g, step in zip(grads, ours):
        assert scaler.scale(torch.ones(())).item() == step.scale
        param.grad = torch.tensor(g * step.scale).half().float()  # the FP16 backward
        scaler.step(opt)
        scaler.update()
        assert scaler.get_scale() == step.scale_after  # halved exactly when it skipped


def test_default_run_shows_the_sawtooth():
    trace = simulate(params())
    skipped = [s for s in trace.scale_steps if s.found_inf]
    grown = [s for s in trace.scale_steps if s.scale_after > s.scale]
    assert skipped and grown
    for s in skipped:
        assert s.max_scaled > 65504 and s.scale_after == s.scale / 2


@pytest.mark.parametrize("key", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("margin", [0, 2])
def test_fp8_per_tensor_scaling(key, margin):
    x = make_gradients(1, -4, 1, 7)[0]
    fmt = FORMATS[key]
    scaled = fp8_quantise(x, key, "per_tensor", margin)
    plain = fp8_quantise(x, key, "none", margin)
    assert scaled.scale == fmt.max / np.abs(x).max() / 2**margin
    assert scaled.overflow == 0
    assert scaled.underflow <= plain.underflow
    assert scaled.rms_relative_error < plain.rms_relative_error
    # amax lands on the format's largest value (margin 0) or 2^margin below it
    top = round_to([np.abs(x).max() * scaled.scale], fmt)[0]
    assert top == pytest.approx(fmt.max / 2**margin, rel=fmt.eps)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.floats(-3.4e38, 3.4e38), key=st.sampled_from(KEYS),
       center=st.floats(-12, 2), spread=st.floats(0.1, 3), steps=st.integers(1, 64),
       scale=st.integers(0, 40), interval=st.integers(1, 100), margin=st.integers(0, 8))
def test_any_accepted_input_is_finite_and_fast(value, key, center, spread, steps, scale,
                                               interval, margin):
    try:
        p = params(value=repr(value), format=key, grad_center=center, grad_spread=spread,
                   steps=steps, init_scale_log2=scale, growth_interval=interval,
                   fp8_margin=margin)
    except ParamsError as error:
        assert [pr.param for pr in error.problems] == ["value"]
        assert abs(value) > FORMATS[key].max * (1 - FORMATS[key].eps)
        return
    data = simulate(p).to_dict()  # its time is measured by make bench
    json.dumps(data, allow_nan=False)


# --- the fast paths give what the plain definitions give -------------------------------------

def awkward_rows() -> np.ndarray:
    """Rows of gradients plus the values where rounding and binning change: zeros, each
    format's smallest subnormal and half of it, its smallest normal and just below, its largest
    and just past it, powers of two and their neighbours."""
    special = [0.0, -0.0, 1.0, 2.0, 0.5, -4.0, np.nextafter(2.0, 0), np.nextafter(0.5, 1)]
    for f in FORMATS.values():
        special += [f.min_subnormal, f.min_subnormal / 2, -f.min_normal,
                    np.nextafter(f.min_normal, 0), f.max, -np.nextafter(f.max, np.inf),
                    f.max * (1 + 2.0 ** -12)]
    g = make_gradients(3, -5, 3, 11)[:, :300]
    return np.concatenate([g, np.tile(special, (3, 1))], axis=1)


@pytest.mark.parametrize("key", KEYS)
def test_fractions_per_row_are_fractions_of_each_row(key):
    rows = awkward_rows() * np.array([[1.0], [2.0**10], [2.0**-20]])
    for row, (under, sub) in zip(rows, fractions_per_row(rows, FORMATS[key])):
        share = fractions(row, FORMATS[key])
        assert (under, sub) == (share["underflow"], share["subnormal"])


def test_shifted_histograms_are_histograms_of_the_scaled_rows():
    """Multiplying by 2^k moves every value exactly k binades; each value's binade is
    ⌊log2 |x|⌋ — frexp's exponent minus one, which a rounded log2 gets wrong one ulp below a
    power of two — zeros left out, the ends clipped into the first and last bins."""
    rows = awkward_rows()
    shifts = np.array([0, 16, -9])
    for low, high in ((-40, 20), (-150, 130)):
        got = histograms(rows, low, high, shifts)
        for row, shift, h in zip(rows, shifts, got):
            scaled = row * 2.0 ** int(shift)
            assert h == histogram(scaled, low, high)
            nonzero = np.abs(scaled[scaled != 0])
            exponents = np.array([math.frexp(v)[1] - 1 for v in nonzero])
            expected = np.bincount(np.clip(exponents, low, high - 1) - low, minlength=high - low)
            assert h.counts == tuple(expected.tolist())


def test_gradients_are_numpys_normal_and_choice_streams():
    """The cached draws reproduce rng.normal(c, s) and rng.choice bit for bit."""
    rng = np.random.default_rng(5)
    wander = rng.normal(0.0, 0.15, size=(4, 1))
    exponents = rng.normal(-3.3, 1.7, size=(4, SAMPLES)) + wander
    signs = rng.choice((-1.0, 1.0), size=(4, SAMPLES))
    assert np.array_equal(make_gradients(4, -3.3, 1.7, 5), signs * 10.0 ** exponents)


@pytest.mark.parametrize("key", KEYS)
def test_overflow_threshold_is_where_rounding_overflows(key):
    """overflow_threshold (what loss scaling compares with) against round_to at the threshold
    and the float64 just below it, and FP16's known value: halfway from 65504 to 65536."""
    from app.sim.precision.number_formats import overflow_threshold
    f = FORMATS[key]
    t = overflow_threshold(f)
    assert not np.isfinite(round_to([t, -t], f)).any()
    below = math.nextafter(t, 0.0)
    assert round_to([below], f)[0] == f.max
    if key == "fp16":
        assert t == 65520.0


@pytest.mark.parametrize("center,init", [(-4.5, 16), (1.0, 16), (2.0, 40), (-8.0, 0)])
def test_loss_scaling_overflow_is_the_rounded_maximum(center, init):
    """found_inf from the threshold against rounding each step's largest |S·g| to FP16."""
    grads = make_gradients(24, center, 1.2, 0)
    for s, row in zip(dynamic_loss_scaling(grads, 2.0 ** init, 4), grads):
        largest = np.abs(row).max() * s.scale
        assert s.found_inf == (not np.isfinite(round_to([largest], FORMATS["fp16"])[0]))
