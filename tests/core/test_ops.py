"""Every op against an independent reference: OpenCV, SciPy or a slow obvious loop."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import scipy.ndimage as ndi

from foveate.core import ops


def slow_tile_mean(x: np.ndarray, p: int) -> np.ndarray:
    h, w = x.shape[:2]
    gh, gw = -(-h // p), -(-w // p)
    out = np.zeros((gh, gw) + x.shape[2:], np.float64)
    for r in range(gh):
        for c in range(gw):
            out[r, c] = x[r * p : (r + 1) * p, c * p : (c + 1) * p].mean(axis=(0, 1))
    return out


@pytest.mark.parametrize("patch", [16, 14])
def test_axis_overlap_counts_the_pixels_of_each_tile(patch):
    """Pixels of [lo, hi) in each tile, counted pixel by pixel on integer bounds (bounds outside the grid, on tile
    edges, empty); the overlaps of an interval inside the grid add up to its length."""
    rng = np.random.default_rng(patch)
    n = 9
    lo = np.concatenate([rng.integers(-20, n * patch, 40), [0, patch, -30, 5, n * patch + 3]])
    hi = np.concatenate([lo[:40] + rng.integers(0, 80, 40), [patch, 3 * patch, -2, 5, n * patch + 9]])
    got = ops.axis_overlap(lo, hi, n, patch)
    assert got.shape == (len(lo), n) and got.dtype == np.float64
    for k in range(len(lo)):
        ref = [sum(1 for px in range(i * patch, (i + 1) * patch) if lo[k] <= px < hi[k]) for i in range(n)]
        np.testing.assert_array_equal(got[k], ref)
    inside = (lo >= 0) & (hi <= n * patch) & (hi >= lo)
    np.testing.assert_array_equal(got[inside].sum(1), (hi - lo)[inside])


@pytest.mark.parametrize("factor", [2, 3, 4, 8, 12])
def test_area_shrink_is_the_block_mean(factor):
    rng = np.random.default_rng(factor)
    h, w = 6 * factor, 10 * factor
    x = rng.random((h, w, 3)).astype(np.float32)
    ref = x.reshape(h // factor, factor, w // factor, factor, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(ops.area_shrink(x, factor), ref, rtol=1e-5, atol=1e-6)
    g = rng.integers(0, 256, (h, w), dtype=np.uint8)  # uint8: rounded at every step, half a level each
    ref = g.reshape(h // factor, factor, w // factor, factor).mean(axis=(1, 3))
    got = ops.area_shrink(g, factor)
    steps = {2: 1, 3: 1, 4: 2, 8: 3, 12: 3}[factor]
    assert got.dtype == np.uint8 and got.shape == ref.shape and np.abs(got - ref).max() <= 0.5 * steps
    with pytest.raises(ValueError, match="not a multiple"):
        ops.area_shrink(g[:-1], factor)


@pytest.mark.parametrize("shape", [(64, 64), (50, 37), (16, 16), (1, 1), (5, 300), (33, 17, 3), (40, 24, 6)])
def test_tile_mean_matches_slow_loop(shape):
    x = np.random.default_rng(0).random(shape).astype(np.float32)
    np.testing.assert_allclose(ops.tile_mean(x, 16), slow_tile_mean(x, 16), rtol=1e-5, atol=1e-6)


def slow_mips(x0, cov0, n):
    """Mean-mip over real pixels and max-mip over existing children, by explicit loops."""
    means, maxes, covs = [x0.astype(np.float64)], [x0.astype(np.float64)], [cov0.astype(np.float64)]
    for _ in range(n - 1):
        m, x, c = means[-1], maxes[-1], covs[-1]
        h, w = m.shape[:2]
        h2, w2 = -(-h // 2), -(-w // 2)
        nm, nx, nc = np.zeros((h2, w2) + m.shape[2:]), np.zeros((h2, w2) + m.shape[2:]), np.zeros((h2, w2))
        for r in range(h2):
            for q in range(w2):
                kids = [(rr, cc) for rr in (2 * r, 2 * r + 1) for cc in (2 * q, 2 * q + 1) if rr < h and cc < w]
                wsum = sum(c[k] for k in kids)
                nm[r, q] = sum(m[k] * c[k] for k in kids) / wsum
                nx[r, q] = np.max([x[k] for k in kids], axis=0)
                nc[r, q] = wsum / 4
        means.append(nm)
        maxes.append(nx)
        covs.append(nc)
    return means, maxes, covs


@pytest.mark.parametrize("hw", [(64, 64), (1000, 700), (17, 300), (10, 10), (1, 1)])
def test_mips_match_slow_loop(hw):
    h, w = hw
    gh, gw = ops.grid_shape(h, w, 16)
    n = ops.num_levels(gh, gw, 5)
    x0 = np.random.default_rng(1).random((gh, gw, 3)).astype(np.float32)
    cov0 = ops.coverage0(h, w, 16)
    got = ops.build_mips(x0, cov0, n)
    want = slow_mips(x0, cov0, n)
    for g_list, w_list in zip(got, want):
        assert len(g_list) == len(w_list) == n
        for g, wv in zip(g_list, w_list):
            np.testing.assert_allclose(g, wv, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("hw", [(1000, 700), (17, 300), (1, 1)])
def test_query_maps_max_mip_is_build_mips_max(hw):
    """The query maps' pyramid (``QueryMaps.flat``: the max-mip alone, ``ops.max_down``) equals the slow loop's."""
    from types import SimpleNamespace

    import torch

    from foveate.query.terms import QueryMaps

    h, w = hw
    gh, gw = ops.grid_shape(h, w, 16)
    n = ops.num_levels(gh, gw, 5)
    maps = [np.random.default_rng(k).random((gh, gw)).astype(np.float32) for k in range(2)]
    got = QueryMaps(["a", "b"], maps).flat(SimpleNamespace(num_levels=n), torch.device("cpu")).numpy()
    _, maxes, _ = slow_mips(np.stack(maps, -1), ops.coverage0(h, w, 16), n)
    np.testing.assert_array_equal(got, np.concatenate([m.reshape(-1, 2) for m in maxes]))


def test_mean_mip_equals_opencv_area_on_even_grids():
    """On whole-tile images each mean level is the image area-averaged to that grid (OpenCV INTER_AREA)."""
    img = np.random.default_rng(2).random((256, 512)).astype(np.float32)
    x0 = ops.tile_mean(img, 16)[..., None]
    means, _, _ = ops.build_mips(x0, ops.coverage0(256, 512, 16), 5)
    for lvl, m in enumerate(means):
        ref = cv2.resize(img, (512 // (16 << lvl), 256 // (16 << lvl)), interpolation=cv2.INTER_AREA)
        np.testing.assert_allclose(m[..., 0], ref, rtol=1e-4, atol=1e-5)


def test_mean_mip_of_partial_tiles_is_mean_over_real_pixels():
    img = np.random.default_rng(3).random((40, 72)).astype(np.float32)  # 3x5 tiles, partial last row/column
    means, _, _ = ops.build_mips(ops.tile_mean(img, 16)[..., None], ops.coverage0(40, 72, 16), 3)
    np.testing.assert_allclose(means[1][0, 0, 0], img[:32, :32].mean(), rtol=1e-5)
    np.testing.assert_allclose(means[1][1, 2, 0], img[32:40, 64:72].mean(), rtol=1e-5)
    np.testing.assert_allclose(means[2][0, 0, 0], img[:40, :64].mean(), rtol=1e-5)
    np.testing.assert_allclose(means[2][0, 1, 0], img[:40, 64:].mean(), rtol=1e-5)


def test_max_mip_keeps_a_single_bright_tile():
    x0 = np.zeros((64, 64, 1), np.float32)
    x0[37, 11] = 1.0
    means, maxes, _ = ops.build_mips(x0, np.ones((64, 64), np.float32), 5)
    assert maxes[4][37 // 16, 11 // 16, 0] == 1.0
    assert means[4][37 // 16, 11 // 16, 0] == pytest.approx(1 / 256)


def test_grid_and_levels():
    assert ops.grid_shape(1024, 1024, 16) == (64, 64)
    assert ops.grid_shape(1000, 10, 16) == (63, 1)
    assert ops.num_levels(64, 64, 5) == 5
    assert ops.num_levels(1, 1, 5) == 1
    assert ops.num_levels(3, 1, 5) == 3  # 3 -> 2 -> 1 then stop
    assert ops.level_shapes(63, 1, 4) == [(63, 1), (32, 1), (16, 1), (8, 1)]
    cov = ops.coverage0(20, 40, 16)
    np.testing.assert_allclose(cov, [[1, 1, 0.5], [0.25, 0.25, 0.125]])


def test_pixel_pyramid_is_area_resampled():
    img = np.random.default_rng(4).integers(0, 256, (128, 96, 3), dtype=np.uint8)
    shapes = ops.level_shapes(8, 6, 3)
    pyr = ops.pixel_pyramid(img, 16, shapes)
    assert [p.shape for p in pyr] == [(128, 96, 3), (64, 48, 3), (32, 32, 3)]
    block = img.astype(np.float64).reshape(32, 4, 24, 4, 3).mean(axis=(1, 3))  # 4x4 box = level 2
    assert np.abs(pyr[2][:, :24].astype(np.float64) - block).max() <= 1.0  # uint8 rounding at each level


def test_pixel_pyramid_pads_non_multiple_sizes():
    img = np.random.default_rng(5).integers(0, 256, (21, 50, 3), dtype=np.uint8)
    gh, gw = ops.grid_shape(21, 50, 16)
    shapes = ops.level_shapes(gh, gw, ops.num_levels(gh, gw, 5))
    pyr = ops.pixel_pyramid(img, 16, shapes)
    for (h, w), p in zip(shapes, pyr):
        assert p.shape == (h * 16, w * 16, 3)
    np.testing.assert_array_equal(pyr[0][:21, :50], img)


def test_sobel_matches_opencv_and_scipy():
    gray = np.random.default_rng(6).integers(0, 256, (60, 80), dtype=np.uint8)
    gx, gy = ops.sobel_gradients(gray)
    ref_x = cv2.Sobel(gray.astype(np.float64), cv2.CV_64F, 1, 0, ksize=3, borderType=cv2.BORDER_REPLICATE)
    ref_y = cv2.Sobel(gray.astype(np.float64), cv2.CV_64F, 0, 1, ksize=3, borderType=cv2.BORDER_REPLICATE)
    np.testing.assert_array_equal(gx, ref_x)
    np.testing.assert_array_equal(gy, ref_y)
    sx = ndi.sobel(gray.astype(np.float64), axis=1, mode="nearest")
    np.testing.assert_allclose(gx, sx)
    mag = ops.gradient_magnitude(gx, gy)
    np.testing.assert_allclose(mag, np.hypot(ref_x, ref_y) / (4 * 255), rtol=1e-5, atol=1e-6)


def test_polarity_edges_split_sobel_by_ink_side():
    gray = np.full((64, 64), 230, np.uint8)
    gray[30:33, 8:56] = 20  # a dark stroke on light paper
    gx, gy = ops.sobel_gradients(gray)
    dark, light = ops.polarity_edges(gray, gx, gy)
    assert dark.sum() > 3 * light.sum()
    inv_gx, inv_gy = ops.sobel_gradients(255 - gray)
    dark_i, light_i = ops.polarity_edges(255 - gray, inv_gx, inv_gy)
    np.testing.assert_allclose(dark_i, light, atol=1e-5)  # inverting the image swaps the polarities
    np.testing.assert_allclose(light_i, dark, atol=1e-5)
    # wherever an edge registers, the two polarities partition the normalised Sobel response
    assert ((dark > 0) & (light > 0)).sum() == 0
    assert 0.0 <= float(min(dark.min(), light.min())) and float(max(dark.max(), light.max())) <= 1.0


def test_polarity_edges_are_contrast_normalised():
    def stroke(bg, ink):
        g = np.full((64, 64), bg, np.uint8)
        g[30:33, 8:56] = ink
        gx, gy = ops.sobel_gradients(g)
        return ops.polarity_edges(g, gx, gy)[0].sum()

    strong, faint = stroke(240, 10), stroke(200, 150)  # black-on-white vs grey-on-grey
    raw = lambda bg, ink: abs(bg - ink)  # noqa: E731
    assert raw(200, 150) / raw(240, 10) < 0.25
    assert faint / strong > 0.6


def test_distance_matches_scipy_edt():
    rng = np.random.default_rng(7)
    mask = rng.random((90, 70)) > 0.985
    np.testing.assert_allclose(ops.distance_to_mask(mask), ndi.distance_transform_edt(~mask), atol=1e-3)
    empty = ops.distance_to_mask(np.zeros((5, 8), bool))
    assert np.isfinite(empty).all() and (empty > 8).all()


@pytest.fixture()
def opencv_threads():
    before = cv2.getNumThreads()
    yield cv2.setNumThreads
    cv2.setNumThreads(before)


def test_edges_and_distances_are_the_same_bits_on_any_number_of_threads(opencv_threads):
    """A texture must not depend on the machine's cores (the store and the Ray datasets key textures by content):
    the gradient magnitude and the edge distance equal their exact references bit for bit at 1, 2 and 4
    OpenCV threads (cv2.magnitude and the raw cv2.distanceTransform do not)."""
    rng = np.random.default_rng(3)
    gray = cv2.GaussianBlur(rng.integers(0, 256, (301, 517), dtype=np.uint8), (5, 5), 0)
    mask = ops.edge_mask(gray, 10, 30)
    gx, gy = ops.sobel_gradients(gray)
    exact_mag = np.hypot(gx.astype(np.float64), gy.astype(np.float64)).astype(np.float32) * np.float32(
        1.0 / (4.0 * 255.0)
    )
    exact_dist = ndi.distance_transform_edt(~mask).astype(np.float32)
    far = np.zeros((700, 900), bool)  # distances up to ~1100 px: beyond what float32 pins down from OpenCV's
    far[3, 4] = True
    exact_far = ndi.distance_transform_edt(~far).astype(np.float32)
    for threads in (1, 2, 4):
        opencv_threads(threads)
        np.testing.assert_array_equal(ops.gradient_magnitude(gx, gy), exact_mag)
        np.testing.assert_array_equal(ops.distance_to_mask(mask), exact_dist)
        np.testing.assert_array_equal(ops.distance_to_mask(far), exact_far)


def test_band_energy():
    flat = np.full((32, 32), 128, np.uint8)
    hi, lo = ops.band_energy(flat)
    assert hi.max() < 1e-5 and lo.max() < 1e-5
    noise = np.random.default_rng(8).integers(0, 256, (32, 32), dtype=np.uint8)
    hi, lo = ops.band_energy(noise)
    assert hi.mean() > lo.mean() > 0  # white noise is mostly fine detail


def test_spectral_residual_finds_the_odd_blob():
    g = np.full((256, 256), 120, np.uint8)
    g[180:196, 40:56] = 250
    sal = ops.spectral_residual_saliency(g)
    assert sal.shape == (64, 64) and sal.max() == pytest.approx(1.0)
    r, c = np.unravel_index(np.argmax(sal), sal.shape)
    assert abs(r * 4 - 188) <= 16 and abs(c * 4 - 48) <= 16
    assert ops.spectral_residual_saliency(np.zeros((10, 1000), np.uint8)).shape == (1, 64)


def test_spectral_residual_matches_numpy_fft():
    """OpenCV's float32 DFT against the textbook formulation with NumPy's complex128 FFT (Hou & Zhang 2007)."""
    rng = np.random.default_rng(3)
    for shape in ((256, 256), (540, 960), (37, 500)):
        g = cv2.GaussianBlur(rng.integers(0, 256, shape).astype(np.uint8), (0, 0), 3)
        h, w = shape
        s = 64 / max(h, w)
        sh, sw = max(1, round(h * s)), max(1, round(w * s))
        small = cv2.resize(g, (sw, sh), interpolation=cv2.INTER_AREA).astype(np.float64) / 255.0
        spec = np.fft.fft2(small)
        log_amp = np.log1p(np.abs(spec))
        residual = log_amp - cv2.blur(log_amp.astype(np.float32), (3, 3), borderType=cv2.BORDER_REPLICATE)
        ref = np.abs(np.fft.ifft2(np.exp(residual + 1j * np.angle(spec)))) ** 2
        ref = cv2.GaussianBlur(ref.astype(np.float32), (0, 0), max(1.0, 2.5 * max(sh, sw) / 64.0))
        np.testing.assert_allclose(ops.spectral_residual_saliency(g), ref / ref.max(), atol=1e-4)


def test_superpixels_and_resize_nearest():
    img = np.zeros((80, 120, 3), np.uint8)
    img[:, 60:] = (250, 30, 30)
    labels, lab = ops.superpixels(img, 8)
    assert labels.min() == 0 and labels.max() + 1 == len(lab)
    assert set(labels[:, :55].ravel()).isdisjoint(labels[:, 65:].ravel())  # no segment crosses the colour edge
    lab_big = ops.resize_nearest(labels, (8, 12))
    assert lab_big.shape == (8, 12)
    assert (
        ops.resize_nearest(np.arange(4).reshape(2, 2), (4, 4)) == np.kron(np.arange(4).reshape(2, 2), np.ones((2, 2)))
    ).all()
